"""The market store on a PostgreSQL that several processes write at once: every event
applied exactly once, the facts versions as one writer would leave them."""

from __future__ import annotations

import multiprocessing
import random
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from worthit.db.postgres import placeholders
from worthit.market.apply import Outcome, apply_events
from worthit.market.events import Event, EventError, parse_event
from worthit.market.records import ProductRecord
from worthit.market.store import MarketStore
from worthit.text.time import fixed_clock

NOW = 1_780_000_000_000
SKUS = [f"P{i}" for i in range(12)]
BATCH = 40


def _event(kind: str, event_id: str, **fields: Any) -> Event:
    parsed = parse_event({"type": kind, "event_id": event_id, "source": "race", **fields})
    assert not isinstance(parsed, EventError), parsed
    return parsed


def _events() -> list[Event]:
    events = [_event("product", f"product-{sku}", sku=sku, title=f"Product {sku}") for sku in SKUS]
    for sku in SKUS:
        for day in range(1, 29):
            ts = f"2026-02-{day:02d}T08:00:00Z"
            events.append(_event("price", f"price-{sku}-{day}", sku=sku, ts=ts, price=50.0 + day))
            events.append(_event("stock", f"stock-{sku}-{day}", sku=sku, ts=ts, quantity=day))
    return events


EVENTS = _events()


def _apply(url: str, start: Any, picks: list[int], seed: int, out: Any) -> None:
    """One writer process: its events in its own order, in batches."""
    store = MarketStore(url)
    mine = [EVENTS[i] for i in picks]
    random.Random(seed).shuffle(mine)
    outcomes: Counter[str] = Counter()
    start.wait()
    while mine:
        batch, mine = mine[:BATCH], mine[BATCH:]
        report = apply_events(store, batch, fixed_clock(NOW))
        for event, result in zip(batch, report.results, strict=True):
            if result.outcome is Outcome.REJECTED:  # before its product: send it again later
                mine.append(event)
            else:
                outcomes[result.outcome.value] += 1
        if mine and len(mine) <= BATCH and all(e.type != "product" for e in mine):
            time.sleep(0.01)  # only orphans left: the other writer has their products
    store.close()
    out.put(dict(outcomes))


def test_two_processes_apply_overlapping_events_exactly_once(pg_market: str) -> None:
    MarketStore(pg_market).close()  # migrated before the race, as a deploy does
    n = len(EVENTS)
    first, second = list(range(0, n * 2 // 3)), list(range(n // 3, n))
    both = len(set(first) & set(second))
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    workers = [
        ctx.Process(target=_apply, args=(pg_market, start, picks, seed, out))
        for seed, picks in ((1, first), (2, second))
    ]
    for worker in workers:
        worker.start()
    start.set()
    for worker in workers:
        worker.join(timeout=120)
        assert worker.exitcode == 0
    results = [out.get(timeout=5) for _ in workers]
    applied = sum(r.get("applied", 0) for r in results)
    duplicate = sum(r.get("duplicate", 0) for r in results)
    assert (applied, duplicate) == (n, both)

    store = MarketStore(pg_market)
    reference = MarketStore(":memory:")  # one writer, each event once
    apply_events(reference, EVENTS, fixed_clock(NOW))
    try:
        assert store.applied_event_count() == n
        for sku in SKUS:
            assert store.revision(sku) == reference.revision(sku)
            assert store.prices(sku) == reference.prices(sku)
    finally:
        store.close()
        reference.close()


@pytest.mark.parametrize(
    ("sqlite", "postgres"),
    [
        ("SELECT ? WHERE a = ?", "SELECT %s WHERE a = %s"),
        (
            "SELECT '?', \"a?\" FROM t WHERE b LIKE ? || '%'",
            "SELECT '?', \"a?\" FROM t WHERE b LIKE %s || '%%'",
        ),
        ("SELECT 'it''s ?' , ?", "SELECT 'it''s ?' , %s"),
        ("SELECT 5 % 2", "SELECT 5 %% 2"),
    ],
)
def test_placeholders_become_psycopgs_and_quoted_text_keeps_its_marks(
    sqlite: str, postgres: str
) -> None:
    assert placeholders(sqlite) == postgres


def test_processes_opening_a_new_database_at_once_migrate_it_once(pg_market: str) -> None:
    """The migrations wait on an advisory lock, so the second opener finds them applied."""
    with ThreadPoolExecutor(4) as pool:
        stores = list(pool.map(lambda _: MarketStore(pg_market), range(4)))
    stores[0].apply([ProductRecord(sku="S1", title="Aurora NC700")])
    assert all(store.count_products() == 1 for store in stores)
    for store in stores:
        store.close()


def test_a_deadlock_victim_is_run_again_and_both_writes_land(pg_market: str) -> None:
    """Two writers lock two products in opposite orders: PostgreSQL rolls one back, and
    `write` runs that one's work again instead of failing it."""
    store = MarketStore(pg_market)
    store.apply([ProductRecord(sku="A", title="a"), ProductRecord(sku="B", title="b")])
    both_hold_one = threading.Barrier(2)
    runs: Counter[str] = Counter()

    def lock(first: str, second: str) -> None:
        def work(conn: Any) -> None:
            runs[first] += 1
            conn.execute("UPDATE products SET title = title || '+' WHERE sku = ?", (first,))
            if runs[first] == 1:
                both_hold_one.wait(timeout=10)
            conn.execute("UPDATE products SET title = title || '+' WHERE sku = ?", (second,))

        store.write(work)

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(lock, "A", "B"), pool.submit(lock, "B", "A")]:
            future.result(timeout=30)
    assert sorted(runs.values()) == [1, 2]
    assert [store.product(sku).title for sku in "AB"] == ["a++", "b++"]  # type: ignore[union-attr]
    store.close()
