"""Live data: the demo ticker (sweeps, bounded moves, the demo's stories kept, the CLI)
and the freshness objective a live answer is held to, in English and Chinese."""

from __future__ import annotations

import asyncio
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from worthit.decide.rules import Thresholds, decide_verdict
from worthit.decide.verdict import VerdictKind
from worthit.demo.ticker import PRICE_BAND, MarketTicker, run_ticker
from worthit.facts.builder import FactsBuilder
from worthit.market.apply import Outcome, apply_events
from worthit.market.bus import EventBus
from worthit.market.events import Event, PriceEvent
from worthit.market.store import MarketStore

from conftest import MARKET_NOW_MS, SMALL_SKUS, run_cli
from factories import make_sheet


class SteppingClock:
    """Market time that moves on by `step_ms` at every reading."""

    def __init__(self, start_ms: int, step_ms: int) -> None:
        self.now = start_ms
        self.step_ms = step_ms

    def __call__(self) -> int:
        self.now += self.step_ms
        return self.now


@pytest.fixture
def store(small_market: Path, tmp_path: Path) -> MarketStore:
    shutil.copy(small_market, tmp_path / "m.db")
    return MarketStore(tmp_path / "m.db")


def sweep(market: MarketTicker, visits: int = SMALL_SKUS) -> list[Event]:
    return [event for _ in range(visits) for event in market.visit()]


def test_a_sweep_visits_every_product_once_and_brings_it_up_to_now(store: MarketStore) -> None:
    clock = SteppingClock(MARKET_NOW_MS, 100)
    events = sweep(MarketTicker(store, clock=clock))
    stock_skus = [e.sku for e in events if e.type == "stock"]
    assert sorted(stock_skus) == sorted(f"S{n}" for n in range(1, SMALL_SKUS + 1))
    assert {e.source for e in events} == {"live"}
    assert len({e.event_id for e in events}) == len(events)
    report = apply_events(store, events)
    assert report.count(Outcome.APPLIED) == len(events)
    builder = FactsBuilder(store, lambda: clock.now)
    ages = [builder.build(f"S{n}").data_age_ms for n in range(1, SMALL_SKUS + 1)]  # type: ignore[union-attr]
    assert max(ages) <= SMALL_SKUS * 100 * 4


def test_prices_move_in_cents_within_the_band(store: MarketStore) -> None:
    anchors = store.current_prices([f"S{n}" for n in range(1, SMALL_SKUS + 1)], MARKET_NOW_MS)
    market = MarketTicker(store, clock=SteppingClock(MARKET_NOW_MS, 50))
    prices = [e for e in sweep(market, SMALL_SKUS * 400) if isinstance(e, PriceEvent)]
    assert len({e.sku for e in prices}) > SMALL_SKUS // 2
    for event in prices:
        assert round(event.price, 2) == event.price
        assert abs(event.price / anchors[event.sku] - 1) <= PRICE_BAND * 1.05


def test_the_demo_stories_survive_an_hour_of_live_changes(store: MarketStore) -> None:
    """Moves are small and bounded, so the heroes keep their verdicts (simulator.py);
    only the new listing S4 may gather enough prices to be judged."""
    clock = SteppingClock(MARKET_NOW_MS, 1000)
    market = MarketTicker(store, clock=clock)
    for _ in range(60):  # a sweep a minute
        apply_events(store, sweep(market))
    builder = FactsBuilder(store, lambda: clock.now)
    verdicts = {
        sku: decide_verdict(builder.build(sku)).kind  # type: ignore[arg-type]
        for sku in ("S1", "S2", "S3", "S5", "S6")
    }
    assert verdicts == {
        "S1": VerdictKind.BUY,
        "S2": VerdictKind.WAIT,
        "S3": VerdictKind.SKIP,
        "S5": VerdictKind.WAIT,
        "S6": VerdictKind.BUY,
    }


def test_the_same_seed_and_clock_give_the_same_changes(small_market: Path, tmp_path: Path) -> None:
    def changes(name: str) -> list[dict[str, object]]:
        shutil.copy(small_market, tmp_path / name)
        market = MarketTicker(MarketStore(tmp_path / name), clock=SteppingClock(MARKET_NOW_MS, 7))
        return [e.model_dump(exclude={"event_id"}) for e in sweep(market, 120)]

    assert changes("a.db") == changes("b.db")


