"""The verdict rules: price-tracker practice written down as code.

Each rule looks at the fact sheet and may add one reason (a stable code, the numbers
it rests on, a sentence). The verdict is then chosen from the reasons' polarities.
Thresholds and their sources are in docs/verdict.md; keep the two in step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from worthit.decide.forecast_advice import DEAL_SHARE, DEFAULT_POLICY, Forecast, ForecastPolicy
from worthit.decide.phrasing import number, sentence
from worthit.decide.verdict import Polarity, Reason, Verdict, VerdictKind
from worthit.facts.sheet import EventFact, FactSheet, PromotionFact, RatingFacts
from worthit.market.categories import BY_KEY, category_name
from worthit.text.money import money


@dataclass(frozen=True)
class Thresholds:
    min_observations: int = 10
    min_days_for_low: int = 35
    near_low_pct: float = 5.0
    delta_90d_pct: float = 10.0
    near_avg_pct: float = 3.0
    low_percentile: float = 20.0
    high_percentile: float = 80.0
    falling_trend_pct: float = -5.0
    upcoming_days: float = 21.0
    upcoming_saving_pct: float = 5.0
    was_price_gap_pct: float = 15.0
    fake_discount_gap_pct: float = 5.0
    """A claimed reference this far above the 30-day prior low is flagged (daily noise below)."""
    pre_sale_hike_pct: float = 10.0
    event_days: int = 30
    event_saving_pct: float = 5.0
    quality_floor: float = 3.5
    min_reviews_quality: int = 10
    rating_drop: float = 0.7
    min_recent_reviews: int = 10
    rating_sd: float = 1.1
    rating_drop_z: float = 2.0
    reviews_for_full_confidence: int = 50
    well_rated: float = 4.2
    min_reviews_well_rated: int = 20
    low_stock: int = 5
    freshness_s: float = 60.0
    """The freshness objective: a live answer on older data says so (docs/events.md)."""
    freshness_by_category: Mapping[str, float] = field(default_factory=dict, hash=False)
    """Objectives that differ from `freshness_s`, by category key (e.g. {"tvs": 300.0})."""
    stale_confidence: float = 0.8
    """What a verdict's confidence is multiplied by when its data missed the objective."""

    def freshness_objective_s(self, category: str) -> float:
        return self.freshness_by_category.get(category, self.freshness_s)


DEFAULT_THRESHOLDS = Thresholds()
MAX_CONFIDENCE = 0.95
"""worthit never claims certainty."""

_WEIGHTS: dict[str, float] = {
    "near_all_time_low": 2.0,
    "at_all_time_low": 2.0,
    "below_90d_avg": 1.0,
    "low_percentile": 1.0,
    "well_rated": 0.5,
    "above_90d_avg": 1.0,
    "high_percentile": 1.0,
    "price_falling": 1.0,
    "was_price_untrusted": 0.5,
    "upcoming_sale": 2.0,
    "sale_event": 1.5,
    "pre_sale_hike": 0.5,
    "out_of_stock": 2.0,
    "over_budget": 2.0,
    "over_budget_at_low": 2.0,
    "quality_floor": 3.0,
    "rating_falling": 3.0,
    "forecast_wait": 5.0,
    "forecast_buy": 5.0,
    "forecast_deal": 5.0,
    "deal_wait": 5.0,
    "deal_buy": 5.0,
}
"""A forecast's reason, or the deal rule's where it stands in for one, outweighs the price
rules: it decides where it is given, so it leads."""


class _Reasons:
    """Collects reasons in one language, formatting each sentence from its numbers."""

    def __init__(self, sheet: FactSheet, language: str) -> None:
        self.sheet = sheet
        self.language = language
        self.items: list[Reason] = []

    def money(self, amount: float) -> str:
        return money(amount, self.sheet.currency, self.language)

    def add(
        self,
        code: str,
        polarity: Polarity,
        numbers: dict[str, float | int | str],
        shown: Mapping[str, object] | None = None,
        phrase: str | None = None,
    ) -> None:
        values: dict[str, object] = dict(numbers)
        values.update(shown or {})
        text = sentence(phrase or code, self.language, values)
        self.items.append(Reason(code, polarity, numbers, text))


