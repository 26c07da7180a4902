import itertools
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.explain.guard import GuardResult, allowed_numbers, check_grounding
from worthit.explain.guarded_stream import GuardedStream
from worthit.text.sentences import ends_sentence

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


def test_a_false_comparison_of_grounded_numbers_fails() -> None:
    """Issue 9: both numbers are facts, the claim between them is false."""
    sheet = make_sheet(current_price=260.79, all_time_low=260.19)
    grounds = allowed_numbers(sheet, make_verdict(reasons=()))
    text = "$260.79, which is lower than the all-time low of $260.19"
    result = check_grounding(text, grounds)
    assert not result.ok
    assert result.ungrounded == ()
    assert result.false_comparisons == (text,)
    assert check_grounding(f"Now {text}.", grounds).false_comparisons == (text,)


def test_a_true_comparison_passes() -> None:
    text = "$260.19, lower than the 90-day average of $280.00."
    assert check_grounding(text, allowed("260.19", "280", "90")) == GuardResult(
        ok=True, numbers=("260.19", "90", "280.00"), ungrounded=()
    )


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("At $299 it is higher than the all-time low of $249.", True),
        ("At $249 it is higher than the 90-day low of $279.", False),
        ("$299 is above the all-time low of $249.", True),
        ("$249 is above the 90-day low of $279.", False),
        ("$279, still below the list price of $349.", True),
        ("$349, which is below the 90-day low of $279.", False),
        ("$279, which is below the 90-day low of $279.", False),  # equal is not below
        ("$259, under the list price of $349.", True),
        ("$259, over the list price of $349.", False),
        ("$349, well over the sale price of $259.", True),
        ("$259 is less than $299.", True),
        ("$299 is less than $259.", False),
        ("$299, more than the 90-day low of $279.", True),
        ("$299, cheaper than the list price of $349.", True),
        ("$349, cheaper than $299 today.", False),
        ("$349, more expensive than the $299 it sold for last week.", True),
        ("$299 exceeds the 90-day low of $279.", True),
        ("$249 exceeds the 90-day low of $279.", False),
        ("3.2万, which is higher than 2.8万.", True),  # values after their multipliers
        ("现价260.79元，低于历史最低价260.19元。", False),
        ("现价260.19元，低于90天均价280元。", True),
        ("现价299元，高于历史最低价249元。", True),
        ("现价249元，高于90天最低价279元。", False),
        ("现价260.79元，比历史最低价260.19元还低。", False),
        ("现价260.19元，比90天均价280元便宜。", True),
        ("现价349元，比促销价259元贵。", True),
        ("现价259元，比原价349元高。", False),
        ("299元高于249元", True),
        ("249元高于279元", False),
    ],
)
def test_comparisons_must_hold_as_written(text: str, ok: bool) -> None:
    grounds = allowed("260.79", "260.19", "280", "90", "299", "249", "279", "349", "259")
    grounds |= allowed("32000", "28000")
    result = check_grounding(text, grounds)
    assert result.ungrounded == ()
    assert result.ok is ok
    assert len(result.false_comparisons) == (0 if ok else 1)


@pytest.mark.parametrize(
    "text",
    [
        "$260.79, lower than usual.",  # one side is no number
        "$260.79, lower than the all-time low.",
        "现价260.79元，低于平时。",
        "现价260.79元，比平时便宜。",
        "It is 12% lower than $300.",  # a percentage against a price
        "It is only 2.4% above its all-time low of $249.00.",
        "$260.79 is not lower than the all-time low of $260.19.",  # negations are skipped
        "现价260.79元，不低于历史最低价260.19元。",
        "现价260.79元，不比历史最低价260.19元低。",
        "At $280, it is $20 higher than the all-time low of $260.",  # $20 is a difference
        "The price is $20 higher than the all-time low of $260.",
        "现价280元，比历史最低价260元高20元，高于90天均价270元。",
        "Down from $300, below the 90-day average of $280.",  # $300 is where it started
        "$260, lower than the $280 average, lower than the $270 list price.",
        "现价260元，低于均价280元，也低于上月的270元。",
        "In 30 days it fell 3.2%, above the 90-day low of 279.",  # a duration is no side
        "Rated 4.3/5 by 128 buyers, lower than 4.5.",  # a ratio is no side
        "$260, lower than the 618 sale price of $259.",  # which number? skipped
        "$259.00, $1 less than the 618 sale.",
        "$260, less than or equal to $260.",
        "$300, more than half the $400 list price.",
        "The NC700 is below $800.",  # a model code is no number of its own
        "$260, up 3% over 30 days.",
        "比上周便宜15%，现价260元。",
    ],
)
def test_comparisons_that_cannot_be_read_for_sure_are_not_judged(text: str) -> None:
    numbers = ("260.79", "260.19", "300", "12", "2.4", "249", "280", "20", "260", "270")
    grounds = allowed(*numbers, "30", "3.2", "279", "4.3", "5", "128", "4.5", "618")
    grounds |= allowed("259", "1", "400", "700", "800", "3", "90", "15")
    result = check_grounding(text, grounds)
    assert result.false_comparisons == ()
    assert result.ok, result