def test_run_ticker_publishes_through_the_bus_until_its_time_is_up(store: MarketStore) -> None:
    async def run() -> tuple[int, int]:
        bus = EventBus(store)
        bus.start()
        sent = await run_ticker(MarketTicker(store), bus.publish, 400, duration_s=0.3)
        await bus.stop()
        return sent, bus.stats.applied

    sent, applied = asyncio.run(run())
    assert sent > 0 and applied == sent


def test_simulate_live_on_the_command_line(small_market: Path, tmp_path: Path) -> None:
    path = tmp_path / "m.db"
    shutil.copy(small_market, path)
    result = run_cli("simulate", "--live", "--rate", "200", "--duration", "1", "--db", str(path))
    assert result.returncode == 0, result.stderr
    assert "demo market ready" not in result.stdout  # the market there was kept
    assert "live:" in result.stdout and " 0 rejected" in result.stdout
    assert MarketStore(path).applied_event_count() > 0


# -- freshness ----------------------------------------------------------------------------

HOURS_17 = 17 * 3_600_000


def test_live_data_older_than_the_objective_says_so_in_english_and_chinese() -> None:
    sheet = make_sheet(data_age_ms=HOURS_17, fed_by_events=True)
    en, zh = decide_verdict(sheet, "en"), decide_verdict(sheet, "zh")
    stale_en = next(r for r in en.reasons if r.code == "stale_data")
    stale_zh = next(r for r in zh.reasons if r.code == "stale_data")
    assert stale_en.text == (
        "Its newest data is more than 12 hours old, past the freshness objective of 1 minute, "
        "so this verdict may be out of date."
    )
    assert stale_zh.text == "最新数据距今已超过12小时，超出了1分钟的新鲜度目标，结论可能已过时。"
    assert stale_en.numbers == stale_zh.numbers == {"age_over_s": 43200, "objective_s": 60.0}


def test_stale_live_data_lowers_the_confidence_and_nothing_else() -> None:
    fresh = make_sheet(data_age_ms=5_000, fed_by_events=True)
    stale = replace(fresh, data_age_ms=HOURS_17)
    a, b = decide_verdict(fresh), decide_verdict(stale)
    assert "stale_data" not in {r.code for r in a.reasons}
    assert b.kind is a.kind
    assert b.confidence == round(a.confidence * 0.8, 2)
    assert [r for r in b.reasons if r.code != "stale_data"] == list(a.reasons)


def test_data_loaded_once_is_not_held_to_the_objective() -> None:
    """The pinned test market is days old; only a live store's sheets are marked."""
    sheet = make_sheet(data_age_ms=10 * 86_400_000)
    assert "stale_data" not in {r.code for r in decide_verdict(sheet).reasons}


@pytest.mark.parametrize(
    ("age_ms", "en", "zh"),
    [
        (90_000, "1 minute", "1分钟"),
        (299_999, "2 minutes", "2分钟"),
        (300_000, "5 minutes", "5分钟"),
        (3_600_000, "1 hour", "1小时"),
        (7_300_000, "2 hours", "2小时"),
        (86_400_001, "1 day", "1天"),
        (3 * 86_400_000, "3 days", "3天"),
        (8 * 86_400_000, "7 days", "7天"),
    ],
)
def test_ages_are_written_in_coarse_steps(age_ms: int, en: str, zh: str) -> None:
    """Steps, so the sentence (and the explanation's key) changes rarely as data ages."""
    sheet = make_sheet(data_age_ms=age_ms, fed_by_events=True)
    assert f"more than {en} old" in next(r.text for r in decide_verdict(sheet).reasons
                                         if r.code == "stale_data")  # fmt: skip
    assert f"已超过{zh}，" in next(r.text for r in decide_verdict(sheet, "zh").reasons
                                 if r.code == "stale_data")  # fmt: skip


def test_a_category_can_have_its_own_objective() -> None:
    sheet = make_sheet(data_age_ms=600_000, category="tvs", fed_by_events=True)
    relaxed = Thresholds(freshness_by_category={"tvs": 900.0})
    assert "stale_data" in {r.code for r in decide_verdict(sheet).reasons}
    assert "stale_data" not in {r.code for r in decide_verdict(sheet, thresholds=relaxed).reasons}
    stricter = decide_verdict(make_sheet(data_age_ms=600_000, fed_by_events=True),
                              thresholds=Thresholds(freshness_s=45.0))  # fmt: skip
    assert "objective of 45 seconds" in next(r.text for r in stricter.reasons
                                             if r.code == "stale_data")  # fmt: skip
