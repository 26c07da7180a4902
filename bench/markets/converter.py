"""What every market converter shares: the import lines it writes (`worthit import`'s JSON
lines format), so the markets agree on it (a price at a moment, with the seller's list price
only when it is above the price), and its command line's source and output options."""

from __future__ import annotations

import argparse
from datetime import UTC, date, datetime
from pathlib import Path


def converter_parser(doc: str) -> argparse.ArgumentParser:
    """--git-dir and --rev (the scraper's repository, read with `git show`) and --out."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--git-dir", required=True, help="the mirror's git directory")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--out", type=Path, required=True)
    return parser


def noon(day: date) -> datetime:
    """The moment a price carried for a whole day is recorded at."""
    return datetime(day.year, day.month, day.day, 12, tzinfo=UTC)


def price_line(
    sku: str, at: datetime, price: float, currency: str, list_price: float | None = None
) -> dict[str, object]:
    line: dict[str, object] = {
        "type": "price", "sku": sku, "ts": at.isoformat().replace("+00:00", "Z"),
        "price": price, "currency": currency,
    }  # fmt: skip
    if list_price is not None and list_price > price:
        line["list_price"] = list_price
    return line