def _price_history(r: _Reasons, t: Thresholds) -> bool:
    """Enough history to judge the price at all? Adds the reason when not.

    Percentages are compared as rounded for display, so a reason never says
    "10% below" while the rule saw 9.96%.
    """
    s = r.sheet
    if s.current_price is None:
        r.add("no_price", Polarity.INFO, {})
        return False
    if s.price_stale and s.price_age_days is not None and s.current_price_at is not None:
        age = _written(s.price_age_days * 86400, r.language)
        numbers: dict[str, float | int | str] = {
            "age_days": s.price_age_days,
            "last_price_at": s.current_price_at[:10],
        }
        r.add("stale_price", Polarity.INFO, numbers, {"age": age})
        return False
    unusable = _unusable_price(s)
    if unusable is not None:
        field, value = unusable
        r.add("unusable_price", Polarity.INFO, {"field": field, "value": value})
        return False
    if s.observations < t.min_observations:
        r.add(
            "few_observations",
            Polarity.INFO,
            {
                "observations": s.observations,
                "days_tracked": s.days_tracked,
                "min_observations": t.min_observations,
            },
        )
        return False
    return True


def _unusable_price(s: FactSheet) -> tuple[str, float] | None:
    """The first price fact the rules would divide by that is not positive.

    Accepted prices are at least one minor unit, but a sheet keeps money to the cent and a
    store may hold rows from before that floor: one such row must turn the price rules off
    for its product (INSUFFICIENT_DATA, saying why), never make every answer on it fail."""
    values: list[tuple[str, float | None]] = [
        ("current_price", s.current_price),
        ("effective_price", s.effective_price),
        ("all_time_low", s.all_time_low),
        ("list_price", s.list_price),
    ]
    for window in s.windows:
        values += [
            (f"min_{window.days}d", window.min),
            (f"avg_{window.days}d", window.avg),
            (f"median_{window.days}d", window.median),
        ]
    if s.discount_claim is not None:
        claim = s.discount_claim
        values += [("prior_low", claim.prior_low), ("reference", claim.reference)]
    return next(((k, v) for k, v in values if v is not None and not v > 0), None)


def _paid(s: FactSheet) -> float | None:
    """What one unit costs now: the effective price, so an offer at the till (a share off,
    a threshold one unit reaches, a coupon) counts as a promotional price does. The price
    rules judge this against the recorded history."""
    return s.effective_price if s.effective_price is not None else s.current_price


def _all_time_low(r: _Reasons, t: Thresholds) -> None:
    s = r.sheet
    paid = _paid(s)
    if s.all_time_low is None or paid is None or s.all_time_low_at is None:
        return
    if s.days_tracked < t.min_days_for_low:
        r.add(
            "low_not_established",
            Polarity.INFO,
            {"days_tracked": s.days_tracked, "low": s.all_time_low, "min_days": t.min_days_for_low},
            {"low": r.money(s.all_time_low)},
        )
        return
    gap = round(100.0 * (paid - s.all_time_low) / s.all_time_low, 1)
    if gap <= 0.0:
        r.add(
            "at_all_time_low",
            Polarity.BUY,
            {"current": paid, "low_at": s.all_time_low_at},
            {"current": r.money(paid)},
        )
    elif gap <= t.near_low_pct:
        r.add(
            "near_all_time_low",
            Polarity.BUY,
            {
                "current": paid,
                "low": s.all_time_low,
                "gap_pct": round(gap, 1),
                "low_at": s.all_time_low_at,
            },
            {
                "current": r.money(paid),
                "low": r.money(s.all_time_low),
                "gap_pct": number(gap),
            },
        )


def _average_delta(r: _Reasons, t: Thresholds) -> None:
    s = r.sheet
    window = s.window(90)
    paid = _paid(s)
    if paid is None or window is None or window.avg is None:
        return
    delta = round(100.0 * (paid - window.avg) / window.avg, 1)
    numbers: dict[str, float | int | str] = {"avg90": window.avg, "delta_pct": round(abs(delta), 1)}
    shown = {"avg90": r.money(window.avg), "delta_pct": number(abs(delta))}
    if delta <= -t.delta_90d_pct:
        r.add("below_90d_avg", Polarity.BUY, numbers, shown)
    elif delta >= t.delta_90d_pct:
        r.add("above_90d_avg", Polarity.WAIT, numbers, shown)
    elif abs(delta) <= t.near_avg_pct:
        r.add("near_90d_avg", Polarity.INFO, {"avg90": window.avg}, shown)


def _percentile(r: _Reasons, t: Thresholds) -> None:
    p = r.sheet.percentile_90d
    if p is None:
        return
    if p <= t.low_percentile:
        share = round(100.0 - p, 1)
        r.add("low_percentile", Polarity.BUY, {"share": share}, {"share": number(share)})
    elif p >= t.high_percentile:
        r.add("high_percentile", Polarity.WAIT, {"share": round(p, 1)}, {"share": number(p)})


