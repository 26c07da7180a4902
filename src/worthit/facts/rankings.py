"""Category rankings over a time window (top sellers, top rated), cached briefly.

A ranking aggregates thousands of rows, and many shoppers ask the same "top 3 X in the
last 3 days"; holding each answer for a few seconds keeps that off the request path
while staying fresher than the data feed itself.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Literal

from worthit.facts.builder import PRIOR_WEIGHT, FactsBuilder
from worthit.facts.stats import bayesian_average
from worthit.text.time import DAY_MS, from_ms

Metric = Literal["sales", "rating"]
MAX_CACHED = 256
"""Rankings kept at most, before the expired ones are dropped."""
MIN_WINDOW_REVIEWS = 3
"""A product needs this many reviews inside the window to be ranked by rating."""


@dataclass(frozen=True, slots=True)
class RankedItem:
    rank: int
    sku: str
    title: str
    metric: str
    value: float
    count: int


class Rankings:
    def __init__(self, builder: FactsBuilder, max_age_s: float = 10.0) -> None:
        self.builder = builder
        self.max_age_s = max_age_s
        self._cache: dict[
            tuple[str | None, str, int, int, float | None], tuple[float, list[RankedItem]]
        ] = {}
        self._lock = threading.Lock()

    def top(
        self,
        category: str | None,
        metric: Metric,
        days: int,
        n: int,
        at_ms: int | None = None,
        max_price: float | None = None,
    ) -> list[RankedItem]:
        """The ranking now (cached), or as of `at_ms` (computed afresh); with `max_price`,
        only products whose price at that moment is at most that."""
        if at_ms is not None:
            return self._ranked(category, metric, days, n, at_ms, max_price)
        key = (category, metric, days, n, max_price)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and now - cached[0] < self.max_age_s:
            return cached[1]
        items = self._ranked(category, metric, days, n, self.builder.clock(), max_price)
        with self._lock:
            if len(self._cache) >= MAX_CACHED:  # budgets make keys unbounded: drop the stale
                self._cache = {k: v for k, v in self._cache.items() if now - v[0] < self.max_age_s}
            self._cache[key] = (now, items)
        return items

    def _ranked(
        self,
        category: str | None,
        metric: Metric,
        days: int,
        n: int,
        at: int,
        max_price: float | None,
    ) -> list[RankedItem]:
        if max_price is None:
            return self._compute(category, metric, days, n, at)
        whole = self._compute(category, metric, days, None, at)  # filter first, then cut
        return self._within(whole, max_price, n, at)

    def _within(
        self, items: list[RankedItem], max_price: float, n: int, at: int
    ) -> list[RankedItem]:
        """The first n items priced at most `max_price` at `at`, ranked again from 1.

        Prices are read in growing slices from the top, so a budget most best sellers
        fit reads a few prices, not one per product in the category.
        """
        kept: list[RankedItem] = []
        start, size = 0, max(4 * n, 8)
        while len(kept) < n and start < len(items):
            part = items[start : start + size]
            prices = self.builder.store.current_prices([item.sku for item in part], at)
            kept += [item for item in part if prices.get(item.sku, math.inf) <= max_price]
            start, size = start + size, size * 2
        return [replace(item, rank=i + 1) for i, item in enumerate(kept[:n])]

    def _compute(
        self, category: str | None, metric: Metric, days: int, n: int | None, at: int
    ) -> list[RankedItem]:
        """The top n, or the whole ranking when n is None."""
        if metric == "rating":
            return self._top_rated(category, days, n, at)
        return self._top_selling(category, days, n, at)

    def _top_selling(
        self, category: str | None, days: int, n: int | None, at: int
    ) -> list[RankedItem]:
        today = from_ms(at).date()
        since = (today - timedelta(days=days - 1)).isoformat()
        limit = -1 if n is None else n  # SQLite: LIMIT -1 is no limit
        rows = self.builder.store.top_by_sales(category, since, today.isoformat(), limit)
        titles = self.builder.store.titles([sku for sku, _ in rows])
        return [
            RankedItem(i + 1, sku, titles.get(sku, sku), "sales", float(units), units)
            for i, (sku, units) in enumerate(rows)
            if units > 0
        ]

    def _top_rated(
        self, category: str | None, days: int, n: int | None, at: int
    ) -> list[RankedItem]:
        rows = self.builder.store.ratings_in_window(category, at - days * DAY_MS, at)
        prior = self.builder.category_prior(category or "")
        scored = sorted(
            (
                (round(bayesian_average(total, count, prior, PRIOR_WEIGHT), 2), count, sku)
                for sku, count, total in rows
                if count >= MIN_WINDOW_REVIEWS
            ),
            key=lambda row: (-row[0], -row[1], row[2]),
        )[:n]
        titles = self.builder.store.titles([sku for _, _, sku in scored])
        return [
            RankedItem(i + 1, sku, titles.get(sku, sku), "rating", value, count)
            for i, (value, count, sku) in enumerate(scored)
        ]
