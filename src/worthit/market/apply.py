"""The one apply path: every event, whatever brought it, reaches the store through here.

A batch is one transaction, so a thousand events pay one commit. Each event runs under its
own savepoint: its id is claimed in `applied_events` and its record upserted, or neither,
so one bad event costs only itself and a redelivered one finds its id and changes nothing.
The revision bump is a trigger on the same rows (migrations.py), so the facts version
moves in the same commit as the data it describes.

Arrival order does not matter. Series rows are keyed by their own time (a price by sku
and `ts`), and the current price is the one with the latest `ts`, so a late older price
joins the history without displacing a newer one. Product events are applied first
within a batch, so a batch may carry a new product and its prices in any order; a
series event for a product the store has never seen is rejected (field `sku`), and its
retry lands once the product has. Two events with the same key but different values
(a correction) are the one case where order counts: the later-applied one wins.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from worthit.market.events import Event, EventError, ProductEvent, SalesEvent, StockEvent
from worthit.market.store import MarketStore, UnknownSkuError
from worthit.market.timeutil import Clock, now_ms

_EVENT_ERRORS = (
    sqlite3.IntegrityError,
    sqlite3.DataError,
    sqlite3.InterfaceError,
    OverflowError,
    RecursionError,
    ValueError,
)
"""What one event can cause; a full disk or a lock (OperationalError) fails the batch."""


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


COUNTS = (StockEvent, SalesEvent)
"""Readings a live feed sends all the time (the demo's heartbeat) that move no price,
rating or promotion, so they are no reason to rewrite a product's explanations."""


def apply_events(store: MarketStore, events: Sequence[Event], clock: Clock = now_ms) -> BatchReport:
    """Apply `events` in one transaction; raises only when the whole batch failed
    (sqlite3.OperationalError: the database is locked, full or gone), and then none of
    it is applied."""
    results: list[EventResult | None] = [None] * len(events)
    changed_skus: set[str] = set()
    restated_skus: set[str] = set()
    applied_ms = clock()
    products_first = sorted(
        range(len(events)), key=lambda i: not isinstance(events[i], ProductEvent)
    )
    with store.transaction() as conn:
        for index in products_first:
            event = events[index]
            try:
                with store.savepoint():
                    if not store.claim_event(conn, event.event_id, event.source, applied_ms):
                        results[index] = EventResult(event.event_id, Outcome.DUPLICATE)
                        continue
                    changed = store.apply_one(conn, event)
            except _EVENT_ERRORS as exc:
                if not conn.in_transaction:  # SQLite gave up the whole transaction
                    raise
                where = "sku" if isinstance(exc, UnknownSkuError) else "(event)"
                message = (
                    f"unknown sku {event.sku!r}: send its product event first"
                    if where == "sku"
                    else f"not stored: {exc}"
                )
                error = EventError(index, where, message, event.event_id)
                results[index] = EventResult(event.event_id, Outcome.REJECTED, error=error)
                continue
            results[index] = EventResult(event.event_id, Outcome.APPLIED, changed)
            if changed:
                changed_skus.add(event.sku)
                if not isinstance(event, COUNTS):
                    restated_skus.add(event.sku)
    return BatchReport([r for r in results if r is not None], changed_skus, restated_skus)