_PRICES = st.decimals(min_value=1, max_value=10**6, places=2, allow_nan=False)
_SENTENCES = [
    ("${a:,.2f}, which is {word} the all-time low of ${b:,.2f}.", "lower than", "higher than"),
    ("${a:,.2f} is {word} the 90-day average of ${b:,.2f}.", "below", "above"),
    ("At ${a:,.2f}, it is {word} ${b:,.2f}.", "cheaper than", "more expensive than"),
    ("${a:,.2f}, just {word} the list price of ${b:,.2f}", "under", "over"),
    ("现价{a:.2f}元，{word}历史最低价{b:.2f}元。", "低于", "高于"),
    ("现价{a:.2f}元，比历史最低价{b:.2f}元{word}。", "低", "高"),
    ("{a:.2f}元比{b:.2f}元{word}", "便宜", "贵"),
]


@settings(max_examples=300)
@given(_PRICES, _PRICES, st.sampled_from(_SENTENCES))
def test_a_comparison_passes_with_the_right_word_and_fails_with_the_wrong_one(
    a: Decimal, b: Decimal, sentence: tuple[str, str, str]
) -> None:
    template, lower, higher = sentence
    grounds = {a, b, Decimal(90)}

    def ok(word: str) -> bool:
        return check_grounding(template.format(a=a, b=b, word=word), grounds).ok

    if a == b:
        assert not ok(lower) and not ok(higher)
    else:
        right, wrong = (lower, higher) if a < b else (higher, lower)
        assert ok(right)
        assert not ok(wrong)


@settings(max_examples=100, deadline=None)
@given(_PRICES, _PRICES, st.sampled_from(_SENTENCES), st.data())
def test_a_true_comparison_is_never_refused_while_it_streams(
    a: Decimal, b: Decimal, sentence: tuple[str, str, str], data: st.DataObject
) -> None:
    """The streaming guard checks every sentence as it completes, whatever the token cuts:
    "lower than the 90-d" must not be read as a comparison with 90."""
    template, lower, higher = sentence
    if a == b:
        return
    text = template.format(a=a, b=b, word=lower if a < b else higher)
    if not ends_sentence(text):  # the stream shows whole sentences only
        text += "。" if "元" in text else "."
    cuts = data.draw(st.lists(st.integers(0, len(text)), max_size=len(text)))
    bounds = sorted({0, len(text), *cuts})
    stream = GuardedStream({a, b, Decimal(90)}, max_sentences=5)
    for start, end in itertools.pairwise(bounds):
        stream.feed(text[start:end])
    stream.finish()
    assert stream.shown == text


@pytest.mark.parametrize(
    ("text", "ok"),
    [
        ("At $299, below the 90-day average of $309.25 and above the low of $249.", True),
        ("At $299, below the 90-day average of $309.25 and above the low of $349.", False),
        ("$260, lower than the $280 average, lower than the $270 list price.", True),
        ("$260, lower than the $280 average, lower than the $250 low.", False),
        ("现价299元，低于90天均价309.25元，高于历史最低价249元。", True),
        ("现价299元，低于90天均价309.25元，高于历史最低价349元。", False),
        ("现价299元，比90天均价309.25元低，比历史最低价249元高。", True),
        ("现价299元，比90天均价309.25元低，比历史最低价349元高。", False),
        # "which" may mean the average: the second comparison is not judged
        ("At $299, below the 90-day average of $309.25, which is above the list of $349.", True),
    ],
)
def test_a_chain_of_comparisons_compares_with_its_first_number(text: str, ok: bool) -> None:
    grounds = allowed("299", "309.25", "249", "349", "260", "280", "270", "250", "90")
    result = check_grounding(text, grounds)
    assert result.ok is ok
    assert len(result.false_comparisons) == (0 if ok else 1)