def _trend(r: _Reasons, t: Thresholds) -> None:
    trend = r.sheet.trend_30d_pct
    if trend is not None and trend <= t.falling_trend_pct:
        drop = round(abs(trend), 1)
        r.add("price_falling", Polarity.WAIT, {"drop_pct": drop}, {"drop_pct": number(drop)})


def _was_price(r: _Reasons, t: Thresholds) -> None:
    """A seller's "was" price is a claim, not a fact: only the recorded history counts."""
    s = r.sheet
    window = s.window(90)
    if s.list_price is None or window is None or window.median is None:
        return
    if s.list_price >= window.median * (1 + t.was_price_gap_pct / 100):
        r.add(
            "was_price_untrusted",
            Polarity.WAIT
            if s.current_price and s.current_price >= window.median
            else Polarity.INFO,
            {"list_price": s.list_price, "median90": window.median},
            {"list_price": r.money(s.list_price), "median90": r.money(window.median)},
        )


def _promotions(r: _Reasons, t: Thresholds) -> None:
    """What the running offers make one unit cost, and the best announced one worth a wait.

    An upcoming offer is compared with what one unit costs today (the sheet's
    `effective_price`), both as one unit's price, so a 满200减30 on a unit under 200 is no
    reason to wait, and a sale no better than a coupon running now is none either."""
    s = r.sheet
    if s.current_price is None:
        return
    for promo in s.active_promotions:
        if promo.kind == "price":
            r.add(
                "active_promotion",
                Polarity.INFO,
                {"name": promo.name, "ends": promo.ends[:10], "promo_price": promo.price},
                {"promo_price": r.money(promo.price)},
            )
            break
    _offers(r, s.current_price)
    today = s.effective_price if s.effective_price is not None else s.current_price
    best = None
    for promo in s.upcoming_promotions:
        if promo.days_until_start > t.upcoming_days:
            continue
        saving = 100.0 * (today - promo.price) / today
        if saving >= t.upcoming_saving_pct and (best is None or saving > best[1]):
            best = (promo, saving)
    if best is None:
        return
    promo, saving = best
    days = max(1, promo.days_until_start)
    numbers: dict[str, float | int | str] = {
        "name": promo.name,
        "days": days,
        "promo_price": promo.price,
        "saving_pct": round(saving, 1),
    }
    shown: dict[str, object] = {"promo_price": r.money(promo.price), "saving_pct": number(saving)}
    if promo.kind == "price":
        r.add("upcoming_sale", Polarity.WAIT, numbers, shown)
        return
    terms, terms_numbers = _terms(r, promo)
    numbers |= terms_numbers | {"today": today}
    shown |= {"terms": terms, "today": r.money(today)}
    r.add("upcoming_sale", Polarity.WAIT, numbers, shown, phrase="upcoming_offer")


def _offers(r: _Reasons, current: float) -> None:
    """How the running offer that sets today's unit price gets there, and an offer one
    unit is too cheap to use. A promotional price says itself (`active_promotion`)."""
    s = r.sheet
    offers = [p for p in s.active_promotions if p.kind != "price"]
    now = s.effective_price
    cheaper = now is not None and now < current
    best = next((p for p in offers if cheaper and p.applies and p.price == now), None)
    if best is not None:
        terms, numbers = _terms(r, best)
        if best.percent_off is not None:
            cut = f"{number(best.percent_off)}%"
        else:
            cut = r.money(current - best.price)
        said: dict[str, float | int | str] = {
            "name": best.name,
            "effective": best.price,
            "current": current,
            "saving": round(current - best.price, 2),
        }
        r.add(
            "effective_price",
            Polarity.INFO,
            said | numbers,
            {
                "effective": r.money(best.price),
                "current": r.money(current),
                "terms": terms,
                "cut": cut,
            },
        )
    short = next((p for p in offers if not p.applies), None)
    floor = None if short is None else short.threshold or short.min_spend
    if short is not None and floor is not None:
        terms, numbers = _terms(r, short)
        said = {"name": short.name, "current": current, "floor": floor}
        r.add(
            "offer_short",
            Polarity.INFO,
            said | numbers,
            {"current": r.money(current), "floor": r.money(floor), "terms": terms},
        )


