"""Events: validation, the published schema, the one apply path (idempotent, order-free,
batched with a savepoint per event) and the embedded bus in front of it."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import tempfile
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.facts.builder import FactsBuilder
from worthit.market.apply import Outcome, apply_events
from worthit.market.bus import BusClosedError, BusFullError, EventBus
from worthit.market.events import (
    SCHEMA_ID,
    Event,
    EventError,
    PriceEvent,
    event_schema,
    parse_event,
    parse_json_event,
)
from worthit.market.store import MarketStore
from worthit.text.time import fixed_clock, to_ms

ROOT = Path(__file__).parents[1]
NOW = to_ms(datetime(2026, 3, 1, 12, 0))


def event(kind: str, event_id: str, **fields: Any) -> Event:
    parsed = parse_event({"type": kind, "event_id": event_id, "source": "test", **fields})
    assert not isinstance(parsed, EventError), parsed
    return parsed


def product(sku: str = "A", event_id: str | None = None) -> Event:
    return event("product", event_id or f"product-{sku}", sku=sku, title=f"Product {sku}")


def price(ts: str, value: float, event_id: str | None = None, sku: str = "A") -> Event:
    return event("price", event_id or f"price-{sku}-{ts}", sku=sku, ts=ts, price=value)


@pytest.fixture
def store(market_db: str) -> Iterator[MarketStore]:
    """On SQLite and on PostgreSQL (a schema of the test's own)."""
    store = MarketStore(market_db)
    yield store
    store.close()


# -- what an event is -------------------------------------------------------------------


def test_an_event_is_its_record_plus_id_and_source() -> None:
    parsed = parse_json_event(
        '{"type": "sales", "event_id": "e1", "source": "pos", "sku": "S1",'
        ' "date": "2026-01-02", "units": 4}'
    )
    assert not isinstance(parsed, EventError)
    assert (parsed.type, parsed.event_id, parsed.source, parsed.units) == ("sales", "e1", "pos", 4)
    assert parsed.at_ms == to_ms(datetime(2026, 1, 2))


GOOD_PRICE = {"type": "price", "event_id": "e", "source": "pos", "sku": "S1",
              "ts": "2026-01-01T00:00:00Z", "price": 1}  # fmt: skip
REVIEW = {"type": "review", "event_id": "e", "source": "pos", "sku": "S1", "review_id": "r",
          "ts": "2026-01-01T00:00:00Z", "rating": 5}  # fmt: skip
PRODUCT = {"type": "product", "event_id": "e", "source": "pos", "sku": "S1", "title": "T"}
NO_ID = {key: value for key, value in GOOD_PRICE.items() if key != "event_id"}
DEEP: list[object] = []
for _ in range(40):
    DEEP = [DEEP]


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (NO_ID, "event_id"),
        (GOOD_PRICE | {"event_id": "x" * 129}, "event_id"),
        (GOOD_PRICE | {"source": "a b"}, "source"),
        (GOOD_PRICE | {"price": -1}, "price"),
        (GOOD_PRICE | {"colour": "red"}, "colour"),
        ({"type": "refund", "event_id": "e", "source": "pos"}, "type"),
        ({"event_id": "e", "source": "pos"}, "type"),
        (REVIEW | {"text": "ok\ud800"}, "text"),
        (PRODUCT | {"attributes": {"k": ["\udfff"]}}, "attributes.k.0"),
        (PRODUCT | {"attributes": {"k": DEEP}}, "attributes.k" + ".0" * 31),
        (["not", "an", "object"], "(event)"),
    ],
)
def test_a_bad_event_is_named_by_its_field(data: object, field: str) -> None:
    parsed = parse_event(data, index=7)
    assert isinstance(parsed, EventError)
    assert (parsed.index, parsed.field) == (7, field)


