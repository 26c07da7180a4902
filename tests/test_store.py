"""The market store on SQLite and PostgreSQL: idempotent writes, revisions, search, and
migrations of an old schema."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest

from worthit.db.migrations import SchemaTooNewError
from worthit.market.records import (
    PriceRecord,
    ProductRecord,
    PromotionRecord,
    ReviewRecord,
    StockRecord,
)
from worthit.market.schema import (
    LATEST_VERSION,
    MIGRATIONS,
    POSTGRES_MIGRATIONS,
    migrate,
    schema_version,
)
from worthit.market.store import MarketStore, UnknownSkuError

NC700 = ProductRecord(
    sku="S1",
    title="Aurora NC700 Wireless Headphones",
    brand="Aurora",
    category="headphones",
    aliases=["NC700", "极光NC700"],
)


def price(ts: str, value: float) -> PriceRecord:
    return PriceRecord(sku="S1", ts=ts, price=value, currency="USD")  # type: ignore[arg-type]


@pytest.fixture
def store(market_db: str) -> Iterator[MarketStore]:
    store = MarketStore(market_db)
    yield store
    store.close()


def test_store_opens_in_wal_mode_at_the_latest_schema(tmp_path: Path) -> None:
    store = MarketStore(tmp_path / "m.db")
    conn = sqlite3.connect(store.path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION


def test_writing_the_same_records_twice_changes_nothing(store: MarketStore) -> None:
    records = [NC700, price("2026-01-01T08:00:00Z", 299.0), price("2026-01-02T08:00:00Z", 289.0)]
    first = store.apply(records)
    revision = store.revision("S1")
    second = store.apply(records)
    assert (first.written, first.unchanged) == (3, 0)
    assert (second.written, second.unchanged) == (0, 3)
    assert store.revision("S1") == revision


def test_every_input_bumps_the_revision_and_data_time(store: MarketStore) -> None:
    store.apply([NC700])
    before = store.revision("S1")
    assert before is not None
    store.apply([StockRecord(sku="S1", ts="2026-02-01T00:00:00Z", quantity=3)])  # type: ignore[arg-type]
    after = store.revision("S1")
    assert after is not None and after[0] > before[0]
    assert after[1] > before[1]
    store.apply([price("2026-01-01T08:00:00Z", 199.0)])
    changed = store.revision("S1")
    assert changed is not None and changed[0] > after[0]


def test_a_changed_value_overwrites_and_counts(store: MarketStore) -> None:
    store.apply([NC700, price("2026-01-01T08:00:00Z", 299.0)])
    stats = store.apply([price("2026-01-01T08:00:00Z", 279.0)])
    assert stats.written == 1
    assert [p.price for p in store.prices("S1")] == [279.0]


def sale(announced: str | None) -> PromotionRecord:
    return PromotionRecord(
        sku="S1",
        name="Double 11",
        starts="2026-11-11T00:00:00Z",  # type: ignore[arg-type]
        ends="2026-11-12T00:00:00Z",  # type: ignore[arg-type]
        price=249.0,
        announced_at=announced,  # type: ignore[arg-type]
    )


def test_a_promotion_keeps_its_earliest_announcement(store: MarketStore) -> None:
    """Sent again (a redelivery, an import run twice, received later), it is no news: the
    row and the revision stay; an earlier announcement moves it; an unknown one gives way."""
    store.apply([NC700, sale(None)])
    assert store.promotions("S1")[0].announced_ms is None
    store.apply([sale("2026-10-20T00:00:00Z")])
    first = store.promotions("S1")[0].announced_ms
    revision = store.revision("S1")
    later = store.apply([sale("2026-11-01T00:00:00Z"), sale(None)])
    assert (later.written, later.unchanged) == (0, 2)
    assert store.promotions("S1")[0].announced_ms == first and store.revision("S1") == revision
    earlier = sale("2026-10-01T00:00:00Z")
    assert store.apply([earlier]).written == 1
    assert store.promotions("S1")[0].announced_ms == earlier.announced_ms


def test_a_product_added_through_another_store_is_known(store: MarketStore) -> None:
    other = MarketStore(store.path)
    assert not store.has_sku("S1")
    other.apply([NC700])
    other.close()
    store.apply([price("2026-01-01T08:00:00Z", 299.0)])
    assert len(store.prices("S1")) == 1


def test_postgres_opens_at_the_latest_schema_once(pg_market: str) -> None:
    """Its version is the `market` row of schema_components; a second open migrates
    nothing, and the one migration there is reaches the same version as SQLite's chain."""
    assert POSTGRES_MIGRATIONS[-1].version == LATEST_VERSION
    first = MarketStore(pg_market)
    second = MarketStore(pg_market)
    conn = second._db.connection()
    assert schema_version(conn) == LATEST_VERSION
    assert migrate(conn) == []
    first.close()
    second.close()