def _terms(r: _Reasons, offer: PromotionFact) -> tuple[str, dict[str, float | int | str]]:
    """An offer's terms as a phrase ("spend $200.00, save $30.00", "满$200.00减$30.00") and
    the numbers it writes."""
    numbers: dict[str, float | int | str] = {}
    shown: dict[str, object] = {}
    if offer.percent_off is not None:
        numbers["percent_off"] = offer.percent_off
        shown["percent_off"] = number(offer.percent_off)
    for key, value in (
        ("threshold", offer.threshold),
        ("save", offer.save),
        ("min_spend", offer.min_spend),
    ):
        if value is not None:
            numbers[key] = value
            shown[key] = r.money(value)
    code = f"terms_{offer.kind}"
    if offer.kind == "coupon":
        code += "_percent" if offer.percent_off is not None else ""
        code += "_min" if offer.min_spend is not None else ""
    return sentence(code, r.language, numbers | shown), numbers


def _claimed_discount(r: _Reasons, t: Thresholds) -> None:
    """EU Omnibus Art. 6a / FTC 16 CFR 233.1: a reduction counts from the prior price, the
    lowest of the 30 days before it, not from the reference the seller shows. Never a buy
    signal; a price raised ahead of a sale is a mild reason not to buy at it."""
    s = r.sheet
    claim = s.discount_claim
    if claim is None or claim.prior_low is None:
        return
    name = claim.name or _TODAY.get(r.language, _TODAY["en"])
    event = _coming_sale(s, t)
    ahead = claim.source == "list_price" or _starts_later(claim.started, s.as_of)
    if claim.source == "promotion" or event is not None:
        raised = claim.raised_pct
        if raised is not None and claim.raised_from is not None and raised >= t.pre_sale_hike_pct:
            sale = (
                claim.name
                if claim.source == "promotion" or event is None
                else _event_name(event, r.language)
            )
            r.add(
                "pre_sale_hike",
                Polarity.WAIT if ahead else Polarity.INFO,
                {
                    "name": sale or name,
                    "raised_pct": raised,
                    "raised_from": claim.raised_from,
                    "raise_days": 14,
                },
                {"raised_from": r.money(claim.raised_from), "raised_pct": number(raised)},
                phrase="pre_sale_hike" if ahead else "pre_sale_hike_on",
            )
    if claim.source == "list_price" and any(x.code == "was_price_untrusted" for x in r.items):
        return
    if claim.reference < claim.prior_low * (1 + t.fake_discount_gap_pct / 100):
        return
    claimed = round(100.0 * (claim.reference - claim.price) / claim.reference, 1)
    true = round(100.0 * (claim.prior_low - claim.price) / claim.prior_low, 1)
    r.add(
        "fake_discount",
        Polarity.INFO,
        {
            "name": name,
            "price": claim.price,
            "reference": claim.reference,
            "claimed_pct": claimed,
            "prior_low": claim.prior_low,
            "true_pct": true,
            "prior_days": 30,
        },
        {
            "price": r.money(claim.price),
            "reference": r.money(claim.reference),
            "prior_low": r.money(claim.prior_low),
            "claimed_pct": number(claimed),
            "true_pct": number(true),
        },
        phrase="fake_discount" if true > 0 else "fake_discount_none",
    )


_TODAY = {"en": "Today's price", "zh": "当前价", "ja": "現在の価格"}


def _starts_later(started: str, as_of: str) -> bool:
    """ISO moments in one format compare as strings."""
    return started > as_of


def _coming_sale(s: FactSheet, t: Thresholds) -> EventFact | None:
    return next((e for e in s.coming_events if e.days_until <= t.event_days), None)


def _sale_event(r: _Reasons, t: Thresholds) -> None:
    """A calendar sale with no announced promotion: wait when its past occurrences, applied
    to today's 30-day level, save enough even at their least. The evidence is this
    product's own past occurrences, else its category's typical discount at past
    occurrences of the event, else at the calendar's other events; the reason says which."""
    s = r.sheet
    window = s.window(30)
    paid = _paid(s)
    if paid is None or window is None or window.median is None:
        return
    if any(x.code == "upcoming_sale" for x in r.items):
        return
    for event in s.coming_events:
        past, basis, said = _event_evidence(r, event)
        if event.days_until > t.event_days or not past or min(past) <= 0:
            continue
        low, high = min(past), max(past)
        price_from = round(window.median * (1 - high / 100), 2)
        price_to = round(window.median * (1 - low / 100), 2)
        saving = round(100.0 * (paid - price_to) / paid, 1)
        if saving < t.event_saving_pct:
            continue
        name = _event_name(event, r.language)
        phrase = "sale_event" if basis == "product" else f"sale_event_{basis}"
        numbers: dict[str, float | int | str] = {
            "name": name,
            "days": event.days_until,
            "count": len(past),
            "low_pct": low,
            "high_pct": high,
            "price_from": price_from,
            "price_to": price_to,
            "saving_pct": saving,
            "current": paid,
            "window_days": 30,
            "basis": basis,
        }
        r.add(
            "sale_event",
            Polarity.WAIT,
            numbers | said,
            {
                "price_from": r.money(price_from),
                "price_to": r.money(price_to),
                "current": r.money(paid),
                "low_pct": number(low),
                "high_pct": number(high),
            },
            phrase=phrase if len(past) > 1 else f"{phrase}_once",
        )
        return


