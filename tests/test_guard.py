from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.explain.guard import GuardResult, allowed_numbers, check_grounding

from factories import make_promotion, make_reason, make_sheet, make_verdict


def allowed(*values: str) -> frozenset[Decimal]:
    return frozenset(Decimal(v) for v in values)


@pytest.mark.parametrize(
    ("text", "span", "value"),
    [
        ("$1,299", "1,299", "1299"),
        ("1299.00", "1299.00", "1299"),
        ("1,299.5", "1,299.5", "1299.5"),
        ("¥249", "249", "249"),
        ("￥２４９", "249", "249"),
        ("USD 299", "299", "299"),
        ("299美元", "299", "299"),
        ("249元", "249", "249"),
        ("12%", "12", "12"),
        ("4.5 stars", "4.5", "4.5"),
        ("3.2万", "3.2万", "32000"),
        ("1.3k", "1.3k", "1300"),
        ("down 3.2%", "3.2", "-3.2"),
    ],
)
def test_reads_every_format(text: str, span: str, value: str) -> None:
    result = check_grounding(f"Now {text}, really.", {abs(Decimal(value))})
    assert result == GuardResult(ok=True, numbers=(span,), ungrounded=())
    assert not check_grounding(f"Now {text}, really.", {Decimal("7")}).ok


def test_reads_both_ends_of_ranges_and_ratings() -> None:
    assert check_grounding("ships in 5-10 days", allowed("5", "10")).ok
    assert check_grounding("ships in 5-10 days", allowed("5")).ungrounded == ("10",)
    assert check_grounding("rated 4.5/5", allowed("4.5", "5")).numbers == ("4.5", "5")


@pytest.mark.parametrize(
    ("text", "fact", "ok"),
    [
        ("4.3", "4.2857", True),  # rounded to the places written
        ("4.2", "4.2857", True),  # truncated
        ("4.30", "4.2857", False),  # claims more precision than the fact has
        ("299", "299.4", True),
        ("299", "299.99", True),
        ("300", "299.4", False),
        ("299.00", "299", True),
        ("3万", "32000", True),
        ("3.3万", "32000", False),
        ("$279", "299", False),
        ("2 left", "2.7", False),  # a whole number under 10 is rounded, never truncated
        ("3 left", "2.7", True),
        ("2 left", "2.5", True),  # half-even
        ("12", "12.7", True),
    ],
)
def test_rounding_follows_the_text(text: str, fact: str, ok: bool) -> None:
    assert check_grounding(text, allowed(fact)).ok is ok


def test_text_without_numbers_is_grounded() -> None:
    assert check_grounding("A good buy; wait for nothing.", frozenset()) == GuardResult(
        ok=True, numbers=(), ungrounded=()
    )


def test_allowed_numbers_cover_the_facts() -> None:
    sheet = make_sheet(percentile_90d=0.35)
    nums = allowed_numbers(sheet, make_verdict(reasons=()))
    text = (
        "At $299.00 (list 349) it is 3.2% down in 30 days, above the 90-day low of 279 "
        "and the all-time low of $249 on 2025-11-28 (11月28日); 35th percentile, "
        "volatility 4.1%, rated 4.3/5 by 128 buyers, 42 left, 57 sold in 3 days, "
        "a 259 USD sale from March 20, tracked 184 days. The NC700 is fine."
    )
    assert check_grounding(text, nums).ungrounded == ()


def test_allowed_numbers_cover_the_reasons_and_nothing_per_call() -> None:
    verdict = make_verdict(
        reasons=(
            make_reason(
                numbers={"saving": 40.0, "pct": 11.46, "since": "2026-01-05"},
                text="比上周便宜3.2万分之一",
            ),
        )
    )
    nums = allowed_numbers(make_sheet(revision=7777, data_age_ms=1834), verdict)
    assert check_grounding("saves $40, 11.5% less, since Jan 5 2026, 3.2万", nums).ok
    assert check_grounding("revision 7777", nums).ungrounded == ("7777",)
    assert check_grounding("1834 ms old", nums).ungrounded == ("1834",)


