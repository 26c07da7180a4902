"""As-of moments: the one reading of `--as-of` and `as_of`, and which moments have an answer.

An as-of answer is the verdict worthit would have given at a past moment, from the rows
stamped up to it (docs/verdict.md, "As-of answers"). The CLI, the API and the backtest
name that moment the same way, so an answer given through one can be checked through
another.
"""

from __future__ import annotations

from datetime import date, datetime, timedelta

from worthit.text.time import date_to_ms, from_ms, iso, to_ms


def parse_as_of(text: str) -> int:
    """Epoch ms of an ISO 8601 time (no zone means UTC), or of a day's last millisecond
    when the text is a day alone, so that "as of 2026-11-20" includes all of that day.

    Raises ValueError, worded for the person who typed it, for anything else.
    """
    try:
        return end_of_day_ms(date.fromisoformat(text))
    except ValueError:
        pass  # not a day alone: a time, or nothing
    except OverflowError:
        raise ValueError(f"{text!r} is past the last day there is") from None
    try:
        moment = to_ms(datetime.fromisoformat(text))
        from_ms(moment)  # one that has no UTC date ("0001-01-01T00:00+01:00") is none
    except (ValueError, OverflowError):
        raise ValueError(f"expected an ISO 8601 time or day, got {text!r}") from None
    return moment


def end_of_day_ms(day: date) -> int:
    return date_to_ms(day + timedelta(days=1)) - 1


def check_as_of(at_ms: int, now_ms: int, first_data_ms: int | None) -> None:
    """Refuse a moment no answer can be given as of: one still to come (its rows may not
    exist yet), or one before the market's first price (nothing to answer from).

    Raises ValueError saying which.
    """
    if at_ms > now_ms:
        raise ValueError(
            f"{iso(at_ms)} is in the future (now is {iso(now_ms)}); a bare day means its end"
        )
    if first_data_ms is None:
        raise ValueError("the market has no prices yet, so nothing can be answered as of any time")
    if at_ms < first_data_ms:
        raise ValueError(f"{iso(at_ms)} is before the market's first data ({iso(first_data_ms)})")
