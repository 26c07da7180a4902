"""The forecaster's advice: the policy, the verdict it decides with its reasons, and the
service's fit of a store, read by the verdict cache."""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_rules import neutral, with_avg90
from worthit.decide.backtest import Score, Summary, plan_replay
from worthit.decide.forecast import StoreForecaster
from worthit.decide.forecast_advice import DEFAULT_POLICY, Forecast, ForecastSnapshot
from worthit.decide.forecast_refit import StoreForecasts
from worthit.decide.forecast_replay import compare_policies
from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, VerdictKind
from worthit.decide.verdict_cache import VerdictCache
from worthit.facts.builder import FactsBuilder
from worthit.market.ingest.importer import run_import
from worthit.market.store import MarketStore
from worthit.text.time import fixed_clock

FORECASTS = {"forecast_wait", "forecast_buy", "forecast_deal"}
DEALS = {"deal_buy", "deal_wait"}


def forecast(**overrides: Any) -> Forecast:
    """At 300, a deal at 285 (0.95 × a 90-day average of 300); 7 of 9 comparable moments
    saw a 5 % drop within 30 days."""
    fields: dict[str, Any] = {
        "p_drop": 0.6, "expected_low": 270.0, "expected_wait_price": 290.0, "p_worse": 0.1,
        "price": 300.0, "deal_price": 285.0, "drop": 0.05, "horizon": 30,
        "comparable_moments": 9, "comparable_drops": 7, "origin": date(2026, 3, 1),
    }  # fmt: skip
    return Forecast(**(fields | overrides))


def test_a_wait_says_what_it_waits_for() -> None:
    verdict = decide_verdict(neutral(), forecast=forecast())
    assert verdict.kind is VerdictKind.WAIT
    lead = verdict.reasons[0]
    assert lead.code == "forecast_wait"
    assert lead.text == (
        "Worth waiting for $285.00 or less: its price dropped 5% or more within 30 days in 7 "
        "of the last 9 comparable moments; expected low $270.00."
    )
    assert lead.numbers["deal_price"] == 285.0 and lead.numbers["drops"] == 7


def test_a_buy_at_an_ordinary_price_says_why_waiting_is_unlikely_to_pay() -> None:
    fc = forecast(expected_wait_price=309.0, comparable_drops=1, expected_low=296.0)
    verdict = decide_verdict(neutral(), forecast=fc)
    assert verdict.kind is VerdictKind.BUY
    lead = verdict.reasons[0]
    assert lead.code == "forecast_buy"
    assert "in 1 of the last 9 comparable moments" in lead.text
    assert "expected to cost 3%" in lead.text
    zh = decide_verdict(neutral(), "zh", forecast=fc).reasons[0].text
    assert "最近9个可比时点中，只有1次" in zh and "3%" in zh


def test_at_a_deal_it_buys_and_says_so() -> None:
    fc = forecast(price=280.0, expected_wait_price=279.0, comparable_drops=2)
    verdict = decide_verdict(neutral(current_price=280.0), "ja", forecast=fc)
    assert verdict.kind is VerdictKind.BUY
    assert verdict.reasons[0].code == "forecast_deal"
    assert "$280.00" in verdict.reasons[0].text


def test_what_the_history_cannot_show_still_decides() -> None:
    """Out of stock waits whatever the forecast; a forecast with too few comparable
    moments behind it leaves the rules alone."""
    cheap = forecast(expected_wait_price=320.0)
    out = decide_verdict(neutral(stock=0), forecast=cheap)
    assert out.kind is VerdictKind.WAIT
    assert {r.code for r in out.reasons}.isdisjoint(FORECASTS)
    young = decide_verdict(neutral(), forecast=forecast(comparable_moments=0, comparable_drops=0))
    assert young == decide_verdict(neutral())


