"""The one apply path: every event, whatever brought it, reaches the store through here,
and so does every batch of an import's lines (`apply_import_batch`), through the same
bus (bus.py) and the same retry.

A batch is one transaction, so a thousand events pay one commit. Its id is claimed in
`applied_events` and its record upserted, or neither, so one bad event costs only itself
and a redelivered one finds its id and changes nothing. A series event for an unknown
product is refused before it touches the database; the database refusing one (a constraint,
a value it cannot hold) is rare, so a batch first runs without savepoints: its products'
claims, their effects, then the series' claims and effects, each step pipelined (one round
trip on PostgreSQL, however many events). Only when the database refuses an event is the
batch run again, one event at a time under a savepoint each, so that event alone fails.
The revision bump is a trigger on the same rows (schema.py), so the facts version
moves in the same commit as the data it describes.

Arrival order does not matter. Series rows are keyed by their own time (a price by sku
and `ts`), and the current price is the one with the latest `ts`, so a late older price
joins the history without displacing a newer one. Product events are applied first
within a batch, so a batch may carry a new product and its prices in any order; a
series event for a product the store has never seen is rejected (field `sku`), and its
retry lands once the product has. Two events with the same key but different values
(a correction) are the one case where order counts: the later-applied one wins.

On PostgreSQL several processes apply at once. A claim is an `ON CONFLICT DO NOTHING`
insert: a second writer of the same id waits for the first one's commit, then finds the
row and reports a duplicate (or, if the first rolled back, claims it). The revision bump
is a row update under the product's row lock. Two batches that lock the same products in
opposite orders deadlock; PostgreSQL rolls one back and `MarketStore.write` runs that
whole batch again, so no event is applied twice or lost. Series events are applied in
sku order, which makes such deadlocks rarer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TypeVar

from worthit.db.connection import Connection
from worthit.market.events import Event, EventError, ProductEvent
from worthit.market.records import Record, SalesRecord, StockRecord, as_received
from worthit.market.store import MarketStore
from worthit.text.time import Clock, now_ms

T = TypeVar("T")

_EVENT_ERRORS = (OverflowError, RecursionError, ValueError)
"""What one event can cause, with the database's row errors (`Errors.row`); a full disk
or a lock (`Errors.unavailable`) fails the batch."""


class Outcome(StrEnum):
    APPLIED = "applied"
    """Its id is new: the record was written (or already held those values)."""
    DUPLICATE = "duplicate"
    """Its id was applied before: nothing changed."""
    REJECTED = "rejected"
    """The store refused it; its id is not recorded, so a corrected retry can land."""


@dataclass(frozen=True, slots=True)
class EventResult:
    event_id: str
    outcome: Outcome
    changed: bool = False
    """Applied and the store's rows differ afterwards (the product's revision moved)."""
    error: EventError | None = None


@dataclass
class BatchReport:
    results: list[EventResult]
    """One per event, in the order given."""
    changed_skus: set[str] = field(default_factory=set)
    """Products whose facts changed in this commit: what caches must forget."""
    restated_skus: set[str] = field(default_factory=set)
    """Those changed by more than a stock or sales reading (a price, a review, a
    promotion, the product): what an explanation of them says may have moved."""

    def count(self, outcome: Outcome) -> int:
        return sum(1 for result in self.results if result.outcome is outcome)


COUNTS = (StockRecord, SalesRecord)
"""Readings a live feed sends all the time (the demo's heartbeat) that move no price,
rating or promotion, so they are no reason to rewrite a product's explanations."""


@dataclass
class ImportBatchReport:
    changed: list[bool]
    """One per record, in the order given: whether it changed the store's rows (False
    when they already held those values, or when it was refused)."""
    refused: dict[int, str] = field(default_factory=dict)
    """Records the database refused, by index: why. Each cost only itself."""
    changed_skus: set[str] = field(default_factory=set)
    restated_skus: set[str] = field(default_factory=set)
    """As in `BatchReport`: what caches must forget, and what explanations may have moved."""


def apply_events(store: MarketStore, events: Sequence[Event], clock: Clock = now_ms) -> BatchReport:
    """Apply `events` in one transaction; raises only when the whole batch failed (one of
    `store.errors.unavailable`: the database is locked, full or gone), and then none of
    it is applied."""
    applied_ms = clock()
    events = [as_received(event, applied_ms) for event in events]
    order = sorted(
        range(len(events)),
        key=lambda i: (not isinstance(events[i], ProductEvent), events[i].sku),
    )
    errors: tuple[type[Exception], ...] = (*store.errors.row, *_EVENT_ERRORS)

    def batch(conn: Connection, guarded: bool) -> BatchReport:
        results: list[EventResult | None] = [None] * len(events)
        changed_skus: set[str] = set()
        restated_skus: set[str] = set()

        def known(index: int) -> bool:
            """A series event's product exists (or came first in this batch)."""
            event = events[index]
            if isinstance(event, ProductEvent) or store.has_sku(event.sku):
                return True
            message = f"unknown sku {event.sku!r}: send its product event first"
            error = EventError(index, "sku", message, event.event_id)
            results[index] = EventResult(event.event_id, Outcome.REJECTED, error=error)
            return False

        def applied(index: int, changed: bool) -> None:
            event = events[index]
            results[index] = EventResult(event.event_id, Outcome.APPLIED, changed)
            if changed:
                changed_skus.add(event.sku)
                if not isinstance(event, COUNTS):
                    restated_skus.add(event.sku)

        if not guarded:  # claims, then effects: two round trips a group on PostgreSQL
            products = [i for i in order if isinstance(events[i], ProductEvent)]
            series = [i for i in order if not isinstance(events[i], ProductEvent)]
            for group in (products, series):
                live = [index for index in group if known(index)]
                try:
                    claims = [(events[i].event_id, events[i].source) for i in live]
                    claimed = store.claim_events(conn, claims, applied_ms)
                    new = [i for i, fresh in zip(live, claimed, strict=True) if fresh]
                    changed = store.apply_records(conn, [events[i] for i in new])
                except errors as exc:
                    raise RowRefusedError from exc
                for index, fresh in zip(live, claimed, strict=True):
                    if not fresh:
                        results[index] = EventResult(events[index].event_id, Outcome.DUPLICATE)
                for index, moved in zip(new, changed, strict=True):
                    applied(index, moved)
            return BatchReport([r for r in results if r is not None], changed_skus, restated_skus)

        for index in order:
            event = events[index]
            if not known(index):
                continue
            try:
                with store.savepoint():
                    if not store.claim_event(conn, event.event_id, event.source, applied_ms):
                        results[index] = EventResult(event.event_id, Outcome.DUPLICATE)
                        continue
                    changed_one = store.apply_one(conn, event)
            except errors as exc:
                if not conn.in_transaction:  # the database gave up the whole transaction
                    raise
                error = EventError(index, "(event)", f"not stored: {exc}", event.event_id)
                results[index] = EventResult(event.event_id, Outcome.REJECTED, error=error)
                continue
            applied(index, changed_one)
        return BatchReport([r for r in results if r is not None], changed_skus, restated_skus)

    return write_batch(store, batch)


def apply_import_batch(store: MarketStore, records: Sequence[Record]) -> ImportBatchReport:
    """Write an import's batch of records in one transaction. They carry no event id, so
    none is claimed: each is an upsert, and importing the same lines again changes
    nothing. Raises only when the whole batch failed, as `apply_events` does; the caller
    has checked that each series record's product exists or comes earlier in the batch."""
    errors: tuple[type[Exception], ...] = (*store.errors.row, *_EVENT_ERRORS)

    def batch(conn: Connection, guarded: bool) -> ImportBatchReport:
        """This batch's report alone, so a run again after a deadlock counts once."""
        report = ImportBatchReport([False] * len(records))
        if not guarded:  # one pipelined round trip for the batch on PostgreSQL
            try:
                changed = store.apply_records(conn, records)
            except errors as exc:
                raise RowRefusedError from exc
            for index, moved in enumerate(changed):
                _count_change(report, records[index], index, moved)
            return report
        for index, record in enumerate(records):
            try:
                with store.savepoint():
                    moved = store.apply_one(conn, record)
            except errors as exc:
                if not conn.in_transaction:  # the database gave up the whole transaction
                    raise
                report.refused[index] = f"not stored: {exc}"
                continue
            _count_change(report, record, index, moved)
        return report

    return write_batch(store, batch)


def _count_change(report: ImportBatchReport, record: Record, index: int, moved: bool) -> None:
    report.changed[index] = moved
    if moved:
        report.changed_skus.add(record.sku)
        if not isinstance(record, COUNTS):
            report.restated_skus.add(record.sku)


class RowRefusedError(Exception):
    """A row the database refused in a batch run without savepoints: the batch runs again
    with one savepoint per row, so that row alone fails."""


def write_batch(store: MarketStore, work: Callable[[Connection, bool], T]) -> T:
    """The one way a batch is written (events, and an import's lines):
    `work(conn, False)` in one transaction, without savepoints; when it raises
    `RowRefusedError`, `work(conn, True)` in a new one, each row under its own savepoint."""
    try:
        return store.write(lambda conn: work(conn, False))
    except RowRefusedError:
        return store.write(lambda conn: work(conn, True))
