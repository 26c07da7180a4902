"""Money as a shopper of each language reads it, from CLDR (Babel).

One form per language, CLDR's standard currency symbol in that language's main locale
(en-US, zh-CN, ja-JP), with the currency's own minor units:

| currency | English | Chinese | Japanese |
| --- | --- | --- | --- |
| USD | $242.35 | US$242.35 | $242.35 |
| CNY | CN¥89.90 | ¥89.90 | 元 89.90 |
| JPY | ¥5,490 | JP¥5,490 | ￥5,490 |
| EUR, GBP | €12.99, £12.99 | €12.99, £12.99 | €12.99, £12.99 |

CLDR settles the sign ¥, which is yuan to a Chinese reader and yen to everyone else: each
language writes the other currency with a prefix (CN¥ in English, JP¥ in Chinese, 元 in
Japanese), so a Chinese answer about a yen price never reads as yuan. Chinese writes US$
because a bare $ is any dollar there (HK$, NT$ are as common).

The page formats the same amounts with `Intl.NumberFormat(locale, {style: "currency"})`
in the same locales (http/static/app.js), which is ICU over the same CLDR data; two
things Babel does not do are done here so that the two agree to the character: amounts
are rounded half away from zero (ICU's default; Babel rounds half to even), and a symbol
that ends in a letter is kept from the digits by a no-break space (CLDR's currencySpacing:
"CHF 12.50", "元 89.90"). Every form is a sign before digits with "," grouping and "."
decimals, which the grounding guard reads as the amount (explain/guard.py).
"""

from __future__ import annotations

import unicodedata
from decimal import ROUND_HALF_UP, Decimal
from functools import cache

from babel import Locale
from babel.numbers import format_currency, get_currency_precision, get_currency_symbol

LOCALES = {"en": "en_US", "zh": "zh_Hans_CN", "ja": "ja_JP"}
"""The CLDR locale each answer language formats money in (the page: en-US, zh-CN, ja-JP)."""
_SPACE = "\u00a0"


def money(amount: float, currency: str, language: str) -> str:
    """`amount` of `currency` as a reader of `language` ("en", "zh", "ja"; a tag such as
    "zh-CN" counts as its language, any other as English) reads it: "$242.35", "¥5,490"."""
    tag = language.lower()[:2]
    locale = _locale(tag if tag in LOCALES else "en")
    digits = get_currency_precision(currency)
    exact = Decimal(repr(amount)) if isinstance(amount, float) else Decimal(amount)
    rounded = exact.quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP)
    text = format_currency(rounded, currency, locale=locale)
    return _spaced(text, get_currency_symbol(currency, locale))


@cache
def _locale(language: str) -> Locale:
    return Locale.parse(LOCALES[language])


def _spaced(text: str, symbol: str) -> str:
    """CLDR's currencySpacing: a no-break space between digits and a symbol whose edge
    next to them is neither a symbol nor a space character."""
    at = text.find(symbol)
    if at < 0 or not symbol:
        return text
    before, after = text[:at], text[at + len(symbol) :]
    if after[:1].isdigit() and not _signlike(symbol[-1]):
        after = _SPACE + after
    if before[-1:].isdigit() and not _signlike(symbol[0]):
        before += _SPACE
    return before + symbol + after


def _signlike(char: str) -> bool:
    return unicodedata.category(char)[0] in "SZ"