@settings(max_examples=200, deadline=None)
@given(
    wait_price=st.floats(250.0, 350.0),
    deal_price=st.floats(250.0, 330.0),
    moments=st.integers(1, 10),
    drops=st.integers(0, 10),
)
def test_the_verdict_is_the_policys(
    wait_price: float, deal_price: float, moments: int, drops: int
) -> None:
    """BUY at a deal; at an ordinary price WAIT exactly while waiting for a deal is not
    expected to cost 2 % or more; one forecast reason, on the verdict's side."""
    fc = forecast(
        expected_wait_price=wait_price,
        deal_price=deal_price,
        comparable_moments=moments,
        comparable_drops=min(drops, moments),
    )
    verdict = decide_verdict(neutral(), forecast=fc)
    waits = deal_price < 300.0 and wait_price / 300.0 < 1.02
    assert verdict.kind is (VerdictKind.WAIT if waits else VerdictKind.BUY)
    assert DEFAULT_POLICY.waits(fc) is waits
    found = [r for r in verdict.reasons if r.code in FORECASTS]
    assert len(found) == 1
    side = Polarity.WAIT if waits else Polarity.BUY
    assert found[0].polarity is side and verdict.reasons[0] is found[0]


def test_a_snapshot_speaks_only_for_its_price_and_day() -> None:
    fc = forecast()
    snapshot = ForecastSnapshot(date(2026, 3, 14), {"A": fc})
    assert snapshot.forecast("A", 300.0, "2026-03-14T09:30:00Z") is fc
    assert snapshot.forecast("A", 301.0, "2026-03-14T09:30:00Z") is None
    assert snapshot.forecast("A", 300.0, "2026-03-15T00:00:00Z") is None
    assert snapshot.forecast("B", 300.0, "2026-03-14T09:30:00Z") is None


END = date(2026, 3, 14)
DAYS = 200


