"""The grounding guard: every number the model writes must come from the facts.

A small model states invented prices with confidence and a shopper acts on prices, so
the explanation is shown only when each number in it traces back to the fact sheet or to
the verdict's reasons; otherwise the deterministic template replaces it. The guard is a
lookup, not arithmetic: a difference or a percentage passes only when the decision core
computed it and put it in a reason, which keeps the check cheap, explainable and strict.

Matching rule:

1. Numbers are read leniently: currency signs and words ($, ¥, US$, JP¥, CN¥, USD, 元, 美元;
   every form `worthit.text.money` writes) are ignored, "1,299" is 1299 ("," only groups:
   no language worthit answers in writes a decimal comma), "12%" is 12, "4.5/5" is 4.5 and
   5, the range "5-10" is 5 and 10, signs are dropped ("down 3.2%" for a trend of -3.2) and
   k/千/万/亿 multiply ("3.2万" is 32000). Chinese numerals are not read.
2. A written number passes when an allowed number, divided by the written multiplier and
   rounded half-up, half-even or truncated to the decimal places the text used, equals it:
   "4.3" and "4.2" pass for 4.2857, "299" for 299.4 and 299.99, "299.00" for 299, "4.30"
   fails. A whole number under 10 is not truncated: "2 left" does not pass for 2.7.
3. Allowed: every number of the sheet except its bookkeeping (revision, data age, as_of),
   with a 0..1 percentile also as 0..100; the years of its dates; numbers in the title,
   brand, category and promotion names (model code NC700 gives 700); every number in the
   verdict's reasons, in `numbers` and in `text`; and the labels the facts block prints: 3
   (sales in the last 3 days), 5 (the rating scale), 30 and 90.
4. The month and day of those dates pass only where the text writes a date: 11月29日,
   11月, or next to a month's name ("Nov 29", "29 March"). Anywhere
   else a 2 or a 29 must be a fact of its own: "only 2 left" fails unless 2 is. A full
   date (2026-11-29) must be one of the dates, whole: 2026-12-13 fails even when 12 and 13
   are days of other dates.
5. Nothing else is free: no small counts, no ordinals, no numbers from the question.
6. Grounded numbers can still make a false claim: where a comparison word joins two of
   them ("$260.79, which is lower than the all-time low of $260.19", "低于", "比…便宜"),
   their written values must be in that order (`worthit.explain.comparisons` says which
   shapes are read; any other is skipped, never refused).

Check whole sentences: a number split across two streamed tokens reads as two numbers.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import (
    ROUND_DOWN,
    ROUND_HALF_EVEN,
    ROUND_HALF_UP,
    Context,
    Decimal,
    DivisionByZero,
    InvalidOperation,
    Overflow,
)

from worthit.decide.verdict import Verdict
from worthit.explain.comparisons import Number, false_comparisons
from worthit.facts.sheet import FactSheet

_LABELS = frozenset(Decimal(n) for n in (3, 5, 30, 90))
_NUMBER = re.compile(
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<frac>\d+))?"
    r"(?:(?P<k>[kK])(?![A-Za-z])|(?P<cjk>[千万萬亿億]))?"
)
_MULTIPLIERS = {
    "k": Decimal(10**3),
    "K": Decimal(10**3),
    "千": Decimal(10**3),
    "万": Decimal(10**4),
    "萬": Decimal(10**4),
    "亿": Decimal(10**8),
    "億": Decimal(10**8),
}
_ISO_SPAN = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")
_ROUNDED = (ROUND_HALF_UP, ROUND_HALF_EVEN)
_ROUNDED_OR_CUT = (*_ROUNDED, ROUND_DOWN)
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\b\.?"
)
_DATE_SPANS = re.compile(
    r"\d{1,2}\s*月(?:\s*\d{1,2}\s*[日号])?"
    rf"|\b{_MONTH}\s*\d{{1,2}}\b|\b\d{{1,2}}\s+{_MONTH}",
    re.IGNORECASE,
)
"""Where a text writes a date in words; a month or day number is grounded only inside one.
ISO dates (`_ISO_SPAN`) are checked whole instead."""
# Our own context: the decimal module's default one is process-global and mutable.
_DECIMAL = Context(
    prec=60,
    rounding=ROUND_HALF_UP,
    Emin=-999_999,
    Emax=999_999,
    traps=[InvalidOperation, DivisionByZero, Overflow],
)


@dataclass(frozen=True, slots=True)
class GuardResult:
    ok: bool
    numbers: tuple[str, ...]
    """Every number found, as read after NFKC (multiplier included), in order."""
    ungrounded: tuple[str, ...]
    """The ones that matched no allowed number."""
    false_comparisons: tuple[str, ...] = ()
    """Each comparison between written numbers that does not hold, as written from its
    first number to its second ("260.79, which is lower than the all-time low of $260.19");
    `ok` exactly when this and `ungrounded` are empty."""

    @property
    def failure(self) -> tuple[str, tuple[str, ...]]:
        """Why the text fails, as a fallback reason and what it names: "ungrounded" and
        the numbers no fact backs, else "false_comparison" and the claims that do not hold."""
        if self.ungrounded or not self.false_comparisons:
            return "ungrounded", self.ungrounded
        return "false_comparison", self.false_comparisons


@dataclass(frozen=True, slots=True)
class Grounds:
    """What an explanation may write: numbers anywhere, month and day numbers in dates."""

    numbers: frozenset[Decimal]
    date_parts: frozenset[Decimal] = frozenset()
    dates: frozenset[str] = frozenset()
    """Full dates as YYYY-MM-DD."""


@dataclass(frozen=True, slots=True)
class _Written:
    text: str
    value: Decimal
    places: int
    multiplier: Decimal
    start: int
    end: int
    in_date: bool

    def matches(self, allowed: Decimal) -> bool:
        scaled = _DECIMAL.divide(allowed, self.multiplier)
        if scaled == self.value:
            return True
        quantum = Decimal(1).scaleb(-self.places)
        small_whole = self.places == 0 and self.value * self.multiplier < 10
        roundings = _ROUNDED if small_whole else _ROUNDED_OR_CUT
        try:
            return any(
                scaled.quantize(quantum, rounding=rounding, context=_DECIMAL) == self.value
                for rounding in roundings
            )
        except InvalidOperation:  # more digits than any price has: no rounding can match
            return False

    def grounded(self, grounds: Grounds) -> bool:
        if self.in_date and self.multiplier == 1 and self.value in grounds.date_parts:
            return True
        return any(self.matches(a) for a in grounds.numbers)


def allowed_numbers(sheet: FactSheet, verdict: Verdict) -> Grounds:
    """Every number an explanation of `verdict` about `sheet` may write (rules 3 and 4)."""
    allowed = set(_LABELS)
    allowed.update(_exact(v) for v in _sheet_numbers(sheet) if v is not None and math.isfinite(v))
    texts = [*_sheet_texts(sheet)]
    for reason in verdict.reasons:
        texts.append(reason.text)
        for number in reason.numbers.values():
            if isinstance(number, str):
                texts.append(number)
            elif math.isfinite(number):
                allowed.add(_exact(number))
    days = [m for date in _sheet_dates(sheet) if (m := _ISO_SPAN.match(date[:10]))]
    for text in texts:  # a title's "10/11" or "Junior 24" are numbers, not dates
        normal = unicodedata.normalize("NFKC", text)
        iso = list(_ISO_SPAN.finditer(normal))
        days += iso
        allowed.update(
            _DECIMAL.multiply(w.value, w.multiplier) for w in _scan(normal) if not _within(w, iso)
        )
    allowed.update(Decimal(day[1]) for day in days)  # a year is a number of its own
    date_parts = {Decimal(part) for day in days for part in day.groups()[1:]}
    return Grounds(frozenset(allowed), frozenset(date_parts), frozenset(map(_iso_day, days)))


def check_grounding(text: str, allowed: Grounds | Iterable[Decimal]) -> GuardResult:
    """Whether every number in `text` is allowed, after the rounding the text used, and
    every comparison between two of them holds."""
    grounds = allowed if isinstance(allowed, Grounds) else Grounds(frozenset(allowed))
    normal = unicodedata.normalize("NFKC", text)
    iso = list(_ISO_SPAN.finditer(normal))
    written = _scan(normal)
    ungrounded = [w.text for w in written if not _within(w, iso) and not w.grounded(grounds)]
    ungrounded += [m[0] for m in iso if _iso_day(m) not in grounds.dates]
    numbers = [
        Number(
            w.text,
            _DECIMAL.multiply(w.value, w.multiplier),
            w.start,
            w.end,
            w.in_date or _within(w, iso),
        )
        for w in written
    ]
    false = false_comparisons(normal, numbers)
    return GuardResult(
        ok=not ungrounded and not false,
        numbers=tuple(w.text for w in written),
        ungrounded=tuple(ungrounded),
        false_comparisons=false,
    )


def _scan(normal: str) -> list[_Written]:
    """The numbers in an NFKC-normalised text (full-width digits are digits to a reader)."""
    found = []
    dated = [m.span() for m in _DATE_SPANS.finditer(normal)]
    for match in _NUMBER.finditer(normal):
        frac = match["frac"] or ""
        digits = match["int"].replace(",", "") + (f".{frac}" if frac else "")
        suffix = match["k"] or match["cjk"]
        multiplier = _MULTIPLIERS[suffix] if suffix else Decimal(1)
        start, end = match.span()
        in_date = any(a <= start and end <= b for a, b in dated)
        value = Decimal(digits)
        found.append(_Written(match[0], value, len(frac), multiplier, start, end, in_date))
    return found


def _exact(value: float) -> Decimal:
    # repr, not the binary expansion: 4.35 is the 4.35 the facts block printed.
    return abs(Decimal(value) if isinstance(value, int) else Decimal(repr(value)))


def _within(written: _Written, dates: list[re.Match[str]]) -> bool:
    return any(d.start() <= written.start and written.end <= d.end() for d in dates)


def _iso_day(match: re.Match[str]) -> str:
    year, month, day = match.groups()
    return f"{year}-{int(month):02d}-{int(day):02d}"


def _sheet_numbers(sheet: FactSheet) -> Iterator[float | None]:
    yield from (
        sheet.current_price,
        sheet.list_price,
        sheet.all_time_low,
        sheet.all_time_high,
        sheet.percentile_90d,
        sheet.trend_30d_pct,
        sheet.volatility_90d_pct,
        sheet.days_tracked,
        sheet.observations,
        sheet.stock,
        sheet.sales_3d,
    )
    if sheet.percentile_90d is not None and 0 <= sheet.percentile_90d <= 1:
        yield sheet.percentile_90d * 100
    for window in sheet.windows:
        yield from (window.days, window.observations, window.min, window.avg, window.median)
    rating = sheet.rating
    yield from (
        rating.count,
        rating.mean,
        rating.bayesian,
        rating.prior_mean,
        rating.prior_weight,
        rating.recent_count,
        rating.recent_mean,
        rating.earlier_mean,
        rating.trend,
    )
    for promotion in (*sheet.active_promotions, *sheet.upcoming_promotions):
        yield from (promotion.price, promotion.days_until_start)


def _sheet_texts(sheet: FactSheet) -> Iterator[str]:
    yield from (sheet.title, sheet.brand, sheet.category)
    for promotion in (*sheet.active_promotions, *sheet.upcoming_promotions):
        yield promotion.name


def _sheet_dates(sheet: FactSheet) -> Iterator[str]:
    dates = (sheet.current_price_at, sheet.all_time_low_at, sheet.first_seen, sheet.stock_at)
    yield from (d for d in dates if d is not None)
    for promotion in (*sheet.active_promotions, *sheet.upcoming_promotions):
        yield from (promotion.starts, promotion.ends)
