"""Time as the store keeps it: integer milliseconds since the epoch, UTC."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, date, datetime

DAY_MS = 86_400_000

Clock = Callable[[], int]
"""What "now" is, in epoch milliseconds: `now_ms` in a service, a fixed moment for an
as-of answer or a test that must not depend on the day it runs."""


def to_ms(moment: datetime) -> int:
    """Naive datetimes are taken as UTC so that an import never depends on the host's zone."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def iso(ms: int) -> str:
    return from_ms(ms).strftime("%Y-%m-%dT%H:%M:%SZ")


def day_iso(ms: int) -> str:
    return from_ms(ms).date().isoformat()


def date_to_ms(day: date) -> int:
    return to_ms(datetime(day.year, day.month, day.day, tzinfo=UTC))


def now_ms() -> int:
    return int(datetime.now(tz=UTC).timestamp() * 1000)


def fixed_clock(ms: int) -> Clock:
    """A clock that always reads `ms`."""
    return lambda: ms