def _event_name(event: EventFact, language: str) -> str:
    """Chinese shoppers know the sales by their Chinese names; others by the English one."""
    return event.name_zh if language == "zh" else event.name_en


def _event_evidence(
    r: _Reasons, event: EventFact
) -> tuple[tuple[float, ...], str, dict[str, float | int | str]]:
    """(past discounts, basis, the numbers that name the evidence). The basis is
    "product" (its own past occurrences), "category" (the category's at this event) or
    "category_events" (the category's at the calendar's other events)."""
    if event.past_discounts_pct or not event.category_past:
        return event.past_discounts_pct, "product", {}
    found = event.category_past
    zh = r.language == "zh"
    category = BY_KEY.get(r.sheet.category)
    said: dict[str, float | int | str] = {
        "category": r.sheet.category if category is None else category_name(category, r.language),
        "products": min(o.products for o in found),
    }
    basis = "category"
    if any(o.key != event.key for o in found):
        basis = "category_events"
        said["events"] = ("、" if r.language in ("zh", "ja") else ", ").join(
            f"{o.year}年{o.name_zh}" if zh else f"{o.name_en} {o.year}" for o in found
        )
    return tuple(o.discount_pct for o in found), basis, said


def _quality(r: _Reasons, t: Thresholds) -> None:
    rating = r.sheet.rating
    if (
        rating.bayesian is not None
        and rating.count >= t.min_reviews_quality
        and rating.bayesian < t.quality_floor
    ):
        r.add("quality_floor", Polarity.SKIP, {"rating": rating.bayesian, "count": rating.count})
    if (
        rating.trend is not None
        and rating.recent_mean is not None
        and rating.earlier_mean is not None
        and rating.recent_count >= t.min_recent_reviews
        and rating.trend <= -max(t.rating_drop, t.rating_drop_z * _drop_stderr(rating, t))
    ):
        r.add(
            "rating_falling",
            Polarity.SKIP,
            {"recent": rating.recent_mean, "earlier": rating.earlier_mean, "recent_days": 30},
        )
    elif (
        rating.bayesian is not None
        and rating.bayesian >= t.well_rated
        and rating.count >= t.min_reviews_well_rated
    ):
        r.add("well_rated", Polarity.BUY, {"rating": rating.bayesian, "count": rating.count})


def _drop_stderr(rating: RatingFacts, t: Thresholds) -> float:
    """Standard error of recent mean − earlier mean, taking one review's spread as rating_sd."""
    earlier = max(1, rating.count - rating.recent_count)
    return t.rating_sd * math.sqrt(1 / rating.recent_count + 1 / earlier)


def _stock(r: _Reasons, t: Thresholds) -> None:
    quantity = r.sheet.stock
    if quantity is None:
        return
    if quantity == 0:
        r.add("out_of_stock", Polarity.WAIT, {"quantity": 0})
    elif quantity <= t.low_stock:
        r.add("low_stock", Polarity.INFO, {"quantity": quantity})


_AGE_STEPS_S = (
    10,
    30,
    60,
    120,
    300,
    600,
    900,
    1800,
    3600,
    7200,
    10800,
    21600,
    43200,
    86400,
    172800,
    259200,
    604800,
    1209600,
    2592000,
    7776000,
    31536000,
)
"""What "more than …" an age is written as: steps, so that the sentence (and with it the
explanation's inputs, hence its key) changes a few times a day as data ages, not by the
second. The exact age is the answer's `data_age_ms`."""
_UNITS = (
    (86400, "day", "days", "天", "日"),
    (3600, "hour", "hours", "小时", "時間"),
    (60, "minute", "minutes", "分钟", "分"),
    (1, "second", "seconds", "秒", "秒"),
)
_STALE = {
    "en": (
        "Its newest data is more than {age} old, past the freshness objective of {objective}, "
        "so this verdict may be out of date."
    ),
    "zh": "最新数据距今已超过{age}，超出了{objective}的新鲜度目标，结论可能已过时。",
    "ja": (
        "最新のデータは{age}以上前のもので、鮮度の目標{objective}を過ぎているため、"
        "判定が古い可能性があります。"
    ),
}


