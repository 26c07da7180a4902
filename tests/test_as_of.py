"""As-of answers: a sheet as of T is the sheet of a store that never saw a row after T.

The property test draws random histories of two products of one category (the second
moves the category prior) and random cut times on the same hour grid, so rows stamped
exactly at the cut are common.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from scripted_engine import ScriptedEngine
from worthit.answer.answer_events import Finished, VerdictReady
from worthit.answer.answerer import Answerer
from worthit.answer.payload import answer_payload, verdict_payload
from worthit.decide.as_of import check_as_of, end_of_day_ms, parse_as_of
from worthit.explain.store import StoredExplanation
from worthit.facts.builder import PROMOTION_NOTICE_DAYS, FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.facts.sheet import FactSheet
from worthit.market.records import (
    PriceRecord,
    ProductRecord,
    PromotionRecord,
    Record,
    ReviewRecord,
    SalesRecord,
    StockRecord,
)
from worthit.market.store import MarketStore
from worthit.service.build import build_answerer
from worthit.text.time import DAY_MS, fixed_clock, from_ms, iso, to_ms

from conftest import MARKET_END, MARKET_NOW_MS, market_clock

BASE = datetime(2026, 1, 1, tzinfo=UTC)
HOUR_MS = 3_600_000
HOURS = 200 * 24


def at(hour: int) -> datetime:
    return BASE + timedelta(hours=hour)


hours = st.integers(0, HOURS)
money = st.sampled_from([79.99, 80.0, 99.5, 100.0, 120.0, 135.25])


@st.composite
def histories(draw: st.DrawFn) -> list[Record]:
    records: list[Record] = [
        ProductRecord(sku=sku, title=f"Product {sku}", brand="B", category="headphones")
        for sku in ("P1", "P2")
    ]
    for sku in ("P1", "P2"):
        price_hours = draw(st.dictionaries(hours, money, max_size=40))
        records += [
            PriceRecord(sku=sku, ts=at(h), price=p, list_price=draw(st.none() | money))
            for h, p in price_hours.items()
        ]
        ratings = draw(st.lists(st.tuples(hours, st.integers(1, 5)), max_size=30))
        records += [
            ReviewRecord(sku=sku, review_id=f"{sku}-{i}", ts=at(h), rating=r, text="ok")
            for i, (h, r) in enumerate(ratings)
        ]
    stock = draw(st.dictionaries(hours, st.integers(0, 20), max_size=15))
    records += [StockRecord(sku="P1", ts=at(h), quantity=q) for h, q in stock.items()]
    promos = draw(
        st.dictionaries(
            st.tuples(st.sampled_from(["Spring", "Summer", "Flash"]), hours),
            st.tuples(st.integers(1, 24 * 10), money, st.none() | st.integers(-24 * 60, 24)),
            max_size=6,
        )
    )
    records += [
        PromotionRecord(
            sku="P1",
            name=name,
            starts=at(h),
            ends=at(h + length),
            price=price,
            announced_at=None if ahead is None else at(h + min(ahead, length - 1)),
        )
        for (name, h), (length, price, ahead) in promos.items()
    ]
    sales = draw(st.dictionaries(st.integers(0, 200), st.integers(0, 9), max_size=30))
    records += [
        SalesRecord(sku="P1", date=BASE.date() + timedelta(days=d), units=u)
        for d, u in sales.items()
    ]
    return records


def stamped_by(record: Record, cut: int) -> bool:
    """Whether a store at moment `cut` could hold the row (see facts/builder.py)."""
    if isinstance(record, ProductRecord):
        return True
    if isinstance(record, PromotionRecord):
        if record.announced_ms is not None:
            return record.announced_ms <= cut
        return record.starts_ms <= cut + PROMOTION_NOTICE_DAYS * DAY_MS
    if isinstance(record, SalesRecord):
        return record.date <= from_ms(cut).date()
    return record.ts_ms <= cut


def without_write_count(sheet: FactSheet | None) -> FactSheet:
    """`revision` counts the store's writes, not its rows; the version is hashed with it."""
    assert sheet is not None
    return replace(sheet, revision=0, version="")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(records=histories(), cut_hour=st.integers(-24, HOURS + 24))
