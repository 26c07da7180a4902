"""Money as each language reads it (CLDR through Babel), and the guard reading it back."""

from __future__ import annotations

from decimal import Decimal

import pytest
from babel.numbers import get_currency_precision, list_currencies
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.decide.rules import decide_verdict
from worthit.explain.guard import allowed_numbers, check_grounding
from worthit.explain.templates import template_explanation
from worthit.facts.sheet import FactSheet, WindowStats
from worthit.market.records import MAX_PRICE, minor_unit
from worthit.text.money import money

from factories import make_plain_sheet

LANGUAGES = ("en", "zh", "ja")
SHOP_CURRENCIES = ("USD", "CNY", "JPY", "EUR", "GBP", "VND")
NBSP = "\u00a0"


@pytest.mark.parametrize(
    ("currency", "amount", "en", "zh", "ja"),
    [
        ("USD", 242.35, "$242.35", "US$242.35", "$242.35"),
        ("CNY", 89.9, "CN¥89.90", "¥89.90", f"元{NBSP}89.90"),
        ("JPY", 5490.0, "¥5,490", "JP¥5,490", "￥5,490"),
        ("EUR", 12.99, "€12.99", "€12.99", "€12.99"),
        ("GBP", 1299.0, "£1,299.00", "£1,299.00", "£1,299.00"),
        ("VND", 1234567.0, "₫1,234,567", "₫1,234,567", "₫1,234,567"),
        ("CHF", 12.5, f"CHF{NBSP}12.50", f"CHF{NBSP}12.50", f"CHF{NBSP}12.50"),
    ],
)
def test_each_language_writes_cldr_symbols_and_minor_units(
    currency: str, amount: float, en: str, zh: str, ja: str
) -> None:
    """The forms Chromium's Intl.NumberFormat writes in en-US, zh-CN and ja-JP (the page),
    letter for letter, no-break space included."""
    assert [money(amount, currency, lang) for lang in LANGUAGES] == [en, zh, ja]


def test_yen_and_yuan_never_share_a_sign_within_a_language() -> None:
    for language in LANGUAGES:
        assert money(5490, "JPY", language) != money(5490, "CNY", language).replace(".00", "")


def test_a_language_tag_counts_as_its_language_and_any_other_as_english() -> None:
    assert money(242.35, "USD", "zh-CN") == "US$242.35"
    assert money(242.35, "USD", "fr") == "$242.35"


def test_halves_round_away_from_zero_as_the_page_does() -> None:
    """Babel alone rounds half to even ($12.34); ICU, and so the page, writes $12.35."""
    assert money(12.345, "USD", "en") == "$12.35"
    assert money(5490.5, "JPY", "en") == "¥5,491"


def _at_its_low(currency: str, price: float) -> FactSheet:
    return make_plain_sheet(
        currency=currency,
        current_price=price,
        all_time_low=price,
        windows=(
            WindowStats(30, 30, price, price * 1.1, price * 1.1),
            WindowStats(90, 90, price, price * 1.2, price * 1.2),
            WindowStats(180, 180, price, price * 1.2, price * 1.2),
        ),
    )


@pytest.mark.parametrize(
    ("currency", "price", "language", "written", "sentence"),
    [
        ("JPY", 5490.0, "en", "¥5,490", "Worth buying now because at ¥5,490 it is at its low."),
        ("USD", 242.35, "en", "$242.35", "Worth buying now: $242.35 is its all-time low."),
        ("JPY", 5490.0, "zh", "JP¥5,490", "值得现在买，因为现价JP¥5,490是历史最低价。"),
        ("USD", 242.35, "zh", "US$242.35", "值得现在买，因为现价US$242.35是历史最低价。"),
        ("CNY", 89.9, "ja", f"元{NBSP}89.90", f"今が買い時、元{NBSP}89.90は過去最安値。"),
    ],
)
def test_the_reasons_write_it_and_a_sentence_copying_them_passes_the_guard(
    currency: str, price: float, language: str, written: str, sentence: str
) -> None:
    sheet = _at_its_low(currency, price)
    verdict = decide_verdict(sheet, language)
    low = next(r for r in verdict.reasons if r.code == "at_all_time_low")
    assert written in low.text
    assert written in template_explanation(verdict, sheet)
    grounds = allowed_numbers(sheet, verdict)
    assert check_grounding(sentence, grounds).ok
    invented = sentence.replace(written, money(price + 1, currency, language))
    assert not check_grounding(invented, grounds).ok


@st.composite
def amounts(draw: st.DrawFn, currencies: tuple[str, ...]) -> tuple[str, Decimal]:
    """A currency and a price a shop can charge in it: at least one minor unit, at most the
    largest price accepted, in whole minor units and at most cents (the sheet's precision)."""
    currency = draw(st.sampled_from(currencies))
    places = min(get_currency_precision(currency), 2)
    step = Decimal(1).scaleb(-places)
    low = int(Decimal(repr(minor_unit(currency))) / step)
    units = draw(st.integers(min_value=low, max_value=int(Decimal(MAX_PRICE) / step)))
    return currency, units * step


ALL_CURRENCIES = tuple(sorted(list_currencies()))


@settings(max_examples=400, deadline=None)
@given(amounts(ALL_CURRENCIES), st.sampled_from(LANGUAGES))
def test_the_guard_reads_back_exactly_the_amount_written(
    priced: tuple[str, Decimal], language: str
) -> None:
    """format → the guard's reading → the same amount, for every currency CLDR knows."""
    currency, amount = priced
    text = f"Now {money(float(amount), currency, language)} today."
    result = check_grounding(text, {amount})
    assert result.ok and len(result.numbers) == 1, (text, result)
    unit = Decimal(1).scaleb(-get_currency_precision(currency))
    assert not check_grounding(text, {amount + unit}).ok
    assert not check_grounding(text, {amount - unit}).ok


_FALSE_CLAIMS = {
    "en": "{a}, which is lower than the all-time low of {b}.",
    "zh": "现价{a}，低于历史最低价{b}。",
    "ja": "{a}, which is lower than the all-time low of {b}.",
}


@settings(max_examples=200, deadline=None)
@given(amounts(SHOP_CURRENCIES), st.sampled_from(LANGUAGES), st.integers(1, 1000))
def test_a_false_comparison_between_written_amounts_is_caught(
    priced: tuple[str, Decimal], language: str, steps: int
) -> None:
    """A sign with letters (CN¥ in English, JP¥ in Chinese) is part of the amount, not a
    model code whose number the comparison check would pass over."""
    currency, low = priced
    high = low + steps * Decimal(1).scaleb(-get_currency_precision(currency))
    a, b = (money(float(v), currency, language) for v in (high, low))
    text = _FALSE_CLAIMS[language].format(a=a, b=b)
    result = check_grounding(text, {low, high})
    assert result.false_comparisons and not result.ungrounded, (text, result)
