"""The records the market is made of, validated at the edge.

One pydantic model per import line type; the same models are what the store accepts,
so the simulator, the importer and (later) the event bus all go through one validation.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from worthit.market.timeutil import to_ms

Sku = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)]
MAX_COUNT = 2**63 - 1
"""SQLite's INTEGER is 64-bit: a larger count would pass validation and fail in the store."""
MAX_PRICE = 1e12
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Price = Annotated[float, Field(gt=0, le=MAX_PRICE)]
Currency = Annotated[
    str, StringConstraints(strip_whitespace=True, to_upper=True, pattern=r"^[A-Za-z]{3}$")
]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    sku: Sku


class ProductRecord(_Record):
    type: Literal["product"] = "product"
    title: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300)]
    brand: Annotated[str, StringConstraints(strip_whitespace=True, max_length=100)] = ""
    category: Annotated[str, StringConstraints(strip_whitespace=True, max_length=100)] = ""
    attributes: dict[str, Any] = Field(default_factory=dict)
    aliases: list[Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]] = Field(
        default_factory=list
    )


class PriceRecord(_Record):
    type: Literal["price"] = "price"
    ts: datetime
    price: Price
    currency: Currency = "USD"
    list_price: Price | None = None

    @property
    def ts_ms(self) -> int:
        return to_ms(self.ts)


class StockRecord(_Record):
    type: Literal["stock"] = "stock"
    ts: datetime
    quantity: Count

    @property
    def ts_ms(self) -> int:
        return to_ms(self.ts)


class ReviewRecord(_Record):
    type: Literal["review"] = "review"
    review_id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
    ts: datetime
    rating: int = Field(ge=1, le=5)
    text: str = Field(default="", max_length=20_000)
    verified: bool = False

    @property
    def ts_ms(self) -> int:
        return to_ms(self.ts)


class PromotionRecord(_Record):
    type: Literal["promotion"] = "promotion"
    name: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100)]
    starts: datetime
    ends: datetime
    price: Price

    @field_validator("ends")
    @classmethod
    def _ends_after_start(cls, ends: datetime, info: Any) -> datetime:
        starts = info.data.get("starts")
        if starts is not None and to_ms(ends) <= to_ms(starts):
            raise ValueError("ends must be after starts")
        return ends

    @property
    def starts_ms(self) -> int:
        return to_ms(self.starts)

    @property
    def ends_ms(self) -> int:
        return to_ms(self.ends)


class SalesRecord(_Record):
    type: Literal["sales"] = "sales"
    date: date
    units: Count


Record = ProductRecord | PriceRecord | StockRecord | ReviewRecord | PromotionRecord | SalesRecord

RECORD_TYPES: dict[str, type[_Record]] = {
    "product": ProductRecord,
    "price": PriceRecord,
    "stock": StockRecord,
    "review": ReviewRecord,
    "promotion": PromotionRecord,
    "sales": SalesRecord,
}
