"""The fact sheet, computed from a small hand-built history at a pinned moment."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from worthit.facts.builder import DEFAULT_PRIOR_MEAN, PRIOR_WEIGHT, FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.facts.rankings import MAX_CACHED, Rankings
from worthit.market.records import (
    PriceRecord,
    ProductRecord,
    PromotionRecord,
    ReviewRecord,
    SalesRecord,
    StockRecord,
)
from worthit.market.store import MarketStore
from worthit.text.time import to_ms

NOW = datetime(2026, 6, 30, 12, 0, tzinfo=UTC)
AT = to_ms(NOW)


def days_ago(n: float) -> datetime:
    return NOW - timedelta(days=n)


@pytest.fixture
def store(tmp_path: Path) -> MarketStore:
    store = MarketStore(tmp_path / "m.db")
    prices = [300.0] * 100 + [250.0] * 5 + [310.0] * 45 + [280.0]
    records: list[object] = [
        ProductRecord(sku="S1", title="Aurora NC700", brand="Aurora", category="headphones")
    ]
    start = len(prices) - 1
    records += [
        PriceRecord(sku="S1", ts=days_ago(start - i), price=p, list_price=450.0)
        for i, p in enumerate(prices)
    ]
    records += [
        StockRecord(sku="S1", ts=days_ago(3), quantity=40),
        StockRecord(sku="S1", ts=days_ago(1), quantity=4),
        PromotionRecord(sku="S1", name="Now", starts=days_ago(1), ends=days_ago(-2), price=270.0),
        PromotionRecord(
            sku="S1", name="Soon", starts=days_ago(-10), ends=days_ago(-12), price=240.0
        ),
        PromotionRecord(sku="S1", name="Past", starts=days_ago(40), ends=days_ago(39), price=200.0),
    ]
    records += [
        ReviewRecord(sku="S1", review_id=f"old{i}", ts=days_ago(60 + i), rating=5, text="good")
        for i in range(10)
    ]
    records += [
        ReviewRecord(sku="S1", review_id=f"new{i}", ts=days_ago(i), rating=2, text="worse")
        for i in range(5)
    ]
    records += [
        SalesRecord(sku="S1", date=(NOW - timedelta(days=i)).date(), units=10 + i) for i in range(5)
    ]
    store.apply(records)  # type: ignore[arg-type]
    return store


def test_price_windows_lows_and_percentile(store: MarketStore) -> None:
    sheet = FactsBuilder(store).build("S1", at_ms=AT)
    assert sheet is not None
    assert sheet.current_price == 280.0
    assert sheet.list_price == 450.0
    assert sheet.observations == 151
    assert sheet.days_tracked == 150
    w30, w90, w180 = sheet.windows
    assert (w30.days, w30.observations, w30.min) == (30, 31, 280.0)
    assert w30.avg == round((310.0 * 30 + 280.0) / 31, 2)
    assert w90.median == 300.0
    assert w180.min == 250.0 and w180.observations == 151
    assert sheet.all_time_low == 250.0
    assert sheet.all_time_low_at == days_ago(46).date().isoformat()
    assert sheet.all_time_high == 310.0
    assert sheet.percentile_90d is not None and sheet.percentile_90d < 10


def test_a_short_history_trend_is_the_change_it_saw_not_a_30_day_extrapolation(
    tmp_path: Path,
) -> None:
    """9 days tracked, a straight fall from 150 to 60: the fitted change is 90, 86 % of the
    mean price of 105 (not the 286 % that carrying the slope over 30 days reads)."""
    store = MarketStore(tmp_path / "short.db")
    records: list[object] = [ProductRecord(sku="S9", title="Short", brand="B", category="c")]
    records += [
        PriceRecord(sku="S9", ts=days_ago(9 - i), price=150.0 - 10.0 * i) for i in range(10)
    ]
    store.apply(records)  # type: ignore[arg-type]
    sheet = FactsBuilder(store).build("S9", at_ms=AT)
    assert sheet is not None and sheet.trend_30d_pct is not None
    assert sheet.trend_30d_pct == pytest.approx(-100.0 * 90 / 105, abs=0.1)


def test_ratings_are_shrunk_to_the_category_and_split_by_recency(store: MarketStore) -> None:
    sheet = FactsBuilder(store).build("S1", at_ms=AT)
    assert sheet is not None
    rating = sheet.rating
    assert rating.count == 15 and rating.recent_count == 5
    assert (rating.recent_mean, rating.earlier_mean, rating.trend) == (2.0, 5.0, -3.0)
    prior = rating.prior_mean
    assert prior == 4.0  # the category's own mean: 15 reviews ≥ the prior weight
    assert rating.bayesian == round((prior * PRIOR_WEIGHT + 60) / (PRIOR_WEIGHT + 15), 2)
    assert DEFAULT_PRIOR_MEAN > 0


def test_stock_promotions_and_sales(store: MarketStore) -> None:
    sheet = FactsBuilder(store).build("S1", at_ms=AT)
    assert sheet is not None
    assert sheet.stock == 4
    assert [p.name for p in sheet.active_promotions] == ["Now"]
    assert [p.name for p in sheet.upcoming_promotions] == ["Soon"]
    assert sheet.upcoming_promotions[0].days_until_start == 10.0
    assert sheet.sales_3d == 10 + 11 + 12


def test_days_to_an_offer_change_at_midnight_not_at_noon(store: MarketStore) -> None:
    """The reason quotes them ("starts in 5 days"), so the stored explanations' keys hold
    them: they must not change at whatever hour a fraction of a day rounds the other way."""
    starts = datetime(2026, 7, 5, tzinfo=UTC)
    offer = PromotionRecord(
        sku="S1", name="Later", starts=starts, ends=starts + timedelta(days=2), price=230.0
    )
    store.apply([offer])
    builder = FactsBuilder(store)
    days = set()
    for hour in (0, 11, 13, 23):
        sheet = builder.build("S1", at_ms=to_ms(datetime(2026, 6, 30, hour, 30, tzinfo=UTC)))
        assert sheet is not None
        days |= {p.days_until_start for p in sheet.upcoming_promotions if p.name == "Later"}
    assert days == {5}


def test_version_moves_with_any_input_and_only_then(store: MarketStore) -> None:
    builder = FactsBuilder(store)
    first = builder.build("S1", at_ms=AT)
    again = builder.build("S1", at_ms=AT)
    assert first is not None and again is not None
    assert first.version == again.version
    store.apply([ReviewRecord(sku="S1", review_id="x", ts=days_ago(200), rating=3)])  # type: ignore[arg-type]
    changed = builder.build("S1", at_ms=AT)
    assert changed is not None and changed.version != first.version


def test_data_age_is_the_age_of_the_newest_input(store: MarketStore) -> None:
    sheet = FactsBuilder(store).build("S1", at_ms=AT)
    assert sheet is not None
    assert sheet.data_age_ms == AT - to_ms(days_ago(0))


def test_unknown_product_has_no_sheet(store: MarketStore) -> None:
    assert FactsBuilder(store).build("S404") is None
    assert FactsCache(FactsBuilder(store)).get("S404") is None


def test_cache_serves_until_an_input_changes(store: MarketStore) -> None:
    cache = FactsCache(FactsBuilder(store))
    first = cache.get("S1")
    second = cache.get("S1")
    assert first is not None and second is not None
    assert second.version == first.version and cache.hits == 1
    store.apply([StockRecord(sku="S1", ts=days_ago(0.5), quantity=0)])  # type: ignore[arg-type]
    third = cache.get("S1")
    assert third is not None and third.stock == 0 and third.version != first.version


def test_rankings_by_sales_and_by_rating_in_a_window(store: MarketStore) -> None:
    store.apply(
        [
            ProductRecord(sku="S2", title="Borealis Buds", brand="B", category="headphones"),
            SalesRecord(sku="S2", date=NOW.date(), units=100),
            *(
                ReviewRecord(sku="S2", review_id=f"b{i}", ts=days_ago(i), rating=5)
                for i in range(4)
            ),
        ]  # type: ignore[arg-type]
    )
    rankings = Rankings(FactsBuilder(store))
    by_sales = rankings.top("headphones", "sales", 7, 3, at_ms=AT)
    assert [(i.rank, i.sku) for i in by_sales] == [(1, "S2"), (2, "S1")]
    assert by_sales[0].title == "Borealis Buds" and by_sales[0].value == 100
    by_rating = rankings.top("headphones", "rating", 7, 3, at_ms=AT)
    assert [i.sku for i in by_rating] == ["S2", "S1"]
    assert by_rating[0].value > by_rating[1].value
    assert rankings.top("headphones", "sales", 7, 3) is rankings.top("headphones", "sales", 7, 3)
    assert rankings.top("tvs", "sales", 7, 3, at_ms=AT) == []


def test_a_budget_ranks_only_what_is_priced_within_it(store: MarketStore) -> None:
    """S1 sells least but is the only one under 290: it is ranked first, not dropped by a cut."""
    store.apply(
        [
            ProductRecord(sku="S2", title="Borealis Buds", brand="B", category="headphones"),
            PriceRecord(sku="S2", ts=days_ago(1), price=399.0),
            PriceRecord(sku="S2", ts=days_ago(-1), price=199.0),  # not yet: after AT
            SalesRecord(sku="S2", date=NOW.date(), units=500),
            ProductRecord(sku="S3", title="Unpriced Pods", brand="C", category="headphones"),
            SalesRecord(sku="S3", date=NOW.date(), units=400),
        ]  # type: ignore[arg-type]
    )
    rankings = Rankings(FactsBuilder(store))
    assert [i.sku for i in rankings.top("headphones", "sales", 7, 1, at_ms=AT)] == ["S2"]
    within = rankings.top("headphones", "sales", 7, 1, at_ms=AT, max_price=290.0)
    assert [(i.rank, i.sku) for i in within] == [(1, "S1")]
    assert rankings.top("headphones", "sales", 7, 3, at_ms=AT, max_price=279.99) == []


def test_the_rankings_cache_drops_stale_entries_instead_of_growing(store: MarketStore) -> None:
    """Every budget amount is its own key: a long-running server must not keep them all."""
    rankings = Rankings(FactsBuilder(store), max_age_s=0.0)
    for budget in range(MAX_CACHED + 50):
        rankings.top("headphones", "sales", 7, 3, max_price=float(budget))
    assert len(rankings._cache) <= MAX_CACHED