def test_as_of_never_reads_a_later_row(records: list[Record], cut_hour: int) -> None:
    cut = to_ms(at(cut_hour))
    with tempfile.TemporaryDirectory() as folder:
        full = MarketStore(Path(folder) / "full.db")
        full.apply(records)
        then = MarketStore(Path(folder) / "then.db")
        then.apply([r for r in records if stamped_by(r, cut)])
        as_of = FactsBuilder(full).build("P1", at_ms=cut)
        at_the_time = FactsBuilder(then, fixed_clock(cut)).build("P1")
        assert without_write_count(as_of) == without_write_count(at_the_time)
        builder = FactsBuilder(full)
        history = builder.history("P1")
        assert history is not None
        assert builder.build_from(history, cut) == as_of
        full.close()
        then.close()


def test_parse_as_of_reads_times_and_days_as_the_cli_does() -> None:
    assert parse_as_of("2026-11-20T18:00:00Z") == to_ms(datetime(2026, 11, 20, 18, tzinfo=UTC))
    assert parse_as_of("2026-11-20T18:00:00") == parse_as_of("2026-11-20T18:00:00+00:00")
    assert parse_as_of("2026-11-20") == to_ms(datetime(2026, 11, 21, tzinfo=UTC)) - 1
    assert parse_as_of("2026-11-20") == end_of_day_ms(date(2026, 11, 20))
    assert parse_as_of("20261120") == parse_as_of("2026-11-20")  # a day alone, in any form
    with pytest.raises(ValueError, match="expected an ISO 8601 time or day, got 'soon'"):
        parse_as_of("soon")
    with pytest.raises(ValueError, match="past the last day"):
        parse_as_of("9999-12-31")
    with pytest.raises(ValueError, match="expected an ISO 8601"):
        parse_as_of("0001-01-01T00:00:00+01:00")


def test_a_moment_to_come_or_before_the_first_price_has_no_answer() -> None:
    check_as_of(100, now_ms=100, first_data_ms=50)
    check_as_of(50, now_ms=100, first_data_ms=50)
    with pytest.raises(ValueError, match="in the future"):
        check_as_of(101, now_ms=100, first_data_ms=50)
    with pytest.raises(ValueError, match="before the market's first data"):
        check_as_of(49, now_ms=100, first_data_ms=50)
    with pytest.raises(ValueError, match="no prices yet"):
        check_as_of(49, now_ms=100, first_data_ms=None)


def test_a_promotion_shows_from_its_notice_on(tmp_path: Path) -> None:
    store = MarketStore(tmp_path / "m.db")
    start = BASE + timedelta(days=60)
    store.apply(
        [
            ProductRecord(sku="P1", title="P", brand="B", category="headphones"),
            PromotionRecord(
                sku="P1", name="Sale", starts=start, ends=start + timedelta(days=3), price=80.0
            ),
        ]
    )
    builder = FactsBuilder(store)
    notice = to_ms(start) - PROMOTION_NOTICE_DAYS * DAY_MS
    before = builder.build("P1", at_ms=notice - 1)
    known = builder.build("P1", at_ms=notice)
    assert before is not None and known is not None
    assert before.upcoming_promotions == ()
    assert [p.name for p in known.upcoming_promotions] == ["Sale"]
    assert known.upcoming_promotions[0].days_until_start == PROMOTION_NOTICE_DAYS


def test_a_promotion_announced_later_is_invisible_before(tmp_path: Path) -> None:
    """Announced 10 days before it starts: as of 20 days before, inside the notice a row
    without its announcement is given, no sheet knows of it, cut from the store or from
    the history the backtest reads; from its announcement on, every sheet does."""
    store = MarketStore(tmp_path / "m.db")
    start = BASE + timedelta(days=60)
    announced = start - timedelta(days=10)
    prices = [PriceRecord(sku="P1", ts=at(24 * day), price=100.0) for day in range(60)]
    store.apply(
        [
            ProductRecord(sku="P1", title="P", brand="B", category="headphones"),
            *prices,
            PromotionRecord(
                sku="P1",
                name="Sale",
                starts=start,
                ends=start + timedelta(days=3),
                price=80.0,
                announced_at=announced,
            ),
        ]
    )
    builder = FactsBuilder(store)
    history = builder.history("P1")
    assert history is not None
    for moment, known in (
        (start - timedelta(days=20), False),
        (announced - timedelta(milliseconds=1), False),
        (announced, True),
        (start + timedelta(days=1), True),
    ):
        sheet = builder.build("P1", at_ms=to_ms(moment))
        assert sheet is not None and builder.build_from(history, to_ms(moment)) == sheet
        names = [p.name for p in sheet.upcoming_promotions + sheet.active_promotions]
        assert names == (["Sale"] if known else []), moment
        claimed = sheet.discount_claim is not None and sheet.discount_claim.name == "Sale"
        assert claimed is known