def test_the_schema_is_versioned_and_accepts_exactly_what_the_models_accept() -> None:
    schema = event_schema()
    assert schema["$id"] == SCHEMA_ID and SCHEMA_ID.endswith("/v1.json")
    validator = jsonschema_rs.validator_for(schema)
    good = {"type": "price", "event_id": "e", "source": "pos", "sku": "S1",
            "ts": "2026-01-01T00:00:00Z", "price": 9.5}  # fmt: skip
    assert validator.is_valid(good) and not isinstance(parse_event(good), EventError)
    for bad in ({**good, "price": 0}, {**good, "extra": 1}, {**good, "type": "stock"}):
        assert not validator.is_valid(bad) and isinstance(parse_event(bad), EventError)


def test_docs_publish_the_schema_as_generated() -> None:
    """docs/events.md carries the schema; regenerate the block with
    `python -c 'import json; from worthit.market.events import event_schema;
    print(json.dumps(event_schema(), indent=2, ensure_ascii=False))'`."""
    doc = (ROOT / "docs" / "events.md").read_text()
    blocks = re.findall(r"```json\n(\{\n  \"\$schema\".*?)```", doc, re.S)
    assert blocks, "docs/events.md has no schema block"
    assert json.loads(blocks[0]) == event_schema()


# -- applying ---------------------------------------------------------------------------


def test_the_same_event_twice_changes_nothing_and_says_duplicate(store: MarketStore) -> None:
    apply_events(store, [product()])
    first = apply_events(store, [price("2026-01-01T08:00:00Z", 299.0, "p1")])
    revision = store.revision("A")
    rows = store.prices("A")
    second = apply_events(store, [price("2026-01-01T08:00:00Z", 199.0, "p1")])
    assert [r.outcome for r in first.results] == [Outcome.APPLIED]
    assert first.changed_skus == {"A"}
    assert [r.outcome for r in second.results] == [Outcome.DUPLICATE]
    assert second.changed_skus == set()
    assert store.revision("A") == revision and store.prices("A") == rows


def test_a_new_id_with_the_same_values_is_applied_but_changes_nothing(store: MarketStore) -> None:
    apply_events(store, [product(), price("2026-01-01T08:00:00Z", 299.0, "p1")])
    revision = store.revision("A")
    report = apply_events(store, [price("2026-01-01T08:00:00Z", 299.0, "p2")])
    assert report.results[0].outcome is Outcome.APPLIED and not report.results[0].changed
    assert store.revision("A") == revision


def test_a_late_older_price_joins_the_history_but_not_the_current_price(
    store: MarketStore,
) -> None:
    apply_events(store, [product(), price("2026-02-01T08:00:00Z", 249.0)])
    apply_events(store, [price("2026-01-15T08:00:00Z", 199.0)])
    sheet = FactsBuilder(store, fixed_clock(NOW)).build("A")
    assert sheet is not None
    assert sheet.current_price == 249.0 and sheet.current_price_at == "2026-02-01T08:00:00Z"
    assert sheet.observations == 2 and sheet.all_time_low == 199.0
    assert store.current_prices(["A"], NOW) == {"A": 249.0}


def test_one_bad_event_costs_only_itself(store: MarketStore) -> None:
    apply_events(store, [product()])
    report = apply_events(
        store,
        [
            price("2026-01-01T08:00:00Z", 10.0, "ok-1"),
            price("2026-01-02T08:00:00Z", 11.0, "orphan", sku="NOPE"),
            price("2026-01-03T08:00:00Z", 12.0, "ok-2"),
        ],
    )
    assert [r.outcome for r in report.results] == [
        Outcome.APPLIED,
        Outcome.REJECTED,
        Outcome.APPLIED,
    ]
    error = report.results[1].error
    assert error is not None and (error.index, error.field) == (1, "sku")
    assert [p.price for p in store.prices("A")] == [10.0, 12.0]
    # the rejected id was not recorded: once its product exists, the retry lands
    apply_events(store, [product("NOPE")])
    retry = apply_events(store, [price("2026-01-02T08:00:00Z", 11.0, "orphan", sku="NOPE")])
    assert retry.results[0].outcome is Outcome.APPLIED


