"""Builds a product's fact sheet from the store, as of a moment."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta

from worthit.facts.sheet import FactSheet, PromotionFact, RatingFacts, WindowStats
from worthit.facts.stats import (
    bayesian_average,
    median,
    percentile_rank,
    trend_pct,
    volatility_pct,
)
from worthit.market.entities import PricePoint, Product, Promotion
from worthit.market.store import MarketStore
from worthit.market.timeutil import DAY_MS, Clock, day_iso, from_ms, iso, now_ms

WINDOWS = (30, 90, 180)
RECENT_RATING_DAYS = 30
PRIOR_WEIGHT = 10
"""Reviews' worth of category prior in the Bayesian average (IMDb-style constant)."""
DEFAULT_PRIOR_MEAN = 3.8
PRIOR_TTL_S = 300.0


class FactsBuilder:
    """Computes fact sheets; holds the category priors, which change slowly.

    `clock` is what "now" means for a sheet built without an explicit moment.
    """

    def __init__(self, store: MarketStore, clock: Clock = now_ms) -> None:
        self.store = store
        self.clock = clock
        self._priors: dict[str, tuple[float, float]] = {}
        self._lock = threading.Lock()

    def build(self, sku: str, at_ms: int | None = None) -> FactSheet | None:
        product = self.store.product(sku)
        if product is None:
            return None
        as_of = self.clock() if at_ms is None else at_ms
        prices = self.store.prices(sku, until_ms=as_of)
        return self._sheet(product, prices, as_of)

    def category_prior(self, category: str) -> float:
        now = time.monotonic()
        with self._lock:
            cached = self._priors.get(category)
        if cached is not None and now - cached[1] < PRIOR_TTL_S:
            return cached[0]
        count, mean = self.store.category_stats(category)
        prior = round(mean, 2) if count >= PRIOR_WEIGHT else DEFAULT_PRIOR_MEAN
        with self._lock:
            self._priors[category] = (prior, now)
        return prior

    def _sheet(self, product: Product, prices: list[PricePoint], as_of: int) -> FactSheet:
        current = prices[-1] if prices else None
        windows = tuple(_window(prices, as_of, days) for days in WINDOWS)
        low, low_at, high = _extremes(prices)
        last90 = [p.price for p in prices if p.ts_ms >= as_of - 90 * DAY_MS]
        last30 = [p for p in prices if p.ts_ms >= as_of - 30 * DAY_MS]
        trend = trend_pct([p.ts_ms for p in last30], [p.price for p in last30], 30)
        volatility = volatility_pct(last90)
        stock = self.store.latest_stock(product.sku, until_ms=as_of)
        active, upcoming = _promotions(self.store.promotions(product.sku, as_of), as_of)
        rating, newest_review = self._rating(product, as_of)
        newest = max(current.ts_ms if current else 0, stock.ts_ms if stock else 0, newest_review)
        content = {
            "sku": product.sku,
            "title": product.title,
            "brand": product.brand,
            "category": product.category,
            "currency": current.currency if current else "USD",
            "current_price": _money(current.price) if current else None,
            "current_price_at": iso(current.ts_ms) if current else None,
            "list_price": _money(current.list_price) if current and current.list_price else None,
            "windows": windows,
            "all_time_low": _money(low) if low is not None else None,
            "all_time_low_at": low_at,
            "all_time_high": _money(high) if high is not None else None,
            "percentile_90d": (
                round(percentile_rank(last90, current.price), 1) if current and last90 else None
            ),
            "trend_30d_pct": _pct(trend),
            "volatility_90d_pct": _pct(volatility),
            "first_seen": iso(prices[0].ts_ms) if prices else None,
            "days_tracked": (as_of - prices[0].ts_ms) // DAY_MS if prices else 0,
            "observations": len(prices),
            "rating": rating,
            "stock": stock.quantity if stock else None,
            "stock_at": iso(stock.ts_ms) if stock else None,
            "active_promotions": active,
            "upcoming_promotions": upcoming,
            "sales_3d": self._sales(product.sku, as_of, 3),
            "revision": product.revision,
        }
        version = _version(content)
        return FactSheet(
            **content,  # type: ignore[arg-type]
            as_of=iso(as_of),
            version=version,
            data_age_ms=as_of - newest if newest else -1,
        )

    def _rating(self, product: Product, as_of: int) -> tuple[RatingFacts, int]:
        """The rating facts, and when the newest review visible at `as_of` was written."""
        split = as_of - RECENT_RATING_DAYS * DAY_MS
        earlier_n, earlier_sum, recent_n, recent_sum, newest = self.store.rating_split(
            product.sku, split, as_of
        )
        count = earlier_n + recent_n
        total = earlier_sum + recent_sum
        prior = self.category_prior(product.category)
        recent = recent_sum / recent_n if recent_n else None
        earlier = earlier_sum / earlier_n if earlier_n else None
        facts = RatingFacts(
            count=count,
            mean=round(total / count, 2) if count else None,
            bayesian=round(bayesian_average(total, count, prior, PRIOR_WEIGHT), 2),
            prior_mean=prior,
            prior_weight=PRIOR_WEIGHT,
            recent_count=recent_n,
            recent_mean=round(recent, 2) if recent is not None else None,
            earlier_mean=round(earlier, 2) if earlier is not None else None,
            trend=round(recent - earlier, 2)
            if recent is not None and earlier is not None
            else None,
        )
        return facts, newest

    def _sales(self, sku: str, as_of: int, days: int) -> int:
        today = from_ms(as_of).date()
        since = (today - timedelta(days=days - 1)).isoformat()
        return sum(day.units for day in self.store.sales(sku, since, today.isoformat()))