def _lines(seed: int = 11) -> list[str]:
    """24 products on a regular price with sales of 20-30 % every three to seven weeks."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(24):
        sku = f"P{k}"
        out.append(json.dumps({"type": "product", "sku": sku, "title": f"Product {k}",
                               "brand": "", "category": f"c{k % 3}"}))  # fmt: skip
        regular = round(float(rng.uniform(5, 50)), 2)
        price = np.full(DAYS, regular)
        day = int(rng.integers(0, 30))
        while day < DAYS:
            length = int(rng.integers(5, 15))
            price[day : day + length] = round(regular * float(rng.uniform(0.7, 0.8)), 2)
            day += length + int(rng.integers(20, 50))
        for i, p in enumerate(price):
            at = datetime.combine(END - timedelta(days=DAYS - 1 - i), datetime.min.time(), UTC)
            ts = (at + timedelta(hours=12)).isoformat().replace("+00:00", "Z")
            out.append(json.dumps({"type": "price", "sku": sku, "ts": ts, "price": float(p),
                                   "currency": "USD"}))  # fmt: skip
    return out


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("forecast") / "market.db"
    store = MarketStore(path)
    run_import(store, _lines())
    store.close()
    return path


def test_the_backtest_scores_the_served_verdict_beside_the_trackers(market: Path) -> None:
    """`worthit backtest --anchors --forecast`: every policy on worthit's own counted
    decisions; the served verdict follows the forecaster where it has a model."""
    store = MarketStore(market)
    plan = plan_replay(store, every=7, horizon=30)
    scores: dict[str, Score] = {}
    span = store.price_span()
    assert span is not None
    skus = [hit.sku for hit in store.all_names()]
    rules = Summary()
    for outcome in compare_policies(FactsBuilder(store), plan, skus, span, scores, True):
        rules.add(outcome)
    store.close()
    assert set(scores) == {"keepa", "camel", "always_wait", "rules+forecast", "forecast"}
    for score in scores.values():
        assert score.decisions == rules.overall.counted
    served = scores["rules+forecast"]
    assert served.counts != rules.overall.counts, "the forecaster decided nothing"
    assert served.captured is not None and rules.overall.captured is not None
    assert served.captured > rules.overall.captured


def test_the_service_fits_the_store_off_the_request_path_and_the_verdict_reads_it(
    market: Path,
) -> None:
    path = market
    store = MarketStore(path)
    now = int(datetime.combine(END, datetime.min.time(), UTC).timestamp() * 1000) + 18 * 3600_000
    with ThreadPoolExecutor(1) as executor:
        forecasts = StoreForecasts(str(path), executor, clock=fixed_clock(now), every_s=60)
        assert forecasts.latest() is None  # before the first fit: the rules alone
        asyncio.run(forecasts.refit())
    snapshot = forecasts.latest()
    assert snapshot is not None and snapshot.day == END
    assert len(snapshot.by_sku) >= 20

    builder = FactsBuilder(store, fixed_clock(now))
    cache = VerdictCache(forecasts=forecasts.latest)
    decided: dict[str, int] = {}
    for sku, fc in snapshot.by_sku.items():
        sheet = builder.build(sku)
        assert sheet is not None
        verdict = cache.verdict(sheet, "en")
        lead = verdict.reasons[0]
        assert lead.code in FORECASTS, (sku, [r.code for r in verdict.reasons])
        assert lead.numbers["moments"] == fc.comparable_moments
        assert cache.verdict(sheet, "en") is verdict  # the cache keys on the forecast too
        assert VerdictCache().verdict(sheet, "en") == decide_verdict(sheet)
        decided[lead.code] = decided.get(lead.code, 0) + 1
    assert decided.get("forecast_wait") and decided.get("forecast_deal")
    # a price moved since the fit: that product's forecast says nothing until the next,
    # and on this store of regular prices the deal rule stands in for it
    assert snapshot.deal_rule
    sku, fc = next(iter(snapshot.by_sku.items()))
    sheet = builder.build(sku)
    assert sheet is not None
    moved = replace(sheet, current_price=fc.price + 1, effective_price=None, version="moved")
    assert cache.verdict(moved, "en") == decide_verdict(moved, deal_rule=True)
    assert cache.verdict(moved, "en").reasons[0].code in DEALS
    store.close()


def test_without_a_forecast_the_deal_rule_decides_where_prices_keep_a_level() -> None:
    """A sale's step down reads as a falling price: the rules wait through it (a tie of
    `below_90d_avg` and `price_falling`, a product not well rated) and the shopper pays the
    regular price when it ends. Where the store's prices keep a regular level and there is
    no forecast yet, the deal rule decides instead: BUY at a deal, and at an ordinary price
    a WAIT that says what it waits for, where the rules bought near a low that never moved."""
    sale = neutral(current_price=270.0, trend_30d_pct=-8.0, windows=with_avg90(300.0))
    assert decide_verdict(sale).kind is VerdictKind.WAIT
    verdict = decide_verdict(sale, deal_rule=True)
    assert verdict.kind is VerdictKind.BUY
    assert verdict.reasons[0].code == "deal_buy"
    assert verdict.reasons[0].text == (
        "At $270.00 it is a deal: 5% or more under its 90-day average of $300.00 ($285.00 or less)."
    )
    assert verdict.confidence == 0.5

    flat = neutral(all_time_low=295.0)
    assert decide_verdict(flat).kind is VerdictKind.BUY  # near_all_time_low
    verdict = decide_verdict(flat, deal_rule=True)
    assert verdict.kind is VerdictKind.WAIT
    lead = verdict.reasons[0]
    assert lead.code == "deal_wait" and lead.numbers["deal_price"] == 285.0
    assert lead.text == (
        "Not a deal yet at $300.00: a deal here is $285.00 or less (5% under its 90-day "
        "average of $300.00). There is no forecast for it yet, so wait for one."
    )
    zh = decide_verdict(flat, "zh", deal_rule=True).reasons[0].text
    assert "US$285.00" in zh and "US$300.00" in zh
    ja = decide_verdict(flat, "ja", deal_rule=True).reasons[0].text
    assert "$285.00" in ja and "5%" in ja


def test_the_deal_rule_stands_aside_for_a_forecast_and_for_what_prices_cannot_show() -> None:
    sale = neutral(current_price=270.0, trend_30d_pct=-8.0, windows=with_avg90(300.0))
    fc = forecast(price=270.0, expected_wait_price=260.0)
    assert decide_verdict(sale, forecast=fc, deal_rule=True) == decide_verdict(sale, forecast=fc)
    gone = decide_verdict(replace(sale, stock=0), deal_rule=True)
    assert gone.kind is VerdictKind.WAIT
    assert {r.code for r in gone.reasons}.isdisjoint(DEALS)
    over = decide_verdict(sale, budget=200.0, deal_rule=True)
    assert over.kind is VerdictKind.WAIT and over.reasons[0].code == "over_budget"
    short = neutral(observations=5)
    assert decide_verdict(short, deal_rule=True) == decide_verdict(short)


def _noisy_lines() -> list[str]:
    """Six products whose prices move every day around their level, as the simulator's do."""
    rng = np.random.default_rng(5)
    out = []
    for k in range(6):
        sku = f"N{k}"
        out.append(json.dumps({"type": "product", "sku": sku, "title": f"Noisy {k}",
                               "brand": "", "category": "c"}))  # fmt: skip
        for i in range(120):
            at = datetime.combine(END - timedelta(days=119 - i), datetime.min.time(), UTC)
            ts = (at + timedelta(hours=12)).isoformat().replace("+00:00", "Z")
            price = round(float(rng.uniform(95, 105)), 2)
            out.append(json.dumps({"type": "price", "sku": sku, "ts": ts, "price": price,
                                   "currency": "USD"}))  # fmt: skip
    return out


