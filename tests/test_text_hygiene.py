"""Text hygiene at the record and event layer (issue 23, finding 5): control characters
and bidi controls are refused in identifiers, naming the field, and stripped from display
text, whichever way the data arrives (events, import; webhooks, feeds and Redis Streams
parse through the same `parse_event`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.market.events import EventError, ProductEvent, ReviewEvent, parse_event
from worthit.market.ingest.importer import run_import
from worthit.market.records import UNSAFE_CHARACTERS, ProductRecord
from worthit.market.store import MarketStore

UNSAFE = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))] + [
    "\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069",
]  # fmt: skip
"""Every character the rules name: Unicode's Cc and the bidi embeddings, overrides, isolates."""

text_with_unsafe = st.lists(
    st.one_of(st.sampled_from(UNSAFE), st.text(max_size=3)), max_size=8
).map("".join)
"""Ordinary text with the named characters mixed in, often."""


def event(kind: str, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"type": kind, "event_id": "e-1", "source": "pos", "sku": "S1"}
    if kind == "product":
        base["title"] = "Aurora NC700"
    elif kind == "review":
        base |= {"review_id": "r1", "ts": "2026-12-01T00:00:00Z", "rating": 4}
    elif kind == "promotion":
        base |= {"name": "Winter", "starts": "2026-12-01T00:00:00Z",
                 "ends": "2026-12-02T00:00:00Z", "price": 9.0}  # fmt: skip
    return base | fields


IDENTIFIERS = [
    ("price", "event_id"), ("price", "sku"), ("price", "source"),
    ("review", "review_id"), ("promotion", "name"),
]  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(case=st.sampled_from(IDENTIFIERS), value=text_with_unsafe)
def test_no_accepted_identifier_contains_a_control_or_bidi_character(
    case: tuple[str, str], value: str
) -> None:
    kind, field = case
    parsed = parse_event(event(kind, **{field: value}))
    if isinstance(parsed, EventError):
        if UNSAFE_CHARACTERS.search(value.strip()):
            assert parsed.field == field
        return
    for name in ("event_id", "sku", "source", "review_id", "name"):
        stored = getattr(parsed, name, "")
        assert isinstance(stored, str) and not UNSAFE_CHARACTERS.search(stored)


@settings(max_examples=300, deadline=None)
@given(title=text_with_unsafe, brand=text_with_unsafe, text=text_with_unsafe)
def test_display_text_is_accepted_without_them(title: str, brand: str, text: str) -> None:
    product = parse_event(event("product", title=title + "x", brand=brand, aliases=[title + "y"]))
    review = parse_event(event("review", text=text))
    assert isinstance(product, ProductEvent) and isinstance(review, ReviewEvent)
    for shown in (product.title, product.brand, *product.aliases):
        assert not UNSAFE_CHARACTERS.search(shown)
    assert not UNSAFE_CHARACTERS.search(review.text.replace("\n", ""))


def test_what_display_text_keeps_and_loses() -> None:
    product = parse_event(
        event(
            "product",
            title=" Aurora\u202e\nNC700\x00\x1b ",
            brand="\x1b[31mAurora",
            aliases=["NC\t700"],
        )
    )
    review = parse_event(event("review", text="Great\r\nsound\u2066\ttoo\x07"))
    assert isinstance(product, ProductEvent) and isinstance(review, ReviewEvent)
    assert (product.title, product.brand, product.aliases) == (
        "Aurora NC700",
        "[31mAurora",
        ["NC 700"],
    )
    assert review.text == "Great\nsound too"
    empty = parse_event(event("product", title="\u202e\x00"))
    assert isinstance(empty, EventError) and empty.field == "title"


def test_a_refused_id_is_not_echoed() -> None:
    refused = parse_event(event("price", event_id="e-1\n[fake log line]"))
    assert isinstance(refused, EventError) and refused.field == "event_id"
    assert refused.event_id is None and refused.index == 0


def test_import_refuses_the_same_identifiers_and_strips_the_same_text(tmp_path: Path) -> None:
    store = MarketStore(tmp_path / "m.db")
    lines = [
        json.dumps({"type": "product", "sku": "S1", "title": "Aurora\nNC700"}),
        json.dumps({"type": "product", "sku": "S1\u202e", "title": "Aurora NC700"}),
    ]
    report = run_import(store, lines)
    assert [(e.line, e.field) for e in report.errors] == [(2, "sku")]
    assert store.product("S1\u202e") is None
    assert store.product("S1").title == "Aurora NC700"  # type: ignore[union-attr]
    store.close()
    assert ProductRecord(sku="S2", title="a\tb").title == "a b"
