"""Events: the import records, each with an idempotency key and the name of its source.

An event is a record of docs/import.md (same `type`, same fields) plus `event_id`, the
key that makes a redelivery harmless, and `source`, who sent it. Every event class is a
subclass of its record class, so the store applies an event exactly as it applies an
imported line: one validation and one write path for every way data arrives. The JSON
Schema is generated from these models, so it cannot drift from what is accepted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, StringConstraints, TypeAdapter, ValidationError

from worthit.market.records import (
    IDENTIFIER,
    UNSAFE_CHARACTERS,
    PriceRecord,
    ProductRecord,
    PromotionRecord,
    ReviewRecord,
    SalesRecord,
    StockRecord,
)
from worthit.text.time import date_to_ms

SCHEMA_VERSION = 1
SCHEMA_ID = f"https://worthit.dev/schemas/events/v{SCHEMA_VERSION}.json"
MAX_EVENT_ID_CHARS = 128
MAX_DEPTH = 32
"""How deeply a product's `attributes` may nest."""

EventId = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_EVENT_ID_CHARS),
    IDENTIFIER,
]
"""No control characters or bidi controls (market/records.py): refused, naming the field."""
SourceName = Annotated[
    str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
]
"""A short name (letters, digits, `.`, `_`, `-`; at most 64): it goes into logs and metrics."""


class _Identified(BaseModel):
    event_id: EventId = Field(
        description="Idempotency key: an event whose id was applied before changes nothing."
    )
    source: SourceName = Field(description="Who sent the event, e.g. `pos`, `feed.eu`, `live`.")


class ProductEvent(ProductRecord, _Identified):
    type: Literal["product"]

    @property
    def at_ms(self) -> int:
        return 0


class PriceEvent(PriceRecord, _Identified):
    type: Literal["price"]

    @property
    def at_ms(self) -> int:
        return self.ts_ms


class StockEvent(StockRecord, _Identified):
    type: Literal["stock"]

    @property
    def at_ms(self) -> int:
        return self.ts_ms


class ReviewEvent(ReviewRecord, _Identified):
    type: Literal["review"]

    @property
    def at_ms(self) -> int:
        return self.ts_ms


class PromotionEvent(PromotionRecord, _Identified):
    type: Literal["promotion"]

    @property
    def at_ms(self) -> int:
        return self.starts_ms


class SalesEvent(SalesRecord, _Identified):
    type: Literal["sales"]

    @property
    def at_ms(self) -> int:
        return date_to_ms(self.date)


Event = ProductEvent | PriceEvent | StockEvent | ReviewEvent | PromotionEvent | SalesEvent

EVENT_TYPES: dict[str, type[Event]] = {
    "product": ProductEvent,
    "price": PriceEvent,
    "stock": StockEvent,
    "review": ReviewEvent,
    "promotion": PromotionEvent,
    "sales": SalesEvent,
}

_ADAPTER: TypeAdapter[Event] = TypeAdapter(Annotated[Event, Field(discriminator="type")])


def event_schema() -> dict[str, Any]:
    """The JSON Schema (2020-12) of one event, `$id` carrying its version.

    A new field with a default is a compatible change within a version; removing or
    renaming a field, or tightening a constraint, makes the next version.
    """
    schema = _ADAPTER.json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "worthit event",
        "description": (
            "One market change: an import record of docs/import.md plus event_id (the "
            "idempotency key) and source. Its time is ts (starts for a promotion, date for "
            "sales); a product event has none."
        ),
        **schema,
    }


@dataclass(frozen=True, slots=True)
class EventError:
    """Why the event at `index` was refused: the field at fault, as a dotted path."""

    index: int
    field: str
    message: str
    event_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        body: dict[str, Any] = {"index": self.index, "field": self.field, "message": self.message}
        if self.event_id is not None:
            body["event_id"] = self.event_id
        return body


def parse_event(data: object, index: int = 0) -> Event | EventError:
    """A JSON value → a validated event, or the first problem with it (never raises)."""
    if not isinstance(data, Mapping):
        return EventError(index, "(event)", "expected a JSON object")
    raw_id = data.get("event_id")
    event_id = raw_id if isinstance(raw_id, str) and _encodable(raw_id) else None
    if event_id is not None and UNSAFE_CHARACTERS.search(event_id):
        event_id = None  # not echoed into logs and reports: the index names the event
    kind = data.get("type")
    model = EVENT_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        allowed = ", ".join(sorted(EVENT_TYPES))
        shown = kind if isinstance(kind, str | None) and _encodable(kind or "") else "?"
        return EventError(index, "type", f"must be one of {allowed}, got {shown!r}", event_id)
    problem = _first_problem(data)
    if problem is not None:
        return EventError(index, *problem, event_id)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(event)"
        return EventError(index, where, first["msg"], event_id)


def parse_json_event(text: str | bytes, index: int = 0) -> Event | EventError:
    """One event from its JSON text (a stream entry, a JSONL line)."""
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return EventError(index, "(event)", f"not valid JSON: {exc}")
    return parse_event(data, index)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_problem(data: Mapping[str, object]) -> tuple[str, str] | None:
    """(field, why) for what validation lets through and the store cannot keep: a string
    JSON decoded from an unpaired surrogate (SQLite refuses it at write time) or nesting
    deeper than MAX_DEPTH (json.dumps would recurse past Python's limit). Iterative, so
    a deep body cannot exhaust the stack here either."""
    stack: list[tuple[object, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return path or "(event)", f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(value, str):
            if not _encodable(value):
                return path or "(event)", "contains an unpaired surrogate"
        elif isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(key, str) and not _encodable(key):
                    return path or "(event)", "a key contains an unpaired surrogate"
                stack.append((item, f"{path}.{key}" if path else str(key), depth + 1))
        elif isinstance(value, list | tuple):
            for position, item in enumerate(value):
                stack.append((item, f"{path}.{position}" if path else str(position), depth + 1))
    return None