def _refuse_price(store: MarketStore, value: float | None) -> None:
    """A constraint the database itself enforces: no price of `value` (None: lift it)."""
    if store.path.startswith("postgresql"):
        import psycopg

        with psycopg.connect(store.path, autocommit=True) as conn:
            conn.execute("DROP TRIGGER IF EXISTS refuse ON prices")
            if value is not None:
                conn.execute(
                    "CREATE OR REPLACE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$"
                    f" BEGIN IF NEW.price = {value} THEN RAISE check_violation; END IF;"
                    " RETURN NEW; END $$"
                )
                conn.execute("CREATE TRIGGER refuse BEFORE INSERT ON prices FOR EACH ROW "
                             "EXECUTE FUNCTION refuse()")  # fmt: skip
        return
    conn = sqlite3.connect(store.path)
    conn.execute("DROP TRIGGER IF EXISTS refuse")
    if value is not None:
        conn.execute(f"CREATE TRIGGER refuse BEFORE INSERT ON prices WHEN NEW.price = {value} "
                     "BEGIN SELECT RAISE(ABORT, 'refused'); END")  # fmt: skip
    conn.close()


def test_an_event_the_database_refuses_costs_only_itself(store: MarketStore) -> None:
    """Refused by a constraint: its claim and its row are undone, its batch-mates land,
    and once the database takes it a retry applies it."""
    apply_events(store, [product()])
    _refuse_price(store, 11.0)
    batch = [price(f"2026-01-0{day}T08:00:00Z", 9.0 + day, f"p{day}") for day in (1, 2, 3)]
    report = apply_events(store, batch)
    assert [r.outcome for r in report.results] == [
        Outcome.APPLIED,
        Outcome.REJECTED,
        Outcome.APPLIED,
    ]
    error = report.results[1].error
    assert error is not None and (error.index, error.field) == (1, "(event)")
    assert [p.price for p in store.prices("A")] == [10.0, 12.0]
    _refuse_price(store, None)
    assert apply_events(store, batch).count(Outcome.APPLIED) == 1
    assert store.applied_event_count() == 4


def test_a_batch_may_carry_a_product_after_its_series(store: MarketStore) -> None:
    report = apply_events(store, [price("2026-01-01T08:00:00Z", 10.0), product()])
    assert [r.outcome for r in report.results] == [Outcome.APPLIED, Outcome.APPLIED]
    assert [r.event_id for r in report.results] == ["price-A-2026-01-01T08:00:00Z", "product-A"]


def test_the_same_id_twice_in_one_batch_applies_once(store: MarketStore) -> None:
    apply_events(store, [product()])
    report = apply_events(
        store,
        [price("2026-01-01T08:00:00Z", 10.0, "same"), price("2026-01-02T08:00:00Z", 11.0, "same")],
    )
    assert [r.outcome for r in report.results] == [Outcome.APPLIED, Outcome.DUPLICATE]
    assert [p.price for p in store.prices("A")] == [10.0]


def _event_set() -> list[Event]:
    """Two products and their series, every key distinct: one market's worth of changes."""
    events: list[Event] = [product("A"), product("B")]
    for sku in ("A", "B"):
        for day in range(1, 7):
            events.append(price(f"2026-02-{day:02d}T08:00:00Z", 100.0 + 7 * day % 5, sku=sku))
        for day in (2, 4):
            events.append(event("stock", f"stock-{sku}-{day}", sku=sku,
                                ts=f"2026-02-{day:02d}T09:00:00Z", quantity=10 - day))  # fmt: skip
            events.append(event("sales", f"sales-{sku}-{day}", sku=sku,
                                date=f"2026-02-{day:02d}", units=day))  # fmt: skip
            events.append(event("review", f"review-{sku}-{day}", sku=sku, review_id=f"r{day}",
                                ts=f"2026-02-{day:02d}T10:00:00Z", rating=day))  # fmt: skip
        events.append(event("promotion", f"promo-{sku}", sku=sku, name="Spring Sale",
                            starts="2026-03-05T00:00:00Z", ends="2026-03-09T00:00:00Z",
                            price=90.0))  # fmt: skip
    return events


