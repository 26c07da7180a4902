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

from test_rules import neutral
from worthit.decide.backtest import Score, Summary, plan_replay
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
    # a price moved since the fit: that product's forecast says nothing until the next
    sku, fc = next(iter(snapshot.by_sku.items()))
    sheet = builder.build(sku)
    assert sheet is not None
    moved = replace(sheet, current_price=fc.price + 1, effective_price=None, version="moved")
    assert cache.verdict(moved, "en") == decide_verdict(moved)
    store.close()
