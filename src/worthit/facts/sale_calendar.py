"""The big sale events of the year, by date rule, and what they did to one product's price.

An event's price is measured the way a shopper meets it: the lowest price recorded in
the event's window against the median price of the 30 days before the window, so a
past Double 12 says "18 % below the month before", whatever the price was a year ago.
A product with no past occurrence of its own (new, or tracked for less than a year) falls
back on its category (`facts.category_events`): the median product's discount at the
past occurrences of the event, else at those of the calendar's other events.
The calendar lives in `facts` because the builder measures past occurrences; the rule
that turns them into a WAIT is `decide.rules`.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache

from worthit.facts.sheet import CategoryOccurrence, EventFact
from worthit.facts.stats import median
from worthit.market.entities import PricePoint
from worthit.text.time import DAY_MS, date_to_ms, from_ms

HORIZON_DAYS = 30
"""How far ahead an event is "coming": the backtest's horizon, and a wait a shopper accepts."""
BEFORE_DAYS = 30
"""The level an event's price is measured against: the median of the 30 days before it."""
MIN_BEFORE_OBSERVATIONS = 10
"""Prices needed in those 30 days for the level to mean anything (as `min_observations`)."""
OCCURRENCES_KEPT = 3


@dataclass(frozen=True)
class CalendarEvent:
    """A recurring sale: `day(year)` is its main day, the window runs `days_before` days
    before it to `days_after` days after it, inclusive."""

    key: str
    name_en: str
    name_zh: str
    day: Callable[[int], date]
    days_before: int = 0
    days_after: int = 0

    def window(self, year: int) -> tuple[date, date]:
        return _window(self, year)


@lru_cache(maxsize=1024)
def _window(event: CalendarEvent, year: int) -> tuple[date, date]:
    """Every sheet asks for the coming windows: worked out once per event and year."""
    main = event.day(year)
    return main - timedelta(days=event.days_before), main + timedelta(days=event.days_after)


def black_friday(year: int) -> date:
    """The day after the fourth Thursday of November (US Thanksgiving)."""
    first = date(year, 11, 1)
    thursday = first + timedelta(days=(3 - first.weekday()) % 7 + 21)
    return thursday + timedelta(days=1)


DEFAULT_EVENTS: tuple[CalendarEvent, ...] = (
    CalendarEvent("618", "618", "618", lambda y: date(y, 6, 18), days_before=2),
    CalendarEvent("double11", "Double 11", "双11", lambda y: date(y, 11, 11), days_before=1),
    CalendarEvent("black_friday", "Black Friday", "黑色星期五", black_friday, days_after=3),
    CalendarEvent("double12", "Double 12", "双12", lambda y: date(y, 12, 12)),
)
"""618 (JD.com, 18 June, with its last days), Double 11 (Tmall, 11 November, with the eve),
Black Friday through Cyber Monday, Double 12 (12 December). Pass others to `coming_events`."""


CategoryEvidence = Callable[
    [CalendarEvent, Sequence[CalendarEvent], int], tuple[CategoryOccurrence, ...]
]
"""(event, the calendar, as_of_ms) -> the category's past occurrences, as
`EventFact.category_past`."""


def coming_events(
    prices: Sequence[PricePoint],
    as_of_ms: int,
    events: Sequence[CalendarEvent] = DEFAULT_EVENTS,
    horizon_days: int = HORIZON_DAYS,
    category: CategoryEvidence | None = None,
    times: Sequence[int] | None = None,
) -> tuple[EventFact, ...]:
    """Events whose window starts after `as_of_ms` and within the horizon, soonest first,
    each with what its past occurrences did to this product's price, or, when it has no
    past occurrence, what `category` says they did to its category's.

    `prices` must already be cut at `as_of_ms`, in time order (`times`: their timestamps,
    when the caller has them); only occurrences whose window ended by then are measured.
    """
    today = from_ms(as_of_ms).date()
    coming = []
    for event in events:
        for year in (today.year, today.year + 1):
            starts, _ = event.window(year)
            days = (starts - today).days
            if 0 < days <= horizon_days:
                past = _past_discounts(prices, event, as_of_ms, year, times)
                typical = () if past or category is None else category(event, events, as_of_ms)
                coming.append(
                    EventFact(
                        key=event.key,
                        name_en=event.name_en,
                        name_zh=event.name_zh,
                        starts=starts.isoformat(),
                        days_until=days,
                        past_discounts_pct=tuple(pct for _, pct in past),
                        past_years=tuple(y for y, _ in past),
                        category_past=typical,
                    )
                )
    return tuple(sorted(coming, key=lambda e: (e.days_until, e.key)))


def _past_discounts(
    prices: Sequence[PricePoint],
    event: CalendarEvent,
    as_of_ms: int,
    year: int,
    times: Sequence[int] | None = None,
) -> list[tuple[int, float]]:
    """(year, % below the 30 days before) for the newest past occurrences, newest first."""
    if not prices:
        return []
    if times is None:
        times = [p.ts_ms for p in prices]
    found: list[tuple[int, float]] = []
    for past in range(year - 1, from_ms(prices[0].ts_ms).year - 1, -1):
        if occurrence_span(event, past)[1] > as_of_ms:
            continue
        discount = event_discount(prices, event, past, times)
        if discount is None:
            continue
        found.append((past, discount))
        if len(found) == OCCURRENCES_KEPT:
            break
    return found


@lru_cache(maxsize=1024)
def occurrence_span(event: CalendarEvent, year: int) -> tuple[int, int]:
    """[start, end) of the event's window in `year`, in epoch ms: the window's days whole."""
    starts, ends = event.window(year)
    return date_to_ms(starts), date_to_ms(ends) + DAY_MS


def measured_span(event: CalendarEvent, year: int) -> tuple[int, int]:
    """[start, end) of the prices an occurrence is measured on: the window and 30 days before."""
    start_ms, end_ms = occurrence_span(event, year)
    return start_ms - BEFORE_DAYS * DAY_MS, end_ms


def event_discount(
    prices: Sequence[PricePoint],
    event: CalendarEvent,
    year: int,
    times: Sequence[int] | None = None,
) -> float | None:
    """% the lowest price in the event's window in `year` sat below the median of the 30
    days before it (one decimal); None without a price in the window or MIN_BEFORE_OBSERVATIONS
    before it. `prices` in time order; `times` their timestamps, when the caller has them."""
    stamps = [p.ts_ms for p in prices] if times is None else times
    start_ms, end_ms = occurrence_span(event, year)
    during = prices[bisect_left(stamps, start_ms) : bisect_left(stamps, end_ms)]
    before = prices[
        bisect_left(stamps, start_ms - BEFORE_DAYS * DAY_MS) : bisect_left(stamps, start_ms)
    ]
    if not during or len(before) < MIN_BEFORE_OBSERVATIONS:
        return None
    level = median([p.price for p in before])
    low = min(p.price for p in during)
    return round(100.0 * (1 - low / level), 1)
