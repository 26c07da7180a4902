"""The fact sheet: everything worthit knows about one product at one moment.

It is the only input to the verdict and to the explanation's facts block, so it is
plain data: numbers already rounded the way they will be shown, a version that
changes whenever any input changes, and the age of its newest input.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
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
    """An offer as it prices one unit: `price` is what one shopper pays for one unit under
    it, so every reader can compare offers of any kind without knowing the kinds.

    For kind `price` that is the promotional price. The other kinds are applied to
    `base_price`, today's price (for an upcoming offer: today's price, as the best guess
    of the price it will apply to). A threshold or a minimum spend counts per order, so
    one unit below it gets nothing off: `applies` is then False and `price` is the base.
    """

    name: str
    starts: str
    ends: str
    price: float
    days_until_start: int
    """Calendar days (UTC) from today to the day it starts, as `sale_calendar` counts a
    sale's: the reason quotes them ("starts in 15 days") and so the stored explanation's
    key holds them; a fraction of a day rounded would change them at whatever hour it
    crossed .5, and every stored text about that offer with them."""
    kind: str = "price"
    base_price: float | None = None
    percent_off: float | None = None
    threshold: float | None = None
    save: float | None = None
    min_spend: float | None = None
    applies: bool = True


@dataclass(frozen=True, slots=True)
class DiscountClaim:
    """A claimed price reduction, with the prior price EU Omnibus Art. 6a measures it by.

    The claim is the running promotion, else the soonest announced one, else the seller's
    list price beside today's price (a reduction claimed today). `reference` is what the
    shopper is told the price was: the list price when the seller gives one, else the
    last price recorded before the reduction started.
    """

    source: str
    """"promotion" or "list_price"."""
    name: str | None
    reference: float
    price: float
    started: str
    prior_low: float | None
    """The lowest price recorded in the 30 days before `started` (and by the sheet's moment)."""
    prior_observations: int
    raised_pct: float | None
    """How far the median of the 14 days before the reduction (or before now, when it is
    still to come) sat above the median of the 30 days before those: a pre-sale hike."""
    raised_from: float | None
    """That earlier median: the price before the raise."""


@dataclass(frozen=True, slots=True)
class CategoryOccurrence:
    """A past occurrence of a calendar event across a category: the median of what it did
    to each of the category's products measured there (% below its 30 days before)."""

    key: str
    name_en: str
    name_zh: str
    year: int
    discount_pct: float
    products: int


@dataclass(frozen=True, slots=True)
class EventFact:
    """A calendar sale event coming within the horizon, and what it did to this product's
    price at its past occurrences (newest first): % below the median of the 30 days before."""

    key: str
    name_en: str
    name_zh: str
    starts: str
    days_until: int
    past_discounts_pct: tuple[float, ...]
    past_years: tuple[int, ...]
    category_past: tuple[CategoryOccurrence, ...] = ()
    """Only when this product has no past occurrence: its category's typical discount at
    the past occurrences of this event, else, when the category has none either, at those
    of the calendar's other events (newest first)."""


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
    price_age_days: int | None
    """Whole days from the last price observation to the sheet's moment; None without a
    price. On an as-of sheet, as of its moment: the age a shopper asking then would see."""
    price_stale: bool
    """The last price is older than the builder's `stale_price_days`: the feed stopped or
    fell behind, so today's price is unknown. The price rules are off (INSUFFICIENT_DATA,
    `stale_price`), and the windows, thin or empty, describe the past, not now."""
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
    discount_claim: DiscountClaim | None = None
    coming_events: tuple[EventFact, ...] = ()
    effective_price: float | None = None
    """What one unit costs now: the lowest of today's price and the running offers' unit
    prices (offers do not stack). None without a price."""
    fed_by_events: bool = False
    """Read from a store that events keep current (a retailer's feed, the demo's live
    simulator), where old data means the feed fell behind: its `data_age_ms` is then held
    to the freshness objective (decide/rules.py). False for a store loaded once (an
    import, a test market) and for an as-of sheet, old on purpose. Set by the cache that
    read the sheet, not by the builder, so it is not part of `version`."""

    def window(self, days: int) -> WindowStats | None:
        for stats in self.windows:
            if stats.days == days:
                return stats
        return None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