EVENTS = _event_set()
TABLES = ("products", "prices", "stock", "reviews", "promotions", "sales", "applied_events")


def _final_state(
    deliveries: list[list[Event]],
) -> tuple[dict[str, list[tuple[Any, ...]]], list[str]]:
    """Deliver the batches at least once: whatever was rejected is sent again afterwards,
    as an at-least-once producer does, until nothing is. The tables and fact versions."""
    with tempfile.TemporaryDirectory() as tmp:
        store = MarketStore(Path(tmp) / "m.db")
        pending = deliveries
        while pending:
            retry: list[Event] = []
            for batch in pending:
                report = apply_events(store, batch, fixed_clock(NOW))
                retry += [e for e, r in zip(batch, report.results, strict=True)
                          if r.outcome is Outcome.REJECTED]  # fmt: skip
            pending = [retry] if retry else []
        builder = FactsBuilder(store, fixed_clock(NOW))
        sheets = [builder.build(hit.sku) for hit in store.all_names()]
        versions = [sheet.version for sheet in sheets if sheet is not None]
        store.close()
        conn = sqlite3.connect(Path(tmp) / "m.db")
        tables = {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall()) for t in TABLES}
        conn.close()
    return tables, versions


REFERENCE = _final_state([EVENTS])


@settings(max_examples=40, deadline=None)
@given(
    order=st.permutations(range(len(EVENTS))),
    again=st.lists(st.integers(0, len(EVENTS) - 1), max_size=15),
    cuts=st.lists(st.integers(1, 12), min_size=1, max_size=8),
)
def test_any_order_and_duplication_gives_the_same_state_and_facts(
    order: list[int], again: list[int], cuts: list[int]
) -> None:
    stream = [EVENTS[i] for i in order] + [EVENTS[i] for i in again]
    batches, begin = [], 0
    for size in cuts * (len(stream) // sum(cuts) + 1):
        if begin >= len(stream):
            break
        batches.append(stream[begin : begin + size])
        begin += size
    assert _final_state(batches) == REFERENCE


CORRECTED = [
    product("A"),
    price("2026-02-01T08:00:00Z", 100.0, "first"),
    price("2026-02-01T08:00:00Z", 120.0, "correction"),
    event("stock", "s1", sku="A", ts="2026-02-01T09:00:00Z", quantity=5),
    event("stock", "s2", sku="A", ts="2026-02-01T09:00:00Z", quantity=0),
    event("review", "r1", sku="A", review_id="r", ts="2026-02-01T10:00:00Z", rating=5, text="ok"),
    event("review", "r2", sku="A", review_id="r", ts="2026-02-01T10:00:00Z", rating=1, text="bad"),
]

CORRECTED_REFERENCE = _final_state([[event] for event in CORRECTED])


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_a_redelivered_event_never_undoes_a_later_correction(data: st.DataObject) -> None:
    """The later-applied of two events on one key wins; a redelivery of the earlier one,
    whenever it comes, finds its id and changes nothing (revision included)."""
    stream = list(CORRECTED)
    for _ in range(data.draw(st.integers(1, 10))):
        original = data.draw(st.integers(0, len(CORRECTED) - 1))
        first_seen = stream.index(CORRECTED[original])
        stream.insert(data.draw(st.integers(first_seen + 1, len(stream))), CORRECTED[original])
    size = data.draw(st.integers(1, len(stream)))
    batches = [stream[i : i + size] for i in range(0, len(stream), size)]
    assert _final_state(batches) == CORRECTED_REFERENCE


# -- the bus ------------------------------------------------------------------------------


def test_the_bus_applies_in_batches_and_tells_subscribers_after_the_commit(
    store: MarketStore,
) -> None:
    apply_events(store, [product("A"), product("B")])
    seen: list[tuple[frozenset[str], int]] = []

    async def run() -> list[Outcome]:
        bus = EventBus(store)
        bus.subscribe(lambda skus: seen.append((skus, len(store.prices("A")))))
        bus.start()
        results = await bus.submit(
            [
                price("2026-01-01T08:00:00Z", 10.0, "x1"),
                price("2026-01-01T08:00:00Z", 10.0, "x1"),
                price("2026-01-01T08:00:00Z", 20.0, "y1", sku="B"),
            ]
        )
        await bus.stop()
        return [r.outcome for r in results]

    assert asyncio.run(run()) == [Outcome.APPLIED, Outcome.DUPLICATE, Outcome.APPLIED]
    assert seen == [(frozenset({"A", "B"}), 1)]  # once per commit, the price already readable


def test_publish_waits_for_room_and_submit_reports_full(store: MarketStore) -> None:
    apply_events(store, [product()])

    async def run() -> None:
        bus = EventBus(store, capacity=2)
        await bus.publish(price("2026-01-01T08:00:00Z", 1.0))
        await bus.publish(price("2026-01-02T08:00:00Z", 2.0))
        third = asyncio.create_task(bus.publish(price("2026-01-03T08:00:00Z", 3.0)))
        await asyncio.sleep(0.05)
        assert not third.done()  # backpressure: the producer waits, nothing is dropped
        with pytest.raises(BusFullError):
            await bus.submit([price("2026-01-04T08:00:00Z", 4.0)], timeout_s=0.05)
        bus.start()
        await third
        await bus.join()
        await bus.stop()
        with pytest.raises(BusClosedError):
            await bus.publish(price("2026-01-05T08:00:00Z", 5.0))

    asyncio.run(run())
    assert [p.price for p in store.prices("A")] == [1.0, 2.0, 3.0]


def test_a_price_event_is_a_price_record() -> None:
    """One write path: the store applies an event as the importer applies a line."""
    from worthit.market.records import PriceRecord

    assert issubclass(PriceEvent, PriceRecord)


# -- when a promotion was announced -------------------------------------------------------

SALE = {"type": "promotion", "event_id": "sale-1", "source": "test", "sku": "A",
        "name": "Spring Sale", "starts": "2026-03-20T00:00:00Z",
        "ends": "2026-03-23T00:00:00Z", "price": 80.0}  # fmt: skip


@pytest.mark.parametrize(
    "announced",
    ["soon", "2026-03-23T00:00:00Z", "2026-03-24", "9999-12-31T23:59:59-05:00", [1]],
)
def test_a_bad_announcement_is_named_by_its_field(announced: object) -> None:
    """Not a time, or not before the offer ends."""
    parsed = parse_event(SALE | {"announced_at": announced}, index=3)
    assert isinstance(parsed, EventError)
    assert (parsed.index, parsed.field) == (3, "announced_at")


def test_a_promotion_without_its_announcement_was_announced_when_received(
    store: MarketStore,
) -> None:
    """The event's arrival (the bus's clock) is when worthit learnt of the offer; one that
    says when it was announced keeps that; a redelivery later changes nothing."""
    told = parse_event(SALE | {"event_id": "sale-2", "name": "Told",
                               "announced_at": "2026-02-01T08:00:00+08:00"})  # fmt: skip
    assert not isinstance(told, EventError)
    silent = parse_event(SALE)
    assert not isinstance(silent, EventError) and silent.announced_at is None
    apply_events(store, [product(), silent, told], clock=fixed_clock(NOW))
    announced = {p.name: p.announced_ms for p in store.promotions("A")}
    assert announced == {"Spring Sale": NOW, "Told": to_ms(datetime(2026, 2, 1))}
    resent = parse_event(SALE | {"event_id": "sale-3"})
    assert not isinstance(resent, EventError)
    again = apply_events(store, [resent], clock=fixed_clock(NOW + 86_400_000))
    assert [r.changed for r in again.results] == [False]
    assert store.promotions("A")[0].announced_ms == NOW