def test_promotion_names_and_title_numbers_are_allowed() -> None:
    sheet = make_sheet(
        title="Aurora NC700 4K",
        upcoming_promotions=(make_promotion(name="618大促"),),
    )
    nums = allowed_numbers(sheet, make_verdict(reasons=()))
    assert check_grounding("The NC700 4K is cheaper in the 618 sale.", nums).ok


def test_invented_numbers_fail() -> None:
    nums = allowed_numbers(make_sheet(), make_verdict())
    assert check_grounding("Now $269, the lowest ever!", nums).ungrounded == ("269",)
    # 15 is neither a fact nor in a reason, however it could be derived.
    assert check_grounding("It is 15% off.", nums).ungrounded == ("15",)
    assert check_grounding("现在只要199元，比平时便宜15%", nums).ungrounded == ("199", "15")
    assert check_grounding("Top 1 seller for 2 years", nums).ungrounded == ("1", "2")


@settings(max_examples=150)
@given(
    st.decimals(min_value=0, max_value=10**7, places=2, allow_nan=False),
    st.sampled_from(["${:,.2f}", "{:.2f} USD", "¥{:,.0f}", "{:.1f}%", "{:.0f}元"]),
)
def test_any_formatting_of_a_fact_passes(value: Decimal, template: str) -> None:
    assert check_grounding(f"costs {template.format(value)} today", {value}).ok


@settings(max_examples=150)
@given(st.decimals(min_value=1, max_value=10**6, places=2, allow_nan=False))
def test_a_different_price_fails(value: Decimal) -> None:
    assert not check_grounding(f"${value + 1:,.2f}", {value}).ok


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("The all-time low was on 2025-11-28.", True),
        ("It hit its low on 11/28.", False),  # m/d or d/m? not read as a date
        ("The price decreased 28%.", False),  # "dec" in "decreased" is no month
        ("近28日销量很好。", False),  # 28 days, not the 28th
        ("历史最低价出现在11月。", True),
        ("历史最低价出现在11月28日。", True),
        ("Lowest on Nov 28, 2025.", True),
        ("Lowest on 28 November.", True),
        ("Only 28 left!", False),  # 28 is a day of a date, not a count
        ("Only 11 left!", False),
        ("Only 17 left!", False),  # the hour of a timestamp is no fact at all
        ("Sold 2025 units.", True),  # a year is a number of its own (and rare as a count)
    ],
)
def test_month_and_day_numbers_pass_only_inside_dates(text: str, ok: bool) -> None:
    sheet = make_sheet(stock=42, all_time_low_at="2025-11-28T17:00:00Z")
    assert check_grounding(text, allowed_numbers(sheet, make_verdict(reasons=()))).ok is ok


def test_a_full_date_must_be_one_of_the_dates_whole() -> None:
    sheet = make_sheet(all_time_low_at="2025-11-28T17:00:00Z", first_seen="2025-09-11T00:00:00Z")
    grounds = allowed_numbers(sheet, make_verdict(reasons=()))
    assert check_grounding("Its low was on 2025-11-28.", grounds).ok
    assert check_grounding("Tracked since 2025-9-11.", grounds).ok
    # 2025, 11 and 9 are all parts of real dates; this date is none of them
    result = check_grounding("Its low was on 2025-11-09, really.", grounds)
    assert result.ungrounded == ("2025-11-09",)


def test_numbers_in_a_title_are_numbers_even_when_they_look_like_a_date() -> None:
    sheet = make_sheet(title="Halden Junior 24 Bike, Size 10/11")
    grounds = allowed_numbers(sheet, make_verdict(reasons=()))
    assert check_grounding("It fits size 11 riders on a 24 frame.", grounds).ok
