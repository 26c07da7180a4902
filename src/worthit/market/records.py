"""The records the market is made of, validated at the edge.

One pydantic model per import line type; the same models are what the store accepts,
so the simulator, the importer and (later) the event bus all go through one validation.

Text hygiene is decided here, once for every way data arrives (import, events, webhooks,
feeds, Redis Streams). Control characters (Unicode category Cc: NUL, newlines, ESC, …)
and the bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069) can make
one string look like another ("S1\u202e" beside "S1") or break a log line, a CSV cell or
a terminal, so:

- identifiers (sku, review_id, a promotion's name, and in events event_id) refuse them,
  naming the field: an identifier is compared, not read, and a changed one would be
  another record;
- display text (title, brand, category, aliases, review text) loses them: a line break,
  tab or other whitespace control becomes a space (a review keeps its line breaks, as
  `\n`), every other one is removed, so a pasted title with a stray newline still lands.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime
from typing import Annotated, Any, Literal, TypeVar

from babel.numbers import get_currency_precision
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError

from worthit.text.time import from_ms, to_ms

UNSAFE_CHARACTERS = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
"""Unicode's Cc (C0, DEL, C1) and the bidi embeddings, overrides and isolates."""
_WHITESPACE_CONTROLS = re.compile("[\t\n\x0b\x0c\r\x1c-\x1f\x85]")
"""The controls that separate words (str.isspace): a space takes their place."""
_REVIEW_LINE_BREAKS = re.compile("\r\n?|[\x0b\x0c\x1c-\x1e\x85]")


def _plain_identifier(value: str) -> str:
    found = UNSAFE_CHARACTERS.search(value)
    if found is not None:
        raise ValueError(
            f"must not contain control characters or bidi controls "
            f"(U+{ord(found.group()):04X} at {found.start()})"
        )
    return value


def display_text(value: object) -> object:
    """One line of text to show: whitespace controls become spaces, the rest go."""
    if not isinstance(value, str):
        return value
    return UNSAFE_CHARACTERS.sub("", _WHITESPACE_CONTROLS.sub(" ", value))


def review_text(value: object) -> object:
    """A review's text: its line breaks kept as `\n`, otherwise as `display_text`."""
    if not isinstance(value, str):
        return value
    lines = _REVIEW_LINE_BREAKS.sub("\n", value).split("\n")
    return "\n".join(str(display_text(line)) for line in lines)


IDENTIFIER = AfterValidator(_plain_identifier)
"""Refuses what `UNSAFE_CHARACTERS` matches: put it after the string's constraints."""
DISPLAY_TEXT = BeforeValidator(display_text)
"""Strips what `UNSAFE_CHARACTERS` matches before the string's own constraints run (a
title of only controls is then empty, and refused as such). A before-validator wraps what
precedes it, so put it after the constraints."""

Sku = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64), IDENTIFIER
]
MAX_COUNT = 2**63 - 1
"""SQLite's INTEGER is 64-bit: a larger count would pass validation and fail in the store."""
MAX_PRICE = 1e12
MIN_PRICE = 0.01
"""The fact sheet keeps money to the cent: a smaller amount would round to zero there."""
Count = Annotated[int, Field(ge=0, le=MAX_COUNT)]
Price = Annotated[float, Field(ge=MIN_PRICE, le=MAX_PRICE)]
Currency = Annotated[
    str, StringConstraints(strip_whitespace=True, to_upper=True, pattern=r"^[A-Za-z]{3}$")
]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    sku: Sku


class ProductRecord(_Record):
    type: Literal["product"] = "product"
    title: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=300), DISPLAY_TEXT
    ]
    brand: Annotated[
        str, StringConstraints(strip_whitespace=True, max_length=100), DISPLAY_TEXT
    ] = ""
    category: Annotated[
        str, StringConstraints(strip_whitespace=True, max_length=100), DISPLAY_TEXT
    ] = ""
    attributes: dict[str, Any] = Field(default_factory=dict)
    aliases: list[
        Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), DISPLAY_TEXT]
    ] = Field(default_factory=list)


class PriceRecord(_Record):
    type: Literal["price"] = "price"
    ts: datetime
    price: Price
    currency: Currency = "USD"
    list_price: Price | None = None

    @model_validator(mode="after")
    def _at_least_one_minor_unit(self) -> PriceRecord:
        """A price below its currency's minor unit (¥0.5) is no price a shop charges.
        Reported against the field, like the field's own checks, so a caller sees which."""
        floor = minor_unit(self.currency)
        errors = [
            InitErrorDetails(
                type=PydanticCustomError(
                    "price_below_minor_unit",
                    "Input should be at least one minor unit of {currency} ({floor})",
                    {"currency": self.currency, "floor": f"{floor:g}"},
                ),
                loc=(name,),
                input=value,
            )
            for name, value in (("price", self.price), ("list_price", self.list_price))
            if value is not None and value < floor
        ]
        if errors:
            raise ValidationError.from_exception_data(type(self).__name__, errors)
        return self

    @property
    def ts_ms(self) -> int:
        return to_ms(self.ts)


def minor_unit(currency: str) -> float:
    """The smallest amount a price in `currency` may be: one minor unit as CLDR knows it
    (¥1, $0.01), and never under the sheet's cent."""
    return max(MIN_PRICE, 10.0 ** -get_currency_precision(currency))


class StockRecord(_Record):
    type: Literal["stock"] = "stock"
    ts: datetime
    quantity: Count

    @property
    def ts_ms(self) -> int:
        return to_ms(self.ts)


