"""What the store hands back: small immutable rows, cheap to build on the hot path."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Product:
    sku: str
    title: str
    brand: str
    category: str
    attributes: dict[str, Any] = field(default_factory=dict)
    aliases: tuple[str, ...] = ()
    revision: int = 0
    last_input_ms: int = 0


@dataclass(frozen=True, slots=True)
class PricePoint:
    ts_ms: int
    price: float
    currency: str
    list_price: float | None = None


@dataclass(frozen=True, slots=True)
class StockLevel:
    ts_ms: int
    quantity: int


@dataclass(frozen=True, slots=True)
class Review:
    review_id: str
    ts_ms: int
    rating: int
    text: str
    verified: bool


@dataclass(frozen=True, slots=True)
class Promotion:
    """An offer as recorded; which fields are set depends on `kind` (market/records.py)."""

    name: str
    starts_ms: int
    ends_ms: int
    price: float | None
    kind: str = "price"
    percent_off: float | None = None
    threshold: float | None = None
    save: float | None = None
    min_spend: float | None = None
    announced_ms: int | None = None
    """When it was announced; None for a row stored before announcements were kept, taken
    as known `facts.builder.PROMOTION_NOTICE_DAYS` before it starts."""


@dataclass(frozen=True, slots=True)
class SalesDay:
    day: str
    units: int


@dataclass(frozen=True, slots=True)
class SearchHit:
    sku: str
    title: str
    brand: str
    category: str
    aliases: tuple[str, ...]
