"""What the forecaster knows about a product on a day: features from its own price history,
its category's and its shop's, each computed from data up to that day only.

A store's history is laid on one day axis (day 0 = the market's first price): each product
gets the price one unit cost at the end of each day (`effective_price_at`, the price the
backtest pays), NaN before its first price. Features for day i read only indices ≤ i;
the labels (did the price fall ≥ `drop` within `horizon` days, and how low did it go) read
i + 1 … i + horizon, which is why a row is only trained on once its label window has
closed (`forecast.RollingOrigins`).

The shop's own sale calendar is learned, not given: the share of its products whose price
fell on each day of the past, read back a year later ("the same 30 days last year, 40 %
of this shop's prices dropped"), beside the share falling this past week (a sale in
progress) and the category's.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from worthit.decide.as_of import end_of_day_ms
from worthit.decide.forecast_advice import DEAL_SHARE
from worthit.facts.builder import ProductHistory, effective_price_at

Array = NDArray[np.float64]

FEATURES: tuple[str, ...] = (
    "r_min30", "r_min90", "r_min_all", "r_avg30", "r_avg90", "r_max90", "r_list", "r_week",
    "days_since_change", "days_since_drop", "drops_seen", "mean_drop_depth",
    "mean_drop_interval", "cycle_phase", "age_days", "own_rate", "comparable_rate",
    "comparable_n", "shop_week", "shop_last_year", "category_month", "stock", "weekday",
    "doy_sin", "doy_cos", "sale_share", "days_off_high",
)  # fmt: skip
"""The columns of `ProductFeatures.x`, in order."""

DEAL_WINDOW = 90
"""A deal: a price at or below `DEAL_SHARE` × its 90-day average (Keepa's deltaPercent
against the 90-day average). The shopper who waits buys at the first one."""
COMPARABLE_SPACING = 7
"""Comparable moments are at least a week apart, so one long sale is not counted daily."""
COMPARABLE_KEPT = 10
"""How many of the latest comparable moments a product remembers per state."""


@dataclass(frozen=True)
class Calendar:
    """The market's day axis."""

    first: date
    days: int

    def day(self, i: int) -> date:
        return self.first + timedelta(days=i)

    def index(self, day: date) -> int:
        return (day - self.first).days


@dataclass
class ProductSeries:
    """One product on the market's day axis."""

    sku: str
    category: str
    price: Array
    """End-of-day effective price; NaN where the product had no price yet."""
    list_price: Array
    """The seller's "was" price that day, NaN when none (a feature, never trusted as a price)."""
    stock: Array
    """End-of-day quantity, NaN when unknown."""


def product_series(history: ProductHistory, calendar: Calendar) -> ProductSeries:
    """The daily series of one product, read from its history in memory."""
    n = calendar.days
    price = np.full(n, np.nan)
    list_price = np.full(n, np.nan)
    stock = np.full(n, np.nan)
    for i in range(n):
        at = end_of_day_ms(calendar.day(i))
        value = effective_price_at(history, at)
        if value is None or value <= 0:
            continue
        price[i] = value
        point = history.price_at(at)
        if point is not None and point.list_price:
            list_price[i] = point.list_price
        level = history.stock_at(at)
        if level is not None:
            stock[i] = level.quantity
    product = history.product
    return ProductSeries(product.sku, product.category, price, list_price, stock)


def drop_starts(price: Array, drop: float) -> Array:
    """1 where the price fell by at least `drop` (a share) from the day before, else 0;
    NaN where either day has no price."""
    out = np.full(price.shape, np.nan)
    prev, cur = price[:-1], price[1:]
    known = ~np.isnan(prev) & ~np.isnan(cur)
    out[1:][known] = (cur[known] <= prev[known] * (1 - drop)).astype(float)
    return out


def trailing_average(price: Array, window: int = DEAL_WINDOW) -> Array:
    """The mean of each day's known prices over the `window` days ending on it (NaN when none)."""
    padded = np.concatenate([np.full(window - 1, np.nan), price])
    windows = sliding_window_view(padded, window)
    known = ~np.isnan(windows)
    counts = known.sum(axis=1)
    sums = np.where(known, windows, 0.0).sum(axis=1)
    return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def deals(price: Array) -> NDArray[np.bool_]:
    """Whether each day's price is a deal: at or below `DEAL_SHARE` × its 90-day average."""
    with np.errstate(invalid="ignore"):
        return np.asarray(price <= DEAL_SHARE * trailing_average(price))


def labels(price: Array, horizon: int, drop: float) -> tuple[Array, Array, Array]:
    """For each day i, from the prices of (i, i + horizon]:

    - fell: 1 when the price fell ≥ `drop` below day i's, else 0;
    - low: min(price[i … i + horizon]) / price[i];
    - follow: what a shopper who waits pays, over price[i]: the price of the first later
      day that is a deal (`deals`), or of day i + horizon (the last price seen) when none
      is before it. That is the shopper the policy sends away: it is the value of waiting.

    NaN where the window passes the data's end or day i has no price.
    """
    n = len(price)
    deal = deals(price)
    fell = np.full(n, np.nan)
    low = np.full(n, np.nan)
    follow = np.full(n, np.nan)
    for i in range(max(0, n - horizon)):
        now = price[i]
        if np.isnan(now):
            continue
        ahead = price[i + 1 : i + horizon + 1]
        known = ~np.isnan(ahead)
        if not known.any():
            continue
        seen = ahead[known]
        hits = np.flatnonzero(known & (ahead <= now * (1 - drop)))
        fell[i] = float(len(hits) > 0)
        low[i] = min(float(seen.min()), now) / now
        bought = np.flatnonzero(known[:-1] & deal[i + 1 : i + horizon])
        paid = ahead[bought[0]] if len(bought) else seen[-1]
        follow[i] = paid / now
    return fell, low, follow


