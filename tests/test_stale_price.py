"""A last price older than the threshold: the sheet says how old it is and that it is stale,
and the verdict is INSUFFICIENT_DATA naming the age, never a WAIT or a BUY on an old price;
as of any moment too (the backtest's sheets), the age counted to that moment."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, VerdictKind
from worthit.facts.builder import DEFAULT_STALE_PRICE_DAYS, FactsBuilder
from worthit.market.records import PriceRecord, ProductRecord
from worthit.market.store import MarketStore
from worthit.text.time import DAY_MS, to_ms

from factories import make_sheet

START = datetime(2026, 1, 1, 12, tzinfo=UTC)
DAYS = 60
LAST_MS = to_ms(START + timedelta(days=DAYS - 1))
HOUR_MS = 3_600_000
THRESHOLDS = (1.0, DEFAULT_STALE_PRICE_DAYS, 7.5)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MarketStore]:
    """One product priced once a day for 60 days, then nothing: its feed stopped."""
    store = MarketStore(tmp_path_factory.mktemp("stale") / "m.db")
    records = [ProductRecord(sku="P1", title="Aurora NC700", brand="Aurora", category="headphones")]
    records += [
        PriceRecord(sku="P1", ts=START + timedelta(days=day), price=100.0 - (day % 7))
        for day in range(DAYS)
    ]
    store.apply(records)
    yield store
    store.close()


def around(threshold_days: float) -> st.SearchStrategy[int]:
    edge = int(threshold_days * DAY_MS)
    return st.integers(edge - 2 * HOUR_MS, edge + 2 * HOUR_MS)


ages = st.one_of(
    st.integers(0, 200 * DAY_MS),
    st.sampled_from(THRESHOLDS).flatmap(around),
    st.sampled_from([int(t * DAY_MS) + d for t in THRESHOLDS for d in (-1, 0, 1)]),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(age_ms=ages, threshold=st.sampled_from(THRESHOLDS))
def test_a_price_older_than_the_threshold_is_stale_and_gets_no_verdict(
    store: MarketStore, age_ms: int, threshold: float
) -> None:
    builder = FactsBuilder(store, stale_price_days=threshold)
    sheet = builder.build("P1", at_ms=LAST_MS + age_ms)
    assert sheet is not None
    stale = age_ms > threshold * DAY_MS
    assert sheet.price_age_days == age_ms // DAY_MS
    assert sheet.price_stale is stale
    verdict = decide_verdict(sheet)
    codes = [r.code for r in verdict.reasons]
    if stale:
        assert verdict.kind is VerdictKind.INSUFFICIENT_DATA
        reason = verdict.reasons[0]
        assert (reason.code, reason.polarity) == ("stale_price", Polarity.INFO)
        assert reason.numbers == {"age_days": sheet.price_age_days, "last_price_at": "2026-03-01"}
        assert f"{sheet.price_age_days} day" in reason.text and "(2026-03-01)" in reason.text
    else:
        assert "stale_price" not in codes
        assert verdict.kind in (VerdictKind.BUY, VerdictKind.WAIT)


def test_the_age_is_counted_to_the_moment_asked_as_of(store: MarketStore) -> None:
    """The backtest's sheets: as of a day inside the history the price is fresh, as of a
    day after the feed stopped its age is that day less the last observation."""
    builder = FactsBuilder(store)
    history = builder.history("P1")
    assert history is not None
    for days_after in (-30, 0, 2, 3, 4, 100):
        moment = LAST_MS + days_after * DAY_MS
        sheet = builder.build_from(history, moment)
        assert sheet == builder.build("P1", at_ms=moment)
        assert sheet.price_age_days == max(0, days_after)
        assert sheet.price_stale is (days_after > DEFAULT_STALE_PRICE_DAYS)


def test_the_stale_sheet_still_says_what_it_last_knew(store: MarketStore) -> None:
    """Windows empty because the feed stopped are not silent: the sheet says the price is
    stale and how old, beside the last price and its day."""
    sheet = FactsBuilder(store).build("P1", at_ms=LAST_MS + 100 * DAY_MS)
    assert sheet is not None
    window = sheet.window(30)
    assert window is not None and window.observations == 0
    assert (sheet.price_stale, sheet.price_age_days) == (True, 100)
    assert sheet.current_price is not None and sheet.current_price_at == "2026-03-01T12:00:00Z"


def test_a_threshold_under_a_day_is_refused(store: MarketStore) -> None:
    with pytest.raises(ValueError, match="stale_price_days"):
        FactsBuilder(store, stale_price_days=0.5)


STALE = make_sheet(
    as_of="2026-12-02T09:00:00Z",
    current_price_at="2026-08-24T10:00:00Z",
    price_age_days=99,
    price_stale=True,
    windows=(),
)


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("en", "The last price we have is 99 days old (2026-08-24), too old to judge today's "
               "price by."),
        ("zh", "我们最新的价格记录是99天前的（2026-08-24），太旧了，无法据此判断现在的价格。"),
        ("ja", "最新の価格記録は99日前のもの（2026-08-24）で、"
               "古すぎて現在の価格を判断できません。"),
    ],
)  # fmt: skip
def test_a_stale_price_says_its_age_and_day(language: str, text: str) -> None:
    verdict = decide_verdict(STALE, language)
    assert verdict.kind is VerdictKind.INSUFFICIENT_DATA
    assert verdict.reasons[0].code == "stale_price" and verdict.reasons[0].text == text


def test_a_deal_on_a_stale_price_is_neither_buy_nor_wait() -> None:
    """Everything else about the sheet says buy (at its all-time low, under the average):
    the price it rests on is old, so there is no price verdict."""
    deal = replace(
        STALE,
        current_price=249.0,
        effective_price=249.0,
        percentile_90d=1.0,
        upcoming_promotions=(),
    )
    assert decide_verdict(deal).kind is VerdictKind.INSUFFICIENT_DATA
    fresh = replace(deal, price_stale=False, price_age_days=0)
    assert decide_verdict(fresh).kind is VerdictKind.BUY
