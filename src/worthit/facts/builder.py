"""Builds a product's fact sheet from the store, as of a moment.

A sheet as of moment T is made from the rows stamped up to T only: prices, stock levels
and reviews by their timestamps, sales by their day (a day's row is its total, so a sheet
in the middle of day T counts all of day T: the store keeps no finer sales history), the
category prior from the reviews written by T, and promotions by when they were announced
(`known_by`). The product row itself (title, brand, category) has
no history and is read as it is now; `revision` counts the store's writes, not rows, so
it, and the `version` hashed with it, are the store's when the sheet is built.

`build` reads the store for one moment (the request path); `history` reads a product's
rows once and `build_from` cuts them in memory for any moment (the backtest), its
category's ratings too (read once per category, for the prior as of each day visited). Both hand
the same inputs to the same sheet code, and tests/test_as_of.py holds them to the same
sheet as a store that never saw the later rows.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal
from functools import partial
from itertools import accumulate

from worthit.facts.category_events import CategoryEvents
from worthit.facts.sale_calendar import coming_events
from worthit.facts.sheet import (
    DiscountClaim,
    FactSheet,
    PromotionFact,
    RatingFacts,
    WindowStats,
)
from worthit.facts.stats import (
    bayesian_average,
    median,
    percentile_rank,
    trend_pct,
    volatility_pct,
)
from worthit.market.entities import PricePoint, Product, Promotion, SalesDay, StockLevel
from worthit.market.store import MarketStore
from worthit.text.time import DAY_MS, Clock, day_iso, from_ms, iso, now_ms

WINDOWS = (30, 90, 180)
RECENT_RATING_DAYS = 30
SALES_DAYS = 3
PRIOR_PRICE_DAYS = 30
"""EU Omnibus Directive Art. 6a(2): the prior price is the lowest of the 30 days before a cut."""
RAISE_DAYS = 14
"""The stretch before a reduction searched for a pre-sale hike (the demo's hikes run 7-21 days)."""
MIN_RAISE_OBSERVATIONS = 5
PRIOR_WEIGHT = 10
"""Reviews' worth of category prior in the Bayesian average (IMDb-style constant)."""
DEFAULT_PRIOR_MEAN = 3.8
PRIOR_TTL_S = 300.0
PRIORS_KEPT = 4096
"""Category priors held at most (one per category now, and one per category and moment
asked as of), before the lot is dropped and recomputed on demand."""
DEFAULT_STALE_PRICE_DAYS = 3.0
"""A price older than this is stale: the sources seen so far observe several times a day
(the simulator, the real shops' scrapers) or carry a price forward daily, so three days
without one means the feed stopped or lost the product, not a quiet market."""
PROMOTION_NOTICE_DAYS = 30
"""How far ahead a sheet lists an announced promotion, and the notice taken for one
stored before announcements were kept (`announced_ms` None): known this long before it
starts, the demo market's announcement horizon (`demo.simulator.UPCOMING_DAYS`). The
rules look 21 days ahead (`upcoming_days`), so the horizon changes no verdict, only the
upcoming promotions a sheet lists and which one a discount claim is measured on."""


@dataclass(frozen=True, slots=True)
class _Inputs:
    """Everything a sheet is computed from, already cut at its moment."""

    prices: Sequence[PricePoint]
    stock: StockLevel | None
    ratings: tuple[int, int, int, int, int]
    """(earlier count, earlier sum, recent count, recent sum, newest ts): `rating_split`."""
    promotions: Sequence[Promotion]
    """Those ending after the moment."""
    sales: int
    prior: float
    extremes: tuple[float | None, str | None, float | None] | None = None
    """(all-time low, its latest day, all-time high) when already known (`ProductHistory`)."""


class ProductHistory:
    """All of one product's rows, read once, so that its sheets at many moments are cut
    in memory instead of read from the store each time (`FactsBuilder.build_from`)."""

    def __init__(
        self,
        product: Product,
        prices: Sequence[PricePoint],
        stock: Sequence[StockLevel],
        reviews: Sequence[tuple[int, int]],
        promotions: Sequence[Promotion],
        sales: Sequence[SalesDay],
    ) -> None:
        """`reviews` are (ts, rating) in time order; the other series are in time order too."""
        self.product = product
        self.prices = tuple(prices)
        self._price_ts = [p.ts_ms for p in self.prices]
        self._extremes = list(_running_extremes(self.prices))
        self.stock = tuple(stock)
        self._stock_ts = [s.ts_ms for s in self.stock]
        self._review_ts = [ts for ts, _ in reviews]
        self._review_sums = [0, *accumulate(rating for _, rating in reviews)]
        self.promotions = tuple(promotions)
        self._sales_days = [day.day for day in sales]
        self._sales_sums = [0, *accumulate(day.units for day in sales)]

    def prices_until(self, at_ms: int) -> Sequence[PricePoint]:
        return self.prices[: bisect_right(self._price_ts, at_ms)]

    def extremes_until(self, at_ms: int) -> tuple[float | None, str | None, float | None]:
        """`_extremes` of `prices_until(at_ms)`, from running values kept for every cut."""
        i = bisect_right(self._price_ts, at_ms)
        if not i:
            return None, None, None
        low, low_ts, high = self._extremes[i - 1]
        return low, day_iso(low_ts), high

    def price_at(self, at_ms: int) -> PricePoint | None:
        """The latest price observation at `at_ms`: what a shopper paid then."""
        i = bisect_right(self._price_ts, at_ms)
        return self.prices[i - 1] if i else None

    def stock_at(self, at_ms: int) -> StockLevel | None:
        i = bisect_right(self._stock_ts, at_ms)
        return self.stock[i - 1] if i else None

    def rating_split(self, split_ms: int, until_ms: int) -> tuple[int, int, int, int, int]:
        """As `MarketStore.rating_split`."""
        end = bisect_right(self._review_ts, until_ms)
        cut = min(bisect_left(self._review_ts, split_ms), end)
        sums = self._review_sums
        newest = self._review_ts[end - 1] if end else 0
        return cut, sums[cut], end - cut, sums[end] - sums[cut], newest

    def sales_units(self, since_day: str, until_day: str) -> int:
        lo = bisect_left(self._sales_days, since_day)
        hi = bisect_right(self._sales_days, until_day)
        return self._sales_sums[hi] - self._sales_sums[lo] if hi > lo else 0


class FactsBuilder:
    """Computes fact sheets; holds the category priors, which change slowly.

    `clock` is what "now" means for a sheet built without an explicit moment;
    `stale_price_days`, how old the last price may be before the sheet says it is stale.
    """

    def __init__(
        self,
        store: MarketStore,
        clock: Clock = now_ms,
        *,
        stale_price_days: float = DEFAULT_STALE_PRICE_DAYS,
    ) -> None:
        if not stale_price_days >= 1:
            raise ValueError(f"stale_price_days must be at least 1, got {stale_price_days}")
        self.store = store
        self.clock = clock
        self.stale_price_ms = stale_price_days * DAY_MS
        self._priors: dict[tuple[str, int | None], tuple[float, float]] = {}
        self._lock = threading.Lock()
        self.category_events = CategoryEvents(store)
        self._ratings: dict[str, tuple[list[int], list[int], float]] = {}

    def build(self, sku: str, at_ms: int | None = None) -> FactSheet | None:
        """The sheet now (the clock's moment), or as of `at_ms`, from the store."""
        product = self.store.product(sku)
        if product is None:
            return None
        as_of = self.clock() if at_ms is None else at_ms
        since, today = _sales_days(as_of)
        inputs = _Inputs(
            prices=self.store.prices(sku, until_ms=as_of),
            stock=self.store.latest_stock(sku, until_ms=as_of),
            ratings=self.store.rating_split(sku, _rating_split_ms(as_of), as_of),
            promotions=self.store.promotions(sku, as_of),
            sales=sum(day.units for day in self.store.sales(sku, since, today)),
            prior=self.category_prior(product.category, at_ms),
        )
        return self._sheet(product, inputs, as_of)

    def history(self, sku: str) -> ProductHistory | None:
        """All of the product's rows, for `build_from`."""
        product = self.store.product(sku)
        if product is None:
            return None
        return ProductHistory(
            product,
            self.store.prices(sku),
            self.store.stock_levels(sku),
            [(r.ts_ms, r.rating) for r in self.store.reviews(sku)],
            self.store.promotions(sku),
            self.store.sales(sku, ""),
        )

    def build_from(self, history: ProductHistory, at_ms: int) -> FactSheet:
        """The same sheet as `build(sku, at_ms)`, cut from rows already in memory."""
        since, today = _sales_days(at_ms)
        inputs = _Inputs(
            prices=history.prices_until(at_ms),
            stock=history.stock_at(at_ms),
            ratings=history.rating_split(_rating_split_ms(at_ms), at_ms),
            promotions=[p for p in history.promotions if p.ends_ms > at_ms],
            sales=history.sales_units(since, today),
            prior=self._replayed_prior(history.product.category, at_ms),
            extremes=history.extremes_until(at_ms),
        )
        return self._sheet(history.product, inputs, at_ms)

    def category_prior(self, category: str, at_ms: int | None = None) -> float:
        """The category's mean rating over the reviews written by `at_ms` (None: by now),
        recomputed at most every PRIOR_TTL_S."""
        key = (category, at_ms)
        now = time.monotonic()
        with self._lock:
            cached = self._priors.get(key)
        if cached is not None and now - cached[1] < PRIOR_TTL_S:
            return cached[0]
        until = self.clock() if at_ms is None else at_ms
        count, mean = self.store.category_stats(category, until)
        prior = round(mean, 2) if count >= PRIOR_WEIGHT else DEFAULT_PRIOR_MEAN
        with self._lock:
            if len(self._priors) >= PRIORS_KEPT:
                self._priors.clear()
            self._priors[key] = (prior, now)
        return prior

    def _replayed_prior(self, category: str, at_ms: int) -> float:
        """`category_prior(category, at_ms)` from the category's ratings read once, in time
        order with running sums (kept PRIOR_TTL_S): a replay asks for it as of every day
        it visits, each an aggregate over the category's reviews in the store."""
        now = time.monotonic()
        with self._lock:
            cached = self._ratings.get(category)
        if cached is None or now - cached[2] >= PRIOR_TTL_S:
            skus = [hit.sku for hit in self.store.all_names() if hit.category == category]
            rows = sorted((r.ts_ms, r.rating) for sku in skus for r in self.store.reviews(sku))
            cached = ([ts for ts, _ in rows], [0, *accumulate(rating for _, rating in rows)], now)
            with self._lock:
                self._ratings[category] = cached
        times, sums, _ = cached
        count = bisect_right(times, at_ms)
        if count < PRIOR_WEIGHT:
            return DEFAULT_PRIOR_MEAN
        return round(sums[count] / count, 2)

    def _sheet(self, product: Product, inputs: _Inputs, as_of: int) -> FactSheet:
        prices = inputs.prices
        times = [p.ts_ms for p in prices]
        current = prices[-1] if prices else None
        windows = tuple(_window(_since(prices, times, as_of, days), days) for days in WINDOWS)
        low, low_at, high = inputs.extremes if inputs.extremes else _extremes(prices)
        last90 = [p.price for p in _since(prices, times, as_of, 90)]
        since30 = bisect_left(times, as_of - 30 * DAY_MS)
        tracked = (as_of - times[0]) / DAY_MS if times else 0.0
        # the slope over the days tracked when fewer than 30: a product tracked 9 days
        # whose price fell 31 % in them has not fallen 103 % "over the last 30 days"
        trend = trend_pct(times[since30:], [p.price for p in prices[since30:]], min(30, tracked))
        volatility = volatility_pct(last90)
        stock = inputs.stock
        today = _money(current.price) if current else None
        active, upcoming = _promotions(inputs.promotions, as_of, today)
        rating = _rating(inputs.ratings, inputs.prior)
        newest_review = inputs.ratings[4]
        newest = max(current.ts_ms if current else 0, stock.ts_ms if stock else 0, newest_review)
        content = {
            "sku": product.sku,
            "title": product.title,
            "brand": product.brand,
            "category": product.category,
            "currency": current.currency if current else "USD",
            "current_price": _money(current.price) if current else None,
            "current_price_at": iso(current.ts_ms) if current else None,
            "price_age_days": (as_of - current.ts_ms) // DAY_MS if current else None,
            "price_stale": current is not None and as_of - current.ts_ms > self.stale_price_ms,
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
            "sales_3d": inputs.sales,
            "revision": product.revision,
            "discount_claim": _discount_claim(prices, inputs.promotions, as_of, times),
            "coming_events": coming_events(
                prices,
                as_of,
                category=partial(self.category_events.past, product.category),
                times=times,
            ),
            "effective_price": _effective_price(today, active),
        }
        version = _version(content)
        return FactSheet(
            **content,  # type: ignore[arg-type]
            as_of=iso(as_of),
            version=version,
            data_age_ms=as_of - newest if newest else -1,
        )


def _rating_split_ms(as_of: int) -> int:
    return as_of - RECENT_RATING_DAYS * DAY_MS


def _sales_days(as_of: int) -> tuple[str, str]:
    """The first and last day (ISO) of the sales window ending on `as_of`'s day."""
    today = from_ms(as_of).date()
    return (today - timedelta(days=SALES_DAYS - 1)).isoformat(), today.isoformat()


def _rating(ratings: tuple[int, int, int, int, int], prior: float) -> RatingFacts:
    earlier_n, earlier_sum, recent_n, recent_sum, _ = ratings
    count = earlier_n + recent_n
    total = earlier_sum + recent_sum
    recent = recent_sum / recent_n if recent_n else None
    earlier = earlier_sum / earlier_n if earlier_n else None
    return RatingFacts(
        count=count,
        mean=round(total / count, 2) if count else None,
        bayesian=round(bayesian_average(total, count, prior, PRIOR_WEIGHT), 2),
        prior_mean=prior,
        prior_weight=PRIOR_WEIGHT,
        recent_count=recent_n,
        recent_mean=round(recent, 2) if recent is not None else None,
        earlier_mean=round(earlier, 2) if earlier is not None else None,
        trend=round(recent - earlier, 2) if recent is not None and earlier is not None else None,
    )


def _since(
    prices: Sequence[PricePoint], times: Sequence[int], as_of: int, days: int
) -> Sequence[PricePoint]:
    """The prices of the `days` days up to `as_of` (in time order, as `times`)."""
    return prices[bisect_left(times, as_of - days * DAY_MS) :]


def _window(recent: Sequence[PricePoint], days: int) -> WindowStats:
    values = [p.price for p in recent]
    if not values:
        return WindowStats(days=days, observations=0, min=None, avg=None, median=None)
    return WindowStats(
        days=days,
        observations=len(values),
        min=_money(min(values)),
        avg=_money(sum(values) / len(values)),
        median=_money(median(values)),
    )


def _extremes(
    prices: Sequence[PricePoint],
) -> tuple[float | None, str | None, float | None]:
    """All-time low with the latest day it was seen: a recent low is the one a shopper can hit."""
    if not prices:
        return None, None, None
    low = min(p.price for p in prices)
    low_at = max(p.ts_ms for p in prices if p.price == low)
    return low, day_iso(low_at), max(p.price for p in prices)


def _running_extremes(prices: Sequence[PricePoint]) -> Iterator[tuple[float, int, float]]:
    """(low, latest ts of the low, high) of each prefix of `prices`, in time order."""
    low, low_ts, high = math.inf, 0, -math.inf
    for point in prices:
        if point.price <= low:
            low, low_ts = point.price, point.ts_ms
        high = max(high, point.price)
        yield low, low_ts, high


def _promotions(
    promotions: Sequence[Promotion], as_of: int, current: float | None
) -> tuple[tuple[PromotionFact, ...], tuple[PromotionFact, ...]]:
    """Running and known upcoming promotions (PROMOTION_NOTICE_DAYS), by start then name,
    each priced for one unit at `current` (today's price)."""
    active: list[PromotionFact] = []
    upcoming: list[PromotionFact] = []
    visible = (p for p in promotions if p.ends_ms > as_of and known_by(p, as_of))
    for promo in sorted(visible, key=lambda p: (p.starts_ms, p.name)):
        fact = _offer(promo, as_of, current)
        if fact is not None:
            (active if promo.starts_ms <= as_of else upcoming).append(fact)
    return tuple(active), tuple(upcoming)


def known_by(promo: Promotion, as_of: int) -> bool:
    """Whether a sheet as of `as_of` lists the promotion: announced by then (a row without
    its announcement, PROMOTION_NOTICE_DAYS before it starts), and starting within that
    horizon. No look-ahead: an as-of sheet never knows of an offer announced later."""
    horizon = PROMOTION_NOTICE_DAYS * DAY_MS
    announced = promo.starts_ms - horizon if promo.announced_ms is None else promo.announced_ms
    return announced <= as_of and promo.starts_ms <= as_of + horizon


def _offer(promo: Promotion, as_of: int, base: float | None) -> PromotionFact | None:
    """The offer as one unit's price; None for an offer that is not a price of its own
    when there is no price yet to apply it to."""
    starts, ends = iso(promo.starts_ms), iso(promo.ends_ms)
    days = max(0, (from_ms(promo.starts_ms).date() - from_ms(as_of).date()).days)
    if promo.kind == "price" and promo.price is not None:
        return PromotionFact(promo.name, starts, ends, _money(promo.price), days)
    if base is None:
        return None
    price, applies = _unit_price(promo, base)
    return PromotionFact(
        promo.name,
        starts,
        ends,
        price,
        days,
        kind=promo.kind,
        base_price=base,
        percent_off=promo.percent_off,
        threshold=promo.threshold,
        save=promo.save,
        min_spend=promo.min_spend,
        applies=applies,
    )


def _unit_price(promo: Promotion, base: float) -> tuple[float, bool]:
    """(one unit's price, whether the offer reaches it). A threshold or minimum spend is
    per order: a unit priced below it pays `base`. At the threshold it applies (满200减30
    takes 30 off an order of exactly 200). A share off is rounded half up to the cent, as
    a till does; an amount off never takes the price below zero."""
    floor = promo.threshold if promo.kind == "threshold" else promo.min_spend
    if floor is not None and base < floor:
        return base, False
    if promo.percent_off is not None:
        kept = Decimal(repr(base)) * (100 - Decimal(repr(promo.percent_off))) / 100
        return float(kept.quantize(_CENT, rounding=ROUND_HALF_UP)), True
    return _money(max(0.0, base - (promo.save or 0.0))), True


_CENT = Decimal("0.01")


def effective_price_at(history: ProductHistory, at_ms: int) -> float | None:
    """What one unit costs at `at_ms`: the sheet's `effective_price`, without the rest of
    the sheet (the backtest prices every day of every wait). Every offer running then
    counts, announced or not: a shopper pays the till's price whatever worthit knew."""
    point = history.price_at(at_ms)
    if point is None:
        return None
    today = _money(point.price)
    running = (p for p in history.promotions if p.starts_ms <= at_ms < p.ends_ms)
    offers = [fact for p in running if (fact := _offer(p, at_ms, today)) is not None]
    return _effective_price(today, offers)


def _effective_price(current: float | None, active: Sequence[PromotionFact]) -> float | None:
    """One unit now: the best single offer, since worthit does not assume offers stack."""
    if current is None:
        return None
    return min([current, *(offer.price for offer in active)])


def _discount_claim(
    prices: Sequence[PricePoint],
    promotions: Sequence[Promotion],
    as_of: int,
    times: Sequence[int],
) -> DiscountClaim | None:
    """The reduction a shopper is shown now, measured against the recorded prices.

    Only a promotional price (kind `price`) is measured: the other kinds take their cut
    off today's price at the till rather than claim a former price, and what they leave
    is the sheet's `effective_price`."""
    if not prices:
        return None
    current = prices[-1]
    visible = sorted(
        (p.starts_ms, p.name, p.price)
        for p in promotions
        if p.price is not None and p.kind == "price" and p.ends_ms > as_of and known_by(p, as_of)
    )
    if visible:
        started, promo_name, promo_price = visible[0]
        before = prices[: bisect_left(times, started)]
        if current.list_price and current.list_price > promo_price:
            reference = current.list_price
        elif before and before[-1].price > promo_price:
            reference = before[-1].price
        else:
            return None
        source, name, price = "promotion", promo_name, promo_price
    elif current.list_price and current.list_price > current.price:
        source, name, reference, price = "list_price", None, current.list_price, current.price
        started = current.ts_ms
    else:
        return None
    prior = prices[
        bisect_left(times, started - PRIOR_PRICE_DAYS * DAY_MS) : bisect_left(times, started)
    ]
    raised_pct, raised_from = _raise(prices, times, min(started, as_of + 1))
    return DiscountClaim(
        source=source,
        name=name,
        reference=_money(reference),
        price=_money(price),
        started=iso(started),
        prior_low=_money(min(p.price for p in prior)) if prior else None,
        prior_observations=len(prior),
        raised_pct=raised_pct,
        raised_from=raised_from,
    )


def _raise(
    prices: Sequence[PricePoint], times: Sequence[int], until: int
) -> tuple[float | None, float | None]:
    """(% the RAISE_DAYS before `until` sat above the 30 days before them, that earlier median)."""
    split = until - RAISE_DAYS * DAY_MS
    lo = bisect_left(times, split - PRIOR_PRICE_DAYS * DAY_MS)
    mid, hi = bisect_left(times, split), bisect_left(times, until)
    earlier = [p.price for p in prices[lo:mid]]
    recent = [p.price for p in prices[mid:hi]]
    if len(earlier) < MIN_RAISE_OBSERVATIONS or len(recent) < MIN_RAISE_OBSERVATIONS:
        return None, None
    before = median(earlier)
    return _pct(100.0 * (median(recent) / before - 1)), _money(before)


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