@dataclass(frozen=True)
class ShopSignals:
    """Shop-wide and per-category drop shares by day, from every product's drop starts."""

    share: Array
    """Share of priced products whose price fell that day (NaN when none was priced)."""
    by_category: dict[str, Array]


def shop_signals(series: Sequence[ProductSeries], drop: float, days: int) -> ShopSignals:
    def share(members: Sequence[ProductSeries]) -> Array:
        falls = np.zeros(days)
        priced = np.zeros(days)
        for s in members:
            starts = drop_starts(s.price, drop)
            known = ~np.isnan(starts)
            falls[known] += starts[known]
            priced[known] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(priced > 0, falls / np.maximum(priced, 1), np.nan)

    categories: dict[str, list[ProductSeries]] = {}
    for s in series:
        categories.setdefault(s.category, []).append(s)
    return ShopSignals(share(series), {k: share(v) for k, v in categories.items()})


def _trailing_mean(values: Array, i: int, start: int, end: int) -> float:
    """Mean of values[i − start … i − end] (inclusive, both ≥ 0 back from i), NaN-aware."""
    lo, hi = max(0, i - start), i - end + 1
    if hi <= lo:
        return np.nan
    window = values[lo:hi]
    window = window[~np.isnan(window)]
    return float(window.mean()) if len(window) else np.nan


@dataclass(frozen=True)
class ProductFeatures:
    """Features and labels of one product, one row per day of the market."""

    sku: str
    price: Array
    x: NDArray[np.float64]
    """days × len(FEATURES)."""
    fell: Array
    low: Array
    follow: Array
    comparable: NDArray[np.int64]
    """days × 2: (moments, of which the price fell) for the state of each day."""


def product_features(
    s: ProductSeries,
    shop: ShopSignals,
    calendar: Calendar,
    horizon: int,
    drop: float,
) -> ProductFeatures:
    """Every day's features for one product, each from data up to that day."""
    price = s.price
    n = len(price)
    fell, low, follow = labels(price, horizon, drop)
    starts = drop_starts(price, drop)
    category = shop.by_category.get(s.category, shop.share)
    x = np.full((n, len(FEATURES)), np.nan)
    comparable = np.zeros((n, 2), dtype=np.int64)
    first = int(np.argmax(~np.isnan(price))) if np.any(~np.isnan(price)) else n
    low_all = np.inf
    last_change = last_drop = -1
    drop_days: list[int] = []
    depths: list[float] = []
    own_k = own_n = 0
    remembered: dict[int, deque[tuple[int, float]]] = {
        k: deque(maxlen=COMPARABLE_KEPT) for k in range(3)
    }
    states = np.full(n, -1, dtype=np.int64)
    below_high = 0
    last_high = first
    for i in range(first, n):
        p = price[i]
        j = i - horizon  # the newest day whose label has matured by day i
        if j >= first and not np.isnan(fell[j]):
            own_n += 1
            own_k += int(fell[j])
            memory = remembered.get(int(states[j]))
            if memory is not None and (not memory or j - memory[-1][0] >= COMPARABLE_SPACING):
                memory.append((j, float(fell[j])))
        if np.isnan(p):
            continue
        if i > first and not np.isnan(price[i - 1]) and price[i - 1] != p:
            last_change = i
        if starts[i] == 1.0:
            drop_days.append(i)
            depths.append(1 - p / price[i - 1])
            last_drop = i
        low_all = min(low_all, p)
        w30 = price[max(0, i - 29) : i + 1]
        w90 = price[max(0, i - 89) : i + 1]
        min30, min90 = np.nanmin(w30), np.nanmin(w90)
        max30, max90 = np.nanmax(w30), np.nanmax(w90)
        state = 0 if p <= 1.02 * min90 else (2 if p >= 0.98 * max30 else 1)
        if p <= (1 - drop) * max90:
            below_high += 1
        else:
            last_high = i
        states[i] = state
        memory = remembered[state]
        k = sum(int(v) for _, v in memory)
        comparable[i] = (len(memory), k)
        week = price[i - 7] if i >= 7 else np.nan
        intervals = np.diff(drop_days) if len(drop_days) > 1 else np.array([])
        mean_interval = float(intervals.mean()) if len(intervals) else np.nan
        since_drop = i - last_drop if last_drop >= 0 else i - first + 365
        day = calendar.day(i)
        doy = 2 * np.pi * day.timetuple().tm_yday / 365.25
        x[i] = (
            p / min30, p / min90, p / low_all, p / np.nanmean(w30), p / np.nanmean(w90),
            p / max90,
            p / s.list_price[i] if not np.isnan(s.list_price[i]) else 1.0,
            p / week if not np.isnan(week) else 1.0,
            i - last_change if last_change >= 0 else i - first,
            since_drop,
            len(drop_days),
            float(np.mean(depths)) if depths else 0.0,
            mean_interval,
            since_drop / mean_interval if mean_interval == mean_interval else np.nan,
            i - first,
            (own_k + 1) / (own_n + 2),
            (k + 1) / (len(memory) + 2),
            len(memory),
            _trailing_mean(shop.share, i, 6, 0),
            _trailing_mean(shop.share, i, 365 - 1, 365 - horizon) if i >= 365 else np.nan,
            _trailing_mean(category, i, 29, 0),
            np.log1p(s.stock[i]) if not np.isnan(s.stock[i]) else np.nan,
            day.weekday(),
            np.sin(doy),
            np.cos(doy),
            below_high / (i - first + 1),
            i - last_high,
        )  # fmt: skip
    return ProductFeatures(s.sku, price, x, fell, low, follow, comparable)
