"""The backtest on a hand-made market whose every decision can be worked out on paper.

Five products, one price a day at noon for 60 days, one decision day (day 40), a 10-day
horizon:

- A (headphones): 100 every day but a 3-day sale at 80 (days 45-47), announced: WAIT on
  day 40 (a sale 5 days away, 20 % off), BUY on day 45 at the sale price. Paid 80.
- B (headphones): 100 every day, then 90 on days 43-44, unannounced: BUY on day 40 at
  its all-time low, then a price 10 % lower within the horizon. Paid 100.
- C (tvs): 100 until day 44, 110 from day 45, out of stock from day 38: WAIT every day,
  so it pays at the horizon, day 50: 110, more than buying at once.
- D (tvs): twelve one-star reviews: SKIP. E (tvs): listed on day 35, six prices: not
  enough data. Neither counts in the savings.

By hand: the saving is (100 − 80) + (100 − 100) + (100 − 110) = 10 against a clairvoyant
(100 − 80) + (100 − 90) + (100 − 100) = 30, a third; one of three decisions is worse off
than buying at once (C); regret 0 %, 10/90 = 11.11 % and 10/100 = 10 %, 7.04 % on average.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from worthit.decide.backtest import Outcome, plan_replay, replay, summarize
from worthit.facts.builder import FactsBuilder
from worthit.market.records import (
    PriceRecord,
    ProductRecord,
    PromotionRecord,
    Record,
    ReviewRecord,
    StockRecord,
)
from worthit.market.store import MarketStore

from conftest import run_cli

START = date(2026, 3, 1)
DAYS = 60
DECISION = 40
HORIZON = 10


def day(i: int) -> date:
    return START + timedelta(days=i)


def noon(i: int) -> datetime:
    d = day(i)
    return datetime(d.year, d.month, d.day, 12, tzinfo=UTC)


def midnight(i: int) -> datetime:
    d = day(i)
    return datetime(d.year, d.month, d.day, tzinfo=UTC)


def prices(sku: str, path: dict[int, float], first: int = 0) -> list[Record]:
    return [PriceRecord(sku=sku, ts=noon(i), price=path.get(i, 100.0)) for i in range(first, DAYS)]


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("backtest") / "hand.db"
    store = MarketStore(path)
    records: list[Record] = [
        ProductRecord(sku="A", title="Alpha Buds", brand="Alpha", category="headphones"),
        ProductRecord(sku="B", title="Beta Phones", brand="Beta", category="headphones"),
        ProductRecord(sku="C", title="Gamma TV", brand="Gamma", category="tvs"),
        ProductRecord(sku="D", title="Delta TV", brand="Delta", category="tvs"),
        ProductRecord(sku="E", title="Epsilon TV", brand="Epsilon", category="tvs"),
    ]
    records += prices("A", dict.fromkeys(range(45, 48), 80.0))
    records.append(
        PromotionRecord(
            sku="A", name="Spring Sale", starts=midnight(45), ends=midnight(48), price=80.0
        )
    )
    records += prices("B", {43: 90.0, 44: 90.0})
    records += prices("C", dict.fromkeys(range(45, DAYS), 110.0))
    records += [StockRecord(sku="C", ts=noon(i), quantity=0) for i in range(38, DAYS)]
    records += prices("D", {})
    records += [
        ReviewRecord(sku="D", review_id=f"d{i}", ts=noon(i), rating=1, text="broke")
        for i in range(12)
    ]
    records += prices("E", {}, first=35)
    store.apply(records)
    store.close()
    return path


def outcomes(market: Path) -> dict[str, Outcome]:
    store = MarketStore(market)
    plan = plan_replay(store, day(DECISION), day(DECISION), horizon=HORIZON)
    found = {o.sku: o for o in replay(FactsBuilder(store), plan, ["A", "B", "C", "D", "E"])}
    store.close()
    return found


def test_wait_pays_on_the_first_buy_day_or_at_the_horizon(market: Path) -> None:
    found = outcomes(market)
    a, b, c = found["A"], found["B"], found["C"]
    assert (a.verdict, a.bought_day, a.paid) == ("WAIT", day(45).isoformat(), 80.0)
    assert (b.verdict, b.bought_day, b.paid) == ("BUY", day(40).isoformat(), 100.0)
    assert (c.verdict, c.bought_day, c.paid) == ("WAIT", day(50).isoformat(), 110.0)
    assert [(o.buy_now_price, o.best_price) for o in (a, b, c)] == [
        (100.0, 80.0),
        (100.0, 90.0),
        (100.0, 100.0),
    ]
    assert "upcoming_sale" in a.reasons and "out_of_stock" in c.reasons


def test_skip_and_insufficient_data_are_counted_apart(market: Path) -> None:
    found = outcomes(market)
    assert (found["D"].verdict, found["D"].paid, found["D"].bought_day) == ("SKIP", None, None)
    assert (found["E"].verdict, found["E"].paid) == ("INSUFFICIENT_DATA", None)
    score = summarize(found.values()).overall.to_dict()
    assert score["decisions"] == 5
    assert score["verdicts"] == {"BUY": 1, "WAIT": 2, "SKIP": 1, "INSUFFICIENT_DATA": 1}


def test_the_saving_share_is_the_one_worked_out_by_hand(market: Path) -> None:
    summary = summarize(outcomes(market).values())
    overall = summary.overall.to_dict()
    assert (overall["saving"], overall["clairvoyant_saving"]) == (10.0, 30.0)
    assert overall["captured"] == round(10 / 30, 4)
    assert overall["worse_off"] == round(1 / 3, 4)
    assert overall["mean_regret_pct"] == round((0 + 100 * 10 / 90 + 10) / 3, 2)
    assert overall["buy_then_lower"] == 1.0
    assert overall["mean_wait_days"] == (5 + 10) / 2
    headphones = summary.by_category["headphones"].to_dict()
    assert headphones["captured"] == round(20 / 30, 4) and headphones["worse_off"] == 0.0
    tvs = summary.by_category["tvs"].to_dict()
    assert tvs["captured"] is None  # nothing to capture: C's best price was day 40's
    assert tvs["worse_off"] == 1.0 and tvs["decisions"] == 3


def test_decision_days_stop_where_the_horizon_would_leave_the_data(market: Path) -> None:
    store = MarketStore(market)
    plan = plan_replay(store, every=7, horizon=HORIZON)
    assert plan.first == day(0) and plan.last == day(DAYS - 1 - HORIZON)
    assert plan.days[1] == day(7) and plan.days[-1] <= plan.last
    clamped = plan_replay(store, day(30), day(DAYS), horizon=HORIZON)
    assert clamped.last == day(DAYS - 1 - HORIZON)
    with pytest.raises(ValueError, match="no decision day left"):
        plan_replay(store, day(DAYS - 5), horizon=HORIZON)
    store.close()


def test_the_command_prints_the_summary_and_writes_every_decision(
    market: Path, tmp_path: Path
) -> None:
    out = tmp_path / "decisions.jsonl"
    args = ["--db", str(market), "--from", day(DECISION).isoformat(), "--to",
            day(DECISION).isoformat(), "--horizon", str(HORIZON)]  # fmt: skip
    result = run_cli("backtest", *args, "--json", "--out", str(out))
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["overall"]["captured"] == round(10 / 30, 4)
    assert report["params"]["decision_days"] == 1 and report["params"]["products"] == 5
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert {row["sku"] for row in rows} == {"A", "B", "C", "D", "E"}
    keys = {"sku", "category", "day", "verdict", "bought_day", "paid", "buy_now_price",
            "best_price"}  # fmt: skip
    assert all(keys <= set(row) for row in rows)
    table = run_cli("backtest", *args)
    assert table.returncode == 0, table.stderr
    assert "33.3%" in table.stdout and "headphones" in table.stdout
    for column in ("captured:", "worse:", "regret:", "BUY↓5%:", "missed:"):
        assert column in table.stdout  # a legend under the tables says what each means
    bad = run_cli("backtest", "--db", str(market), "--from", "soon")
    assert bad.returncode == 2 and "--from" in bad.stderr


def test_an_offer_at_the_till_is_what_the_shopper_pays(tmp_path: Path) -> None:
    """F: 100 every day, and 20 % off at the till on days 45-47 (announced), the recorded
    price staying 100: WAIT on day 40, BUY on day 45 paying one unit's effective price, 80,
    which is also the horizon's best."""
    store = MarketStore(tmp_path / "offer.db")
    store.apply(
        [
            ProductRecord(sku="F", title="Phi Buds", brand="Phi", category="headphones"),
            *prices("F", {}),
            PromotionRecord(sku="F", name="Spring Sale", starts=midnight(45), ends=midnight(48),
                            kind="percent", percent_off=20.0),
        ]
    )  # fmt: skip
    plan = plan_replay(store, day(DECISION), day(DECISION), horizon=HORIZON)
    (f,) = replay(FactsBuilder(store), plan, ["F"])
    store.close()
    assert (f.verdict, f.bought_day, f.paid) == ("WAIT", day(45).isoformat(), 80.0)
    assert (f.buy_now_price, f.best_price) == (100.0, 80.0)