def _written(seconds: float, language: str) -> str:
    """A duration in its largest whole unit: "90 seconds", "5 minutes", "3 days"."""
    whole = max(1, round(seconds))
    unit_s, one, many, zh, ja = next(u for u in _UNITS if whole >= u[0] and whole % u[0] == 0)
    count = whole // unit_s
    if language in ("zh", "ja"):
        return f"{count}{zh if language == 'zh' else ja}"
    return f"{count} {one if count == 1 else many}"


def past_freshness_objective(sheet: FactSheet, t: Thresholds = DEFAULT_THRESHOLDS) -> bool:
    """Whether the sheet's data is older than its category's objective, which the verdict
    then says. Only on a sheet from a store events keep current (`fed_by_events`): the age
    of data loaded once says nothing about whether it is current, and an as-of answer is
    old on purpose.
    """
    objective_s = t.freshness_objective_s(sheet.category)
    return sheet.fed_by_events and sheet.data_age_ms > objective_s * 1000


def _freshness(r: _Reasons, t: Thresholds) -> bool:
    """Event-fed data older than its category's objective: say how old. True when it is."""
    s = r.sheet
    if not past_freshness_objective(s, t):
        return False
    objective_s = t.freshness_objective_s(s.category)
    age_s = s.data_age_ms / 1000
    over_s = max((step for step in _AGE_STEPS_S if step <= age_s), default=int(age_s))
    language = r.language if r.language in _STALE else "en"
    text = _STALE[language].format(
        age=_written(over_s, language), objective=_written(objective_s, language)
    )
    numbers: dict[str, float | int | str] = {"age_over_s": over_s, "objective_s": objective_s}
    r.items.append(Reason("stale_data", Polarity.INFO, numbers, text))
    return True


def _budget(r: _Reasons, budget: float | None) -> None:
    """Over the shopper's own limit, today's price is a reason to wait, however good."""
    price = r.sheet.current_price
    if budget is not None and price is not None and price > budget:
        r.add(
            "over_budget",
            Polarity.WAIT,
            {"current": price, "budget": budget},
            {"current": r.money(price), "budget": r.money(budget)},
        )


def _budget_at_low(r: _Reasons) -> None:
    """Over the budget, but at or near its all-time low, and nothing says it will get
    cheaper (no announced or calendar sale, no falling price: the budget is the only
    reason to wait): waiting would not bring it under the budget, so the two reasons
    become one that says so, and the verdict is not WAIT but SKIP."""
    over = next((x for x in r.items if x.code == "over_budget"), None)
    low = next((x for x in r.items if x.code in ("at_all_time_low", "near_all_time_low")), None)
    waits = [x for x in r.items if x.polarity is Polarity.WAIT and x is not over]
    floor = r.sheet.all_time_low
    if over is None or low is None or waits or floor is None:
        return
    current, budget = float(low.numbers["current"]), float(over.numbers["budget"])
    if current <= budget:  # an offer at the till brings one unit under it
        return
    r.items = [x for x in r.items if x is not over and x is not low]
    gap = float(low.numbers.get("gap_pct", 0.0))
    numbers: dict[str, float | int | str] = {
        "current": current,
        "budget": budget,
        "low": floor,
        "gap_pct": gap,
    }
    shown = {
        "current": r.money(current),
        "budget": r.money(budget),
        "low": r.money(floor),
        "gap_pct": number(gap),
    }
    phrase = "over_budget_at_low" if gap > 0 else "over_budget_at_low_at"
    r.add("over_budget_at_low", Polarity.SKIP, numbers, shown, phrase=phrase)


_PRICE_RULES: tuple[Callable[[_Reasons, Thresholds], None], ...] = (
    _all_time_low,
    _average_delta,
    _percentile,
    _trend,
    _was_price,
    _promotions,
    _claimed_discount,
    _sale_event,
)


def decide_verdict(
    sheet: FactSheet,
    language: str = "en",
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    budget: float | None = None,
    forecast: Forecast | None = None,
    policy: ForecastPolicy = DEFAULT_POLICY,
    deal_rule: bool = False,
) -> Verdict:
    """The verdict from facts alone (and the shopper's budget, when they gave one), or
    with the store's forecast for this product at today's price, which then decides BUY or
    WAIT unless a reason outside the price history says wait or skip. `deal_rule`: the
    store's prices keep a regular level (`StoreForecaster.deal_rule_at`), so without a
    forecast that applies the deal rule the forecaster improves on decides in its place.
    Pure: the same sheet, budget, forecast and `deal_rule` always give the same verdict."""
    t = thresholds
    r = _Reasons(sheet, language)
    _quality(r, t)
    _stock(r, t)
    _budget(r, budget)
    priced = _price_history(r, t)
    if priced:
        for rule in _PRICE_RULES:
            rule(r, t)
        _budget_at_low(r)
        if forecast is not None and policy.applies(forecast):
            _forecast(r, forecast, policy)
        elif deal_rule:
            _deal(r)
    stale = _freshness(r, t)
    kind, confidence = _choose(r.items, priced, sheet, t)
    if kind is VerdictKind.WAIT and priced:
        _no_deal_yet(r, t)
    if stale:
        confidence = _clamp(confidence * t.stale_confidence)
    return Verdict(
        kind=kind,
        confidence=confidence,
        reasons=_ordered(r.items, kind),
        sku=sheet.sku,
        language=language,
        facts_version=sheet.version,
    )