class ReviewRecord(_Record):
    type: Literal["review"] = "review"
    review_id: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1), IDENTIFIER]
    ts: datetime
    rating: int = Field(ge=1, le=5)
    text: Annotated[str, BeforeValidator(review_text)] = Field(default="", max_length=20_000)
    verified: bool = False

    @property
    def ts_ms(self) -> int:
        return to_ms(self.ts)


PromotionKind = Literal["price", "percent", "threshold", "coupon"]
"""`price`: a promotional price; `percent`: a share off; `threshold`: spend X, save Y per
order (满200减30); `coupon`: an amount or a share off, maybe from a minimum spend."""

Percent = Annotated[float, Field(gt=0, lt=100)]

_KIND_FIELDS: dict[str, frozenset[str]] = {
    "price": frozenset({"price"}),
    "percent": frozenset({"percent_off"}),
    "threshold": frozenset({"threshold", "save"}),
    "coupon": frozenset({"save", "percent_off", "min_spend"}),
}
"""The fields each kind may carry: one given to a kind that ignores it is a mistake."""


class PromotionRecord(_Record):
    type: Literal["promotion"] = "promotion"
    name: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=100), IDENTIFIER
    ]
    starts: datetime
    ends: datetime
    kind: PromotionKind = Field(
        default="price",
        description=(
            "How the offer prices one unit: `price` (the promotional price, the default, "
            "so older records keep their meaning), `percent` (percent_off), `threshold` "
            "(spend threshold, save save, per order), `coupon` (save or percent_off, "
            "optionally from min_spend)."
        ),
    )
    price: Price | None = Field(
        default=None, validate_default=True, description="kind `price`: the promotional price."
    )
    percent_off: Percent | None = Field(
        default=None,
        validate_default=True,
        description="kind `percent`, or a `coupon` for a share off: percent off, in (0, 100).",
    )
    threshold: Price | None = Field(
        default=None,
        validate_default=True,
        description="kind `threshold`: the order total from which `save` is taken off.",
    )
    save: Price | None = Field(
        default=None,
        validate_default=True,
        description="kind `threshold` (below `threshold`) or `coupon`: the amount taken off.",
    )
    min_spend: Price | None = Field(
        default=None,
        validate_default=True,
        description="kind `coupon`, optional: the order total the coupon needs.",
    )
    announced_at: datetime | None = Field(
        default=None,
        description="When the offer was announced: an answer as of an earlier moment does "
        "not know of it. Default: when worthit received it (the event's arrival, the "
        "import); before the offer ends.",
    )

    @field_validator("ends")
    @classmethod
    def _ends_after_start(cls, ends: datetime, info: Any) -> datetime:
        starts = info.data.get("starts")
        if starts is not None and to_ms(ends) <= to_ms(starts):
            raise ValueError("ends must be after starts")
        return ends

    @field_validator("price", "percent_off", "threshold", "save", "min_spend")
    @classmethod
    def _fits_kind(cls, value: float | None, info: Any) -> float | None:
        """Checked field by field, in declaration order, so the error names the field at
        fault (a model-level check would be reported against the whole record)."""
        kind = info.data.get("kind")
        name = info.field_name
        if kind is None:
            return value
        if value is not None and name not in _KIND_FIELDS[kind]:
            raise ValueError(f"not used by a {kind} promotion")
        if kind == "coupon":
            _check_coupon(name, value, info.data)
        elif value is None and name in _KIND_FIELDS[kind] and _required(name, info.data):
            raise ValueError(f"required for a {kind} promotion")
        elif kind == "threshold" and name == "save" and value is not None:
            threshold = info.data.get("threshold")
            if threshold is not None and value >= threshold:
                raise ValueError(f"must be less than threshold ({threshold:g})")
        return value

    @field_validator("announced_at")
    @classmethod
    def _announced_before_end(cls, announced: datetime | None, info: Any) -> datetime | None:
        ends = info.data.get("ends")
        if announced is not None and ends is not None and _utc(announced) >= _utc(ends):
            raise ValueError("must be before ends")
        return announced

    @property
    def starts_ms(self) -> int:
        return to_ms(self.starts)

    @property
    def announced_ms(self) -> int | None:
        return None if self.announced_at is None else to_ms(self.announced_at)

    @property
    def ends_ms(self) -> int:
        return to_ms(self.ends)


def _utc(moment: datetime) -> datetime:
    """Naive moments are UTC (as `to_ms` reads them), so aware and naive ones compare."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


R = TypeVar("R", bound=BaseModel)


def as_received(record: R, at_ms: int) -> R:
    """The record as it arrived at `at_ms` (an event's arrival, an import's run): a
    promotion that does not say when it was announced was announced, as far as worthit
    can know, then. One received after it ended is thus never shown as of any moment."""
    if isinstance(record, PromotionRecord) and record.announced_at is None:
        return record.model_copy(update={"announced_at": from_ms(at_ms)})
    return record


def _check_coupon(name: str, value: float | None, seen: dict[str, Any]) -> None:
    """A coupon is an amount or a share off, never both; a minimum spend above the amount.
    A percent_off that failed its own check is absent from `seen` and already reported."""
    if name == "save":
        percent = seen.get("percent_off", 0)
        if value is not None and percent:
            raise ValueError("a coupon takes save or percent_off, not both")
        if value is None and percent is None:
            raise ValueError("a coupon needs save (an amount off) or percent_off")
    if name == "min_spend" and value is not None:
        save = seen.get("save")
        if save is not None and value <= save:
            raise ValueError(f"must be more than save ({save:g})")


def _required(name: str, seen: dict[str, Any]) -> bool:
    """A threshold's save is required only when its threshold passed: a bad threshold is
    the first problem, and the one reported."""
    return name != "save" or "threshold" in seen


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
