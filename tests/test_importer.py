"""JSONL import: good lines land, bad lines are named by number and field, re-import is a no-op,
and the bus's subscribers hear of imported rows as of events."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.market.bus import EventBus
from worthit.market.events import EventError, parse_event
from worthit.market.ingest.importer import import_lines, parse_line, run_import
from worthit.market.store import MarketStore

GOOD = [
    {
        "type": "product",
        "sku": "S1",
        "title": "Aurora NC700 Wireless Headphones",
        "brand": "Aurora",
        "category": "headphones",
        "aliases": ["NC700", "极光NC700"],
    },
    {
        "type": "price",
        "sku": "S1",
        "ts": "2026-01-01T08:00:00Z",
        "price": 299.0,
        "currency": "USD",
        "list_price": 399.0,
    },
    {"type": "stock", "sku": "S1", "ts": "2026-01-01T08:00:00Z", "quantity": 12},
    {
        "type": "review",
        "sku": "S1",
        "review_id": "r1",
        "ts": "2026-01-02T10:00:00Z",
        "rating": 4,
        "text": "Great sound",
        "verified": True,
    },
    {
        "type": "promotion",
        "sku": "S1",
        "name": "Double 11",
        "starts": "2026-11-11T00:00:00Z",
        "ends": "2026-11-12T00:00:00Z",
        "price": 249.0,
    },
    {"type": "sales", "sku": "S1", "date": "2026-01-01", "units": 31},
]


def lines(records: list[dict[str, object]]) -> list[str]:
    return [json.dumps(r, ensure_ascii=False) for r in records]


@pytest.fixture
def store(market_db: str) -> Iterator[MarketStore]:
    """On SQLite and on PostgreSQL (a schema of the test's own)."""
    store = MarketStore(market_db)
    yield store
    store.close()


def test_every_record_type_imports(store: MarketStore) -> None:
    report = run_import(store, lines(GOOD))
    assert report.errors == []
    assert report.written == len(GOOD)
    assert store.prices("S1")[0].list_price == 399.0
    assert store.latest_stock("S1") is not None
    assert store.promotions("S1")[0].name == "Double 11"
    assert store.sales("S1", "2026-01-01")[0].units == 31


def test_importing_the_same_file_twice_changes_nothing(store: MarketStore) -> None:
    run_import(store, lines(GOOD))
    revision = store.revision("S1")
    again = run_import(store, lines(GOOD))
    assert (again.written, again.unchanged, again.errors) == (0, len(GOOD), [])
    assert store.revision("S1") == revision


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ("{not json", "(line)"),
        ("[1, 2]", "(line)"),
        ('{"type": "coupon", "sku": "S1"}', "type"),
        ('{"type": "price", "sku": "S1", "ts": "2026-01-01T00:00:00Z", "price": -5}', "price"),
        ('{"type": "price", "sku": "S1", "ts": "yesterday", "price": 5}', "ts"),
        (
            '{"type": "review", "sku": "S1", "review_id": "r", "ts": "2026-01-01T00:00:00Z",'
            ' "rating": 6}',
            "rating",
        ),
        (
            '{"type": "stock", "sku": "S1", "ts": "2026-01-01T00:00:00Z", "quantity": 1,'
            ' "colour": "red"}',
            "colour",
        ),
        (
            '{"type": "promotion", "sku": "S1", "name": "X", "starts": "2026-01-02T00:00:00Z",'
            ' "ends": "2026-01-01T00:00:00Z", "price": 5}',
            "ends",
        ),
        ('{"type": "price", "sku": "S404", "ts": "2026-01-01T00:00:00Z", "price": 5}', "sku"),
        (
            '{"type": "stock", "sku": "S1", "ts": "2026-01-03T00:00:00Z",'
            ' "quantity": 99999999999999999999999}',
            "quantity",
        ),
        (
            '{"type": "sales", "sku": "S1", "date": "2026-01-03", "units": 9223372036854775808}',
            "units",
        ),
        ('{"type": "price", "sku": "S1", "ts": "2026-01-03T00:00:00Z", "price": 1e300}', "price"),
    ],
)
def test_a_bad_line_is_reported_and_the_good_ones_still_land(
    store: MarketStore, line: str, field: str
) -> None:
    good = lines(GOOD)
    report = run_import(store, [*good[:2], line, *good[2:]])
    assert [(e.line, e.field) for e in report.errors] == [(3, field)]
    assert report.written == len(GOOD)