_HARD_WAITS = frozenset({"out_of_stock", "upcoming_sale", "over_budget"})
"""Reasons to wait that rest on facts a price history cannot show: they stand whatever
the forecast says."""
_FORECASTS = frozenset({"forecast_wait", "forecast_buy", "forecast_deal"})
_DEALS = frozenset({"deal_wait", "deal_buy"})
_DECIDES = _FORECASTS | _DEALS
"""The reasons that decide BUY or WAIT alone where they are given."""
DEAL_CONFIDENCE = 0.5
"""The deal rule's verdict rests on one comparison with no track record behind it."""


def _forecast(r: _Reasons, forecast: Forecast, policy: ForecastPolicy) -> None:
    """The forecast's advice as the reason that decides: what a WAIT waits for (the deal
    price, how often the drop came from moments like this one, the expected low), or why
    waiting is unlikely to pay. Not where another reason already says wait or skip for
    what the history cannot show."""
    if any(x.code in _HARD_WAITS or x.polarity is Polarity.SKIP for x in r.items):
        return
    waits = policy.waits(forecast)
    moments, drops = forecast.comparable_moments, forecast.comparable_drops
    numbers: dict[str, float | int | str] = {
        "current": forecast.price,
        "deal_price": round(forecast.deal_price, 2),
        "expected_low": round(forecast.expected_low, 2),
        "drop_pct": round(100 * forecast.drop, 1),
        "horizon": forecast.horizon,
        "moments": moments,
        "drops": drops,
        "p_drop": forecast.p_drop,
        "confidence": round(0.5 + 0.4 * (drops if waits else moments - drops) / moments, 2),
    }
    shown: dict[str, object] = {
        "current": r.money(forecast.price),
        "deal_price": r.money(forecast.deal_price),
        "expected_low": r.money(forecast.expected_low),
        "drop_pct": number(100 * forecast.drop),
    }
    if waits:
        r.add("forecast_wait", Polarity.WAIT, numbers, shown)
    elif forecast.is_deal:
        r.add("forecast_deal", Polarity.BUY, numbers, shown)
    else:
        cost = round(-100 * forecast.expected_saving, 1)
        r.add("forecast_buy", Polarity.BUY, numbers | {"cost_pct": cost},
              shown | {"cost_pct": number(cost)})  # fmt: skip


def _deal(r: _Reasons) -> None:
    """Where the store's prices keep a regular level but no forecast applies to this
    product (a young store, a new product), the deal rule the forecaster improves on
    decides: BUY at a deal (at or below `DEAL_SHARE` × the 90-day average), else WAIT for
    one. The rules' own price reasons are not asked: on a shop with regular prices and
    sales they wait through a sale whose step down reads as a falling price, and buy at
    an unremarkable one near a low that never moved (docs/verdict.md, "Real markets").
    Not where another reason says wait or skip for what the history cannot show."""
    if any(x.code in _HARD_WAITS or x.polarity is Polarity.SKIP for x in r.items):
        return
    terms = _deal_terms(r, DEAL_SHARE)
    if terms is None:
        return
    paid, deal, numbers, shown = terms
    if paid <= deal:
        r.add("deal_buy", Polarity.BUY, numbers, shown)
    else:
        r.add("deal_wait", Polarity.WAIT, numbers, shown)


def _deal_terms(
    r: _Reasons, share: float
) -> tuple[float, float, dict[str, float | int | str], dict[str, object]] | None:
    """What one unit costs now against a deal at `share` of its 90-day average, with the
    numbers and shown values a deal reason's sentence takes; None without a 90-day
    average."""
    s = r.sheet
    paid, window = _paid(s), s.window(90)
    if paid is None or window is None or window.avg is None:
        return None
    deal = share * window.avg
    numbers: dict[str, float | int | str] = {
        "current": paid,
        "deal_price": round(deal, 2),
        "avg90": window.avg,
        "deal_pct": round(100 * (1 - share), 1),
    }
    shown: dict[str, object] = {
        "current": r.money(paid),
        "deal_price": r.money(deal),
        "avg90": r.money(window.avg),
        "deal_pct": number(100 * (1 - share)),
    }
    return paid, deal, numbers, shown