def test_a_postgres_schema_newer_than_this_worthit_is_refused(pg_market: str) -> None:
    import psycopg

    MarketStore(pg_market).close()

    with psycopg.connect(pg_market, autocommit=True) as conn:
        conn.execute(
            "UPDATE schema_components SET version = version + 1 WHERE component = 'market'"
        )
    with pytest.raises(SchemaTooNewError):
        MarketStore(pg_market)


def test_infinite_prices_are_refused() -> None:
    with pytest.raises(ValueError, match="finite"):
        PriceRecord(sku="S1", ts="2026-01-01T00:00:00Z", price=float("inf"))  # type: ignore[arg-type]


def test_records_for_an_unknown_sku_are_refused(store: MarketStore) -> None:
    with pytest.raises(UnknownSkuError, match="S9"):
        store.apply([PriceRecord(sku="S9", ts="2026-01-01T00:00:00Z", price=1.0)])  # type: ignore[arg-type]


def test_rating_split_aggregates_without_reading_text(store: MarketStore) -> None:
    store.apply([NC700])
    reviews = [
        ReviewRecord(
            sku="S1",
            review_id=f"r{i}",
            ts=f"2026-01-{i + 1:02d}T00:00:00Z",  # type: ignore[arg-type]
            rating=rating,
            text="ok",
        )
        for i, rating in enumerate([5, 5, 4, 2, 1])
    ]
    store.apply(reviews)
    split = reviews[3].ts_ms
    assert store.rating_split("S1", split, 2**62) == (3, 14, 2, 3, reviews[-1].ts_ms)


def test_migrating_a_version_one_database_keeps_its_data(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=1)
    conn.execute(
        "INSERT INTO products (sku, title, brand, category, aliases)"
        " VALUES ('S1', 'Aurora NC700 Wireless Headphones', 'Aurora', 'headphones', '[\"NC700\"]')"
    )
    conn.execute("INSERT INTO prices VALUES ('S1', 1767254400000, 299.0, 'USD', NULL)")
    conn.execute("INSERT INTO prices VALUES ('S1', 1767340800000, 289.0, 'USD', NULL)")
    conn.close()

    store = MarketStore(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    revision = store.revision("S1")
    assert revision == (3, 1767340800000)
    assert [hit.sku for hit in store.all_names()] == ["S1"]
    store.apply([price("2026-01-03T00:00:00Z", 279.0)])
    bumped = store.revision("S1")
    assert bumped is not None and bumped[0] == 4


def test_promotions_stored_before_announcements_keep_their_notice(tmp_path: Path) -> None:
    """Migration 7 adds the announcement; the rows already there have none (NULL), which
    the facts builder reads as known PROMOTION_NOTICE_DAYS before they start, as before."""
    path = tmp_path / "v6.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=6)
    conn.execute("INSERT INTO products (sku, title) VALUES ('S1', 'Aurora NC700')")
    conn.execute(
        "INSERT INTO promotions (sku, name, starts, ends, price)"
        " VALUES ('S1', 'Double 11', 1762819200000, 1762905600000, 249.0)"
    )
    conn.close()
    store = MarketStore(path)
    assert sqlite3.connect(path).execute("PRAGMA user_version").fetchone()[0] == LATEST_VERSION
    [promotion] = store.promotions("S1")
    assert (promotion.name, promotion.announced_ms) == ("Double 11", None)


def test_a_schema_newer_than_this_worthit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {LATEST_VERSION + 1}")
    conn.close()
    with pytest.raises(SchemaTooNewError):
        MarketStore(path)


def test_migrations_are_numbered_in_order() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, len(MIGRATIONS) + 1))