def test_a_line_the_store_rejects_costs_only_itself(store: MarketStore) -> None:
    """Validation passed, then the database refused the write (a constraint of its own):
    its batch-mates must still land, and it must leave no trace."""
    refuse_stock(store, 12)
    report = run_import(store, lines(GOOD))
    assert [(e.line, e.field) for e in report.errors] == [(3, "(line)")]
    assert "not stored" in report.errors[0].message
    assert report.written == len(GOOD) - 1
    assert store.latest_stock("S1") is None
    assert [p.price for p in store.prices("S1")] == [299.0]


def refuse_stock(store: MarketStore, quantity: int) -> None:
    if store.path.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store.path, autocommit=True) as conn:
            conn.execute(
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
                f" IF NEW.quantity = {quantity} THEN RAISE check_violation; END IF;"
                " RETURN NEW; END $$"
            )
            conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON stock FOR EACH ROW "
                         "EXECUTE FUNCTION refuse()")  # fmt: skip
        return
    conn = sqlite3.connect(store.path)
    conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON stock WHEN NEW.quantity = {quantity} "
                 "BEGIN SELECT RAISE(ABORT, 'refused'); END")  # fmt: skip
    conn.close()


def test_blank_lines_are_skipped_but_counted(store: MarketStore) -> None:
    report = run_import(store, ["", *lines(GOOD[:2]), "   "])
    assert report.lines == 4 and report.written == 2 and not report.errors


def test_a_product_later_in_the_file_is_not_known_earlier(store: MarketStore) -> None:
    good = lines(GOOD)
    report = run_import(store, [good[1], good[0]])
    assert [(e.line, e.field) for e in report.errors] == [(1, "sku")]


def test_subscribers_hear_what_an_import_changed_as_they_hear_events(store: MarketStore) -> None:
    """An import takes the bus like any event: the fact cache, the explanation queue and
    the watches subscribe there. Stock and sales readings restate nothing; unchanged
    lines are no news; an import queued behind an event lands after it."""
    heard: list[tuple[str, frozenset[str]]] = []
    stock_only = [{"type": "stock", "sku": "S1", "ts": "2026-01-03T08:00:00Z", "quantity": 3}]
    second = [{**GOOD[0], "sku": "S2", "aliases": []}, {**GOOD[1], "sku": "S2"}]
    price = parse_event(
        {**GOOD[1], "ts": "2026-01-04T08:00:00Z", "price": 279.0, "event_id": "e1", "source": "t"}
    )
    assert not isinstance(price, EventError)

    async def run() -> None:
        bus = EventBus(store)
        bus.subscribe(lambda skus: heard.append(("changed", skus)))
        bus.subscribe(lambda skus: heard.append(("restated", skus)), restated_only=True)
        bus.start()
        try:
            await import_lines(bus, lines(GOOD))
            await import_lines(bus, lines(GOOD))
            await import_lines(bus, lines(stock_only))
            await bus.publish(price)
            await import_lines(bus, lines(second))
        finally:
            await bus.stop()

    asyncio.run(run())
    s1, s2 = frozenset({"S1"}), frozenset({"S2"})
    assert heard == [
        ("changed", s1),
        ("restated", s1),
        ("changed", s1),
        ("changed", s1),
        ("restated", s1),
        ("changed", s2),
        ("restated", s2),
    ]
    assert [p.price for p in store.prices("S1")] == [299.0, 279.0]
    assert [p.price for p in store.prices("S2")] == [299.0]


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parse_line_never_raises(text: str) -> None:
    parse_line(text, 1)


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["type", "sku", "ts", "price", "rating", "units", "date", "x"]),
        st.one_of(st.none(), st.integers(), st.floats(allow_nan=True), st.text(max_size=20)),
    )
)
def test_parse_line_turns_any_object_into_a_record_or_an_error(data: dict[str, object]) -> None:
    parse_line(json.dumps(data), 7)


def test_a_promotion_without_its_announcement_was_announced_at_the_import(
    store: MarketStore,
) -> None:
    """Imported at `now`, a promotion that does not say when it was announced is known
    from then; one that does keeps its own; a bad one is named."""
    sale = GOOD[4]
    told = sale | {"name": "Told", "announced_at": "2026-10-01T00:00:00Z"}
    bad = sale | {"name": "Bad", "announced_at": "2026-11-12T00:00:00Z"}
    now = 1_790_000_000_000
    report = run_import(store, lines([GOOD[0], sale, told, bad]), now=now)
    assert [(e.line, e.field) for e in report.errors] == [(4, "announced_at")]
    announced = {p.name: p.announced_ms for p in store.promotions("S1")}
    assert announced == {"Double 11": now, "Told": 1_790_812_800_000}