@pytest.fixture
def market(small_market: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "m.db"
    shutil.copy(small_market, copy)
    return copy


EARLIER = end_of_day_ms(MARKET_END - timedelta(days=10))


def test_as_of_sheets_bypass_the_cache_and_are_never_event_fed(market: Path) -> None:
    cache = FactsCache(FactsBuilder(MarketStore(market), market_clock()), fed_by_events=True)
    now = cache.get("S1")
    then = cache.get("S1", EARLIER)
    assert now is not None and then is not None
    assert now.fed_by_events and not then.fed_by_events
    assert then.as_of == iso(EARLIER) and then.current_price_at is not None
    assert then.current_price_at <= iso(EARLIER) < now.as_of
    assert (cache.hits, cache.misses, len(cache)) == (0, 1, 1)
    assert cache.get("S1") is not None and cache.hits == 1


class RecordingStore:
    """An explanation store that notes every use."""

    def __init__(self) -> None:
        self.used: list[str] = []

    def get(self, key: str) -> StoredExplanation | None:
        self.used.append("get")
        return None

    def latest(self, sku: str, language: str, model: str, verdict: str) -> StoredExplanation | None:
        self.used.append("latest")
        return None

    def put(self, entry: StoredExplanation) -> None:
        self.used.append("put")

    def __len__(self) -> int:
        return 0

    def close(self) -> None:
        pass


def answer(answerer: Answerer, question: str, as_of_ms: int | None) -> Finished:
    async def run() -> Finished:
        events = [e async for e in answerer.ask(question, as_of_ms=as_of_ms)]
        assert isinstance(events[0], VerdictReady)
        assert isinstance(events[-1], Finished)
        return events[-1]

    return asyncio.run(run())


def test_an_as_of_answer_is_the_template_and_leaves_todays_explanations_alone(
    market: Path,
) -> None:
    engine = ScriptedEngine(("Worth buying now because it is cheap.",))
    explanations = RecordingStore()
    answerer = build_answerer(
        MarketStore(market),
        engine,  # type: ignore[arg-type]
        clock=market_clock(),
        explanations=explanations,
    )
    finished = answer(answerer, "Is the Aurora NC700 worth buying?", EARLIER)
    assert finished.explanation is not None
    assert finished.explanation.source == "template"
    assert finished.explanation.fallback_reason == "as_of"
    assert engine.calls == [] and explanations.used == []
    assert len(answerer.wanted) == 0
    payload = answer_payload(finished)
    assert payload["as_of"] == iso(EARLIER) and payload["sku"] == "S1"
    sheet = finished.decision.sheet
    assert sheet is not None and sheet.as_of == iso(EARLIER)
    assert "as_of" not in verdict_payload(answerer.decider.decide("NC700 worth it?", sku="S1"))


def test_rankings_and_comparisons_are_as_of_too(market: Path) -> None:
    answerer = build_answerer(MarketStore(market), None, clock=market_clock())
    then = answer(answerer, "top 3 headphones by sales in the last 3 days", EARLIER)
    at_the_time = build_answerer(MarketStore(market), None, clock=fixed_clock(EARLIER))
    expected = answer(at_the_time, "top 3 headphones by sales in the last 3 days", None)
    assert then.decision.ranking == expected.decision.ranking
    compared = answer(answerer, "Kestrel Q5 or Nordvik Aria ANC?", EARLIER)
    assert {j.sheet.as_of for j in compared.decision.compared} == {iso(EARLIER)}


def test_the_decider_refuses_moments_it_cannot_answer_as_of(market: Path) -> None:
    decider = build_answerer(MarketStore(market), None, clock=market_clock()).decider
    assert decider.as_of(iso(EARLIER)) == EARLIER - EARLIER % 1000
    with pytest.raises(ValueError, match="in the future"):
        decider.as_of(MARKET_END.isoformat())  # its end is a minute after the clock
    assert decider.as_of(iso(MARKET_NOW_MS)) == MARKET_NOW_MS
    with pytest.raises(ValueError, match="before the market's first data"):
        decider.as_of("2020-01-01")
    with pytest.raises(ValueError, match="expected an ISO 8601"):
        decider.as_of("yesterday")
