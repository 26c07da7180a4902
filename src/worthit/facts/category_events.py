"""A category's typical discount at past sale events: the evidence for a product with none.

A product listed since the last Double 11, or any product of a market younger than a
year, has no price at a past occurrence of the coming event; the other products of its
category may. Each past occurrence is measured on every product of the category with
enough prices around it (`sale_calendar.event_discount`), and the median of those
discounts is the category's typical one: the median, not the mean, because a sale most
products sit out is no reason for any one of them to wait. An occurrence counts once
MIN_PRODUCTS products were measured at it.

The evidence is the category's occurrences of the coming event itself, newest first;
when it has none (a market younger than a year), those of the calendar's other events:
"at the last big sales, the typical pair of headphones was 12 % below the month before".

An occurrence is measured from the rows of its window and of the 30 days before it, all
stamped before it ended, and is used only by sheets as of a moment after it ended, so one
measurement holds for every such moment: it is kept per (category, event, year), whatever
moment asked, for TTL_S (rows can still be backfilled).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from functools import lru_cache

from worthit.facts.sale_calendar import (
    OCCURRENCES_KEPT,
    CalendarEvent,
    event_discount,
    measured_span,
    occurrence_span,
)
from worthit.facts.sheet import CategoryOccurrence
from worthit.facts.stats import median
from worthit.market.store import MarketStore
from worthit.text.time import from_ms

MIN_PRODUCTS = 5
"""Products measured at an occurrence before their median stands for the category's."""
TTL_S = 300.0
"""As the category rating prior's (`builder.PRIOR_TTL_S`)."""


class CategoryEvents:
    """Measures and keeps categories' past event discounts; shared by threads."""

    def __init__(self, store: MarketStore, ttl_s: float = TTL_S) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self._measured: dict[tuple[str, str, int], tuple[CategoryOccurrence | None, float]] = {}
        self._skus: tuple[dict[str, list[str]], float] | None = None
        self._first: tuple[int | None, float] | None = None
        self._lock = threading.Lock()

    def past(
        self,
        category: str,
        event: CalendarEvent,
        events: Sequence[CalendarEvent],
        as_of_ms: int,
    ) -> tuple[CategoryOccurrence, ...]:
        """The category's newest measured occurrences of `event` that ended by `as_of_ms`,
        else of any of `events`; at most OCCURRENCES_KEPT, newest first."""
        first = self._first_price_ms()
        if first is None:
            return ()
        same = self._newest(category, (event,), first, as_of_ms)
        return same or self._newest(category, events, first, as_of_ms)

    def _newest(
        self,
        category: str,
        events: Sequence[CalendarEvent],
        first_ms: int,
        as_of_ms: int,
    ) -> tuple[CategoryOccurrence, ...]:
        years = (from_ms(first_ms).year, from_ms(as_of_ms).year)
        found: list[CategoryOccurrence] = []
        for end_ms, event, year in _occurrences(tuple(events), *years):
            if end_ms <= first_ms or end_ms > as_of_ms:
                continue
            occurrence = self._measure(category, event, year)
            if occurrence is not None:
                found.append(occurrence)
                if len(found) == OCCURRENCES_KEPT:
                    break
        return tuple(found)

    def _measure(self, category: str, event: CalendarEvent, year: int) -> CategoryOccurrence | None:
        key = (category, event.key, year)
        now = time.monotonic()
        with self._lock:
            cached = self._measured.get(key)
        if cached is not None and now - cached[1] < self.ttl_s:
            return cached[0]
        lo, hi = measured_span(event, year)
        discounts = []
        for sku in self._category_skus(category):
            discount = event_discount(self.store.prices(sku, lo, hi - 1), event, year)
            if discount is not None:
                discounts.append(discount)
        occurrence = None
        if len(discounts) >= MIN_PRODUCTS:
            occurrence = CategoryOccurrence(
                key=event.key,
                name_en=event.name_en,
                name_zh=event.name_zh,
                year=year,
                discount_pct=round(median(discounts), 1),
                products=len(discounts),
            )
        with self._lock:
            self._measured[key] = (occurrence, now)
        return occurrence

    def _category_skus(self, category: str) -> list[str]:
        now = time.monotonic()
        with self._lock:
            cached = self._skus
        if cached is None or now - cached[1] >= self.ttl_s:
            grouped: dict[str, list[str]] = {}
            for hit in self.store.all_names():
                grouped.setdefault(hit.category, []).append(hit.sku)
            cached = (grouped, now)
            with self._lock:
                self._skus = cached
        return cached[0].get(category, [])

    def _first_price_ms(self) -> int | None:
        now = time.monotonic()
        with self._lock:
            cached = self._first
        if cached is None or now - cached[1] >= self.ttl_s:
            span = self.store.price_span()
            cached = (None if span is None else span[0], now)
            with self._lock:
                self._first = cached
        return cached[0]


@lru_cache(maxsize=256)
def _occurrences(
    events: tuple[CalendarEvent, ...], first_year: int, last_year: int
) -> tuple[tuple[int, CalendarEvent, int], ...]:
    """(end ms, event, year) of every occurrence in those years, newest start first: asked
    for on every sheet with a coming event, so worked out once per calendar and span."""
    found = [
        (occurrence_span(event, year), event, year)
        for event in events
        for year in range(first_year, last_year + 1)
    ]
    found.sort(key=lambda c: (c[0][0], c[1].key), reverse=True)
    return tuple((span[1], event, year) for span, event, year in found)