def _no_deal_yet(r: _Reasons, t: Thresholds) -> None:
    """A WAIT that no reason asks for (a fair price, nothing pointing either way) still
    says what to wait for: the price at which these rules turn BUY, `delta_90d_pct` under
    the 90-day average (`_average_delta`'s below-average reason). Added once the verdict is
    chosen and weighing nothing, it words the verdict and never makes it; without it such a
    WAIT led with stock left, a distrusted "was" price, or nothing at all."""
    if any(x.polarity is Polarity.WAIT for x in r.items):
        return
    terms = _deal_terms(r, 1 - t.delta_90d_pct / 100)
    if terms is not None and terms[0] > terms[1]:
        r.add("no_deal_yet", Polarity.WAIT, terms[2], terms[3])


def _score(reasons: list[Reason], polarity: Polarity) -> float:
    return sum(_WEIGHTS.get(x.code, 0.0) for x in reasons if x.polarity is polarity)


def _choose(
    reasons: list[Reason], priced: bool, sheet: FactSheet, t: Thresholds
) -> tuple[VerdictKind, float]:
    skip = _score(reasons, Polarity.SKIP)
    if skip:
        strength = min(MAX_CONFIDENCE, 0.6 + 0.1 * skip)
        return VerdictKind.SKIP, _clamp(strength * _review_evidence(reasons, sheet, t))
    if not priced:
        return VerdictKind.INSUFFICIENT_DATA, 0.9
    buy = _score(reasons, Polarity.BUY)
    wait = _score(reasons, Polarity.WAIT)
    codes = {x.code for x in reasons}
    history = 0.8 + 0.2 * min(1.0, sheet.days_tracked / 90)
    if codes & _HARD_WAITS:
        return VerdictKind.WAIT, _clamp((0.6 + 0.08 * wait) * history)
    decides = next((x for x in reasons if x.code in _DECIDES), None)
    if decides is not None:
        kind = VerdictKind.WAIT if decides.polarity is Polarity.WAIT else VerdictKind.BUY
        confidence = float(decides.numbers.get("confidence", DEAL_CONFIDENCE))
        return kind, _clamp(confidence * history)
    if buy > wait:
        return VerdictKind.BUY, _clamp((0.5 + 0.1 * (buy - wait)) * history)
    if wait > buy:
        return VerdictKind.WAIT, _clamp((0.5 + 0.1 * (wait - buy)) * history)
    fair = VerdictKind.BUY if "well_rated" in codes else VerdictKind.WAIT
    return fair, _clamp(0.5 * history)


def _review_evidence(reasons: list[Reason], sheet: FactSheet, t: Thresholds) -> float:
    """0.8 to 1: a quality judgement on 50 reviews is surer than one on 10.

    Counts the reviews behind the skip reasons: all of them for the floor, the recent
    ones for a falling rating. A skip on the price alone (over the budget at the low)
    rests on the price history instead: 90 days of it are as sure as it gets.
    """
    codes = {x.code for x in reasons if x.polarity is Polarity.SKIP}
    if not codes & {"quality_floor", "rating_falling"}:
        return 0.8 + 0.2 * min(1.0, sheet.days_tracked / 90)
    behind = max(
        sheet.rating.count if "quality_floor" in codes else 0,
        sheet.rating.recent_count if "rating_falling" in codes else 0,
    )
    return 0.8 + 0.2 * min(1.0, behind / t.reviews_for_full_confidence)


def _clamp(value: float) -> float:
    return round(min(MAX_CONFIDENCE, max(0.05, value)), 2)


_SUPPORTS = {
    VerdictKind.BUY: Polarity.BUY,
    VerdictKind.WAIT: Polarity.WAIT,
    VerdictKind.SKIP: Polarity.SKIP,
    VerdictKind.INSUFFICIENT_DATA: Polarity.INFO,
}


def _ordered(reasons: list[Reason], kind: VerdictKind) -> tuple[Reason, ...]:
    """Reasons that carry the verdict first, by weight; then the rest as they came."""
    lead = _SUPPORTS[kind]
    return tuple(
        sorted(
            reasons,
            key=lambda x: (x.polarity is not lead, -_WEIGHTS.get(x.code, 0.0)),
        )
    )