def _window(prices: list[PricePoint], as_of: int, days: int) -> WindowStats:
    values = [p.price for p in prices if p.ts_ms >= as_of - days * DAY_MS]
    if not values:
        return WindowStats(days=days, observations=0, min=None, avg=None, median=None)
    return WindowStats(
        days=days,
        observations=len(values),
        min=_money(min(values)),
        avg=_money(sum(values) / len(values)),
        median=_money(median(values)),
    )


def _extremes(prices: list[PricePoint]) -> tuple[float | None, str | None, float | None]:
    """All-time low with the latest day it was seen: a recent low is the one a shopper can hit."""
    if not prices:
        return None, None, None
    low = min(p.price for p in prices)
    low_at = max(p.ts_ms for p in prices if p.price == low)
    return low, day_iso(low_at), max(p.price for p in prices)


def _promotions(
    promotions: list[Promotion], as_of: int
) -> tuple[tuple[PromotionFact, ...], tuple[PromotionFact, ...]]:
    active: list[PromotionFact] = []
    upcoming: list[PromotionFact] = []
    for promo in promotions:
        fact = PromotionFact(
            name=promo.name,
            starts=iso(promo.starts_ms),
            ends=iso(promo.ends_ms),
            price=_money(promo.price),
            days_until_start=round(max(0, promo.starts_ms - as_of) / DAY_MS, 1),
        )
        (active if promo.starts_ms <= as_of else upcoming).append(fact)
    return tuple(active), tuple(upcoming)


def _money(value: float) -> float:
    return round(value, 2)


def _pct(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def _version(content: Mapping[str, object]) -> str:
    """Hash of the sheet's content and the product revision.

    The revision moves on every input; the content moves when windows roll forward.
    Together they change whenever anything the sheet says could change.
    """
    encoded = json.dumps(content, default=_encode, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(encoded.encode()).hexdigest()[:16]


def _encode(value: object) -> object:
    slots = getattr(type(value), "__slots__", None)
    if slots:
        return {name: getattr(value, name) for name in slots}
    raise TypeError(f"cannot encode {type(value).__name__}")


def aged(sheet: FactSheet, elapsed_ms: int) -> FactSheet:
    """The same sheet read `elapsed_ms` after it was built: its data is that much older."""
    if sheet.data_age_ms < 0:
        return sheet
    return replace(sheet, data_age_ms=sheet.data_age_ms + elapsed_ms)