def test_the_deal_rule_reads_the_stores_prices_up_to_the_day(market: Path, tmp_path: Path) -> None:
    """Regular prices: the deal rule judges from the first day, before any model; prices
    that move daily: never, the rules do. What decides a day reads nothing after it."""
    store = MarketStore(market)
    builder = FactsBuilder(store)
    histories = [h for h in (builder.history(x.sku) for x in store.all_names()) if h]
    first = END - timedelta(days=DAYS - 1)
    forecaster = StoreForecaster.build(histories, first, END, 30)
    early = first + timedelta(days=20)
    assert all(forecaster.at(h.product.sku, early) is None for h in histories)
    assert all(forecaster.deal_rule_at(first + timedelta(days=d)) for d in range(1, DAYS))
    assert not forecaster.deal_rule_at(first - timedelta(days=1))
    cut = StoreForecaster.build(histories, first, early, 30)
    for d in range(DAYS):
        day = first + timedelta(days=d)
        if day <= early:
            assert cut.deal_rule_at(day) == forecaster.deal_rule_at(day)
    store.close()

    noisy = MarketStore(tmp_path / "noisy.db")
    run_import(noisy, _noisy_lines())
    builder = FactsBuilder(noisy)
    histories = [h for h in (builder.history(x.sku) for x in noisy.all_names()) if h]
    first = END - timedelta(days=119)
    forecaster = StoreForecaster.build(histories, first, END, 30)
    assert not any(forecaster.deal_rule_at(first + timedelta(days=d)) for d in range(120))
    noisy.close()


def test_the_served_verdict_is_at_least_the_forecasters_before_it_has_a_model(
    market: Path,
) -> None:
    """The first weeks of a store have no model; the served verdict (rules + forecaster)
    used to leave the rules' price reasons to answer there, and trailed the forecaster
    alone, which follows the deal rule until it has one."""
    store = MarketStore(market)
    span = store.price_span()
    assert span is not None
    plan = plan_replay(store, every=1, horizon=30)
    plan = replace(plan, last=plan.first + timedelta(days=45))
    scores: dict[str, Score] = {}
    skus = [hit.sku for hit in store.all_names()]
    for _ in compare_policies(FactsBuilder(store), plan, skus, span, scores, True):
        pass
    store.close()
    served, alone = scores["rules+forecast"], scores["forecast"]
    assert served.counted > 0 and alone.captured is not None
    assert served.saving >= alone.saving - 1e-6
    assert served.worse_off <= alone.worse_off
