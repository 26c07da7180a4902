"""Money as shoppers read it: "$1,299.00", "¥89.90", "12.50 CHF"."""

from __future__ import annotations

CURRENCY_SYMBOLS = {"USD": "$", "CNY": "¥", "EUR": "€", "GBP": "£", "JPY": "¥"}


def money(amount: float, currency: str) -> str:
    """The amount with two decimals and thousands separators, behind its symbol when the
    currency has one, else followed by its ISO code."""
    symbol = CURRENCY_SYMBOLS.get(currency)
    if symbol:
        return f"{symbol}{amount:,.2f}"
    return f"{amount:,.2f} {currency}"
