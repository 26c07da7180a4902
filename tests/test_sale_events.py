"""Calendar sale events: the calendar's dates, the past occurrences measured on a
hand-built history as of a moment, and the WAIT rule at its boundaries in both languages."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from worthit.decide.rules import DEFAULT_THRESHOLDS as T
from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, Reason, VerdictKind
from worthit.explain.guard import allowed_numbers, check_grounding
from worthit.facts.builder import FactsBuilder
from worthit.facts.sale_calendar import (
    DEFAULT_EVENTS,
    CalendarEvent,
    black_friday,
    coming_events,
)
from worthit.facts.sheet import FactSheet
from worthit.market.entities import PricePoint
from worthit.market.records import PriceRecord, ProductRecord
from worthit.market.store import MarketStore
from worthit.text.time import date_to_ms, to_ms

from factories import make_event, make_plain_sheet, make_promotion


@pytest.mark.parametrize(
    ("year", "day"), [(2024, date(2024, 11, 29)), (2025, date(2025, 11, 28)),
                      (2026, date(2026, 11, 27)), (2030, date(2030, 11, 29))],
)  # fmt: skip
def test_black_friday_is_the_day_after_the_fourth_thursday(year: int, day: date) -> None:
    assert black_friday(year) == day


def test_the_default_calendar_windows() -> None:
    windows = {e.key: e.window(2026) for e in DEFAULT_EVENTS}
    assert windows == {
        "618": (date(2026, 6, 16), date(2026, 6, 18)),
        "double11": (date(2026, 11, 10), date(2026, 11, 11)),
        "black_friday": (date(2026, 11, 27), date(2026, 11, 30)),
        "double12": (date(2026, 12, 12), date(2026, 12, 12)),
    }


def _daily(first: date, last: date, price: Any) -> list[PricePoint]:
    """A price at noon each day; `price(day)` says which."""
    days = (last - first).days + 1
    return [
        PricePoint(date_to_ms(d) + 12 * 3_600_000, price(d), "USD")
        for d in (first + timedelta(days=i) for i in range(days))
    ]


def _sale_price(d: date) -> float:
    """100, and 80 on Double 12 2024 and 85 on Double 12 2025."""
    return {date(2024, 12, 12): 80.0, date(2025, 12, 12): 85.0}.get(d, 100.0)


PRICES = _daily(date(2024, 10, 1), date(2026, 12, 31), _sale_price)


def _until(moment: datetime) -> list[PricePoint]:
    return [p for p in PRICES if p.ts_ms <= to_ms(moment)]


@pytest.mark.parametrize(("today", "days"), [(date(2026, 11, 12), 30), (date(2026, 12, 11), 1)])
def test_an_event_within_the_horizon_is_coming_with_its_past(today: date, days: int) -> None:
    moment = datetime(today.year, today.month, today.day, 23, tzinfo=UTC)
    events = coming_events(_until(moment), to_ms(moment))
    double12 = next(e for e in events if e.key == "double12")
    assert double12.days_until == days
    assert double12.past_discounts_pct == (15.0, 20.0)
    assert double12.past_years == (2025, 2024)


@pytest.mark.parametrize("today", [date(2026, 11, 11), date(2026, 12, 12)])
def test_outside_the_horizon_or_under_way_is_not_coming(today: date) -> None:
    moment = datetime(today.year, today.month, today.day, 23, tzinfo=UTC)
    assert "double12" not in {e.key for e in coming_events(_until(moment), to_ms(moment))}


def test_an_occurrence_counts_only_once_its_window_has_ended() -> None:
    custom = CalendarEvent("d", "Day", "日", lambda y: date(y, 12, 12))
    at_sale = datetime(2025, 12, 12, 23, tzinfo=UTC)
    before = datetime(2025, 11, 20, tzinfo=UTC)
    (event,) = coming_events(_until(before), to_ms(before), [custom])
    assert event.past_discounts_pct == (20.0,)
    assert coming_events(_until(at_sale), to_ms(at_sale), [custom]) == ()


@pytest.mark.parametrize(("kept_from", "measured"), [(date(2024, 12, 2), True),
                                                    (date(2024, 12, 3), False)])  # fmt: skip
def test_a_month_before_needs_ten_prices(kept_from: date, measured: bool) -> None:
    """Double 12 2024 with only the days from `kept_from` in the month before it."""
    gap = range(date_to_ms(date(2024, 11, 1)), date_to_ms(kept_from))
    moment = datetime(2025, 11, 20, tzinfo=UTC)
    cut = [p for p in _until(moment) if p.ts_ms not in gap]
    (event,) = (e for e in coming_events(cut, to_ms(moment)) if e.key == "double12")
    assert event.past_discounts_pct == ((20.0,) if measured else ())


def test_the_builder_measures_from_rows_up_to_its_moment_only() -> None:
    store = MarketStore(":memory:")
    store.apply([ProductRecord(sku="P", title="P", brand="B", category="tvs")])
    store.apply([PriceRecord(sku="P", ts=datetime.fromtimestamp(p.ts_ms / 1000, UTC),
                             price=p.price) for p in PRICES])  # fmt: skip
    at = to_ms(datetime(2025, 12, 1, tzinfo=UTC))
    builder = FactsBuilder(store)
    sheet = builder.build("P", at_ms=at)
    assert sheet is not None
    (event,) = (e for e in sheet.coming_events if e.key == "double12")
    assert event.past_discounts_pct == (20.0,)  # 2025's sale is still to come
    history = builder.history("P")
    assert history is not None and builder.build_from(history, at).coming_events == (
        sheet.coming_events
    )


# --- the rule -------------------------------------------------------------------------


def neutral(**overrides: Any) -> FactSheet:
    """An ordinary price of 300 with a 30-day median of 300; no sale announced."""
    return make_plain_sheet(**overrides)


def reason(sheet: FactSheet, language: str = "en") -> Reason | None:
    return next((r for r in decide_verdict(sheet, language).reasons if r.code == "sale_event"),
                None)  # fmt: skip


def test_wait_says_when_how_much_and_on_what_evidence() -> None:
    sheet = neutral(coming_events=(make_event(),))
    verdict = decide_verdict(sheet)
    assert verdict.kind is VerdictKind.WAIT and verdict.reasons[0].code == "sale_event"
    found = verdict.reasons[0]
    assert found.polarity is Polarity.WAIT
    assert found.text == (
        "Double 12 is in 11 days; at its last 2 Double 12 sales this product was 18% to 21% "
        "below the 30 days before, which would put it at $237.00 to $246.00 (today $300.00)."
    )
    zh = reason(sheet, "zh")
    assert zh is not None and zh.text == (
        "11天后是双12；过去2次双12，它的价格比此前30天低18%至21%，照此约为US$237.00至US$246.00"
        "（现价US$300.00）。"
    )


def test_one_past_occurrence_is_said_as_one() -> None:
    sheet = neutral(coming_events=(make_event(past_discounts_pct=(12.0,), past_years=(2025,)),))
    found = reason(sheet)
    assert found is not None and found.numbers["count"] == 1
    assert found.text.startswith("Double 12 is in 11 days; at the last Double 12 this product")
    zh = reason(sheet, "zh")
    assert zh is not None and zh.text.startswith("11天后是双12；上一次双12")


@pytest.mark.parametrize(("low", "fires"), [(5.0, True), (4.9, False), (0.0, False)])
def test_only_when_the_least_saving_is_worth_the_wait(low: float, fires: bool) -> None:
    sheet = neutral(coming_events=(make_event(past_discounts_pct=(20.0, low)),))
    assert (reason(sheet) is not None) is fires
    assert T.event_saving_pct == 5.0


def test_saving_is_against_todays_price_not_the_months() -> None:
    event = make_event(past_discounts_pct=(10.0,), past_years=(2025,))
    assert reason(neutral(coming_events=(event,), current_price=284.21)) is not None
    assert reason(neutral(coming_events=(event,), current_price=284.0)) is None


@pytest.mark.parametrize(("days", "fires"), [(30, True), (31, False)])
def test_within_the_horizon(days: int, fires: bool) -> None:
    sheet = neutral(coming_events=(make_event(days_until=days),))
    assert (reason(sheet) is not None) is fires


def test_no_past_occurrence_no_wait() -> None:
    sheet = neutral(coming_events=(make_event(past_discounts_pct=(), past_years=()),))
    assert reason(sheet) is None


def test_an_announced_sale_speaks_instead() -> None:
    promo = make_promotion(price=250.0, days_until_start=5)
    sheet = neutral(coming_events=(make_event(),), upcoming_promotions=(promo,))
    codes = {r.code for r in decide_verdict(sheet).reasons}
    assert "upcoming_sale" in codes and "sale_event" not in codes


def test_a_strong_buy_outweighs_a_calendar_wait() -> None:
    sheet = neutral(coming_events=(make_event(),), current_price=250.0,
                    percentile_90d=5.0)  # fmt: skip
    assert decide_verdict(sheet).kind is VerdictKind.BUY


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_number_the_reason_writes_is_grounded(language: str) -> None:
    sheet = neutral(coming_events=(make_event(),))
    verdict = decide_verdict(sheet, language)
    text = next(r.text for r in verdict.reasons if r.code == "sale_event")
    assert check_grounding(text, allowed_numbers(sheet, verdict)).ok
