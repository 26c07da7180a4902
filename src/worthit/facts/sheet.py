"""The fact sheet: everything worthit knows about one product at one moment.

It is the only input to the verdict and to the explanation's facts block, so it is
plain data: numbers already rounded the way they will be shown, a version that
changes whenever any input changes, and the age of its newest input.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class WindowStats:
    days: int
    observations: int
    min: float | None
    avg: float | None
    median: float | None


@dataclass(frozen=True, slots=True)
class RatingFacts:
    count: int
    mean: float | None
    bayesian: float | None
    prior_mean: float
    prior_weight: int
    recent_count: int
    recent_mean: float | None
    earlier_mean: float | None
    trend: float | None
    """recent_mean - earlier_mean; negative when quality is slipping."""


@dataclass(frozen=True, slots=True)
class PromotionFact:
    name: str
    starts: str
    ends: str
    price: float
    days_until_start: float


@dataclass(frozen=True, slots=True)
class FactSheet:
    sku: str
    title: str
    brand: str
    category: str
    currency: str
    as_of: str
    current_price: float | None
    current_price_at: str | None
    list_price: float | None
    windows: tuple[WindowStats, ...]
    all_time_low: float | None
    all_time_low_at: str | None
    all_time_high: float | None
    percentile_90d: float | None
    trend_30d_pct: float | None
    volatility_90d_pct: float | None
    first_seen: str | None
    days_tracked: int
    observations: int
    rating: RatingFacts
    stock: int | None
    stock_at: str | None
    active_promotions: tuple[PromotionFact, ...]
    upcoming_promotions: tuple[PromotionFact, ...]
    sales_3d: int
    revision: int
    version: str
    data_age_ms: int
    extra: dict[str, Any] = field(default_factory=dict)

    def window(self, days: int) -> WindowStats | None:
        for stats in self.windows:
            if stats.days == days:
                return stats
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
