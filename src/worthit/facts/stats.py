"""Price and rating statistics the fact sheet is made of; pure functions, no store."""

from __future__ import annotations

import math
from collections.abc import Sequence


def percentile_rank(values: Sequence[float], value: float) -> float:
    """Mid-rank percentile: ties count half, so a flat history puts any price at 50."""
    if not values:
        raise ValueError("percentile of an empty series")
    below = sum(1 for v in values if v < value)
    equal = sum(1 for v in values if v == value)
    return 100.0 * (below + 0.5 * equal) / len(values)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2


def trend_pct(times_ms: Sequence[int], prices: Sequence[float], span_days: float) -> float | None:
    """Least-squares slope over the span, as a percentage of the mean price.

    A slope rather than first-vs-last so one outlier day cannot flip the sign.
    """
    n = len(prices)
    if n < 3:
        return None
    xs = [t / 86_400_000 for t in times_ms]
    mean_x = sum(xs) / n
    mean_y = sum(prices) / n
    var_x = sum((x - mean_x) ** 2 for x in xs)
    if var_x == 0 or mean_y == 0:
        return None
    slope = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, prices, strict=True)) / var_x
    return 100.0 * slope * span_days / mean_y


def volatility_pct(prices: Sequence[float]) -> float | None:
    """Coefficient of variation: how much the price usually moves, scale-free."""
    n = len(prices)
    if n < 2:
        return None
    mean = sum(prices) / n
    if mean == 0:
        return None
    var = sum((p - mean) ** 2 for p in prices) / (n - 1)
    return 100.0 * math.sqrt(var) / mean


def bayesian_average(total: float, count: int, prior_mean: float, prior_weight: int) -> float:
    """Shrink a product's mean rating towards its category's: few reviews prove little."""
    return (prior_mean * prior_weight + total) / (prior_weight + count)
