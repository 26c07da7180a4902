"""Fact sheets to JSON bytes and back (facts/sheet_codec.py), for the shared Redis tier:
the round trip gives an equal sheet, for any sheet and for every sheet of the market."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path
from typing import Any, Union, get_args, get_origin, get_type_hints

from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.facts.builder import FactsBuilder
from worthit.facts.sheet import FactSheet
from worthit.facts.sheet_codec import sheet_from_json, sheet_json
from worthit.market.store import MarketStore

from conftest import market_clock

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)


def strategy(tp: Any) -> st.SearchStrategy[Any]:
    """Any value of `tp` a sheet may hold: finite floats, 64-bit ints."""
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return st.one_of(*(strategy(arg) for arg in get_args(tp)))
    if origin is tuple:
        return st.lists(strategy(get_args(tp)[0]), max_size=3).map(tuple)
    if dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp)
        return st.builds(tp, **{f.name: strategy(hints[f.name]) for f in dataclasses.fields(tp)})
    return {
        type(None): st.none(),
        bool: st.booleans(),
        int: st.integers(-(2**63), 2**63 - 1),
        float: st.floats(allow_nan=False, allow_infinity=False),
        str: TEXT,
    }[tp]


@settings(max_examples=150, deadline=None)
@given(sheet=strategy(FactSheet))
def test_any_sheet_comes_back_equal(sheet: FactSheet) -> None:
    back = sheet_from_json(sheet_json(sheet))
    assert back == sheet
    assert [type(w) for w in back.windows] == [type(w) for w in sheet.windows]
    assert type(back.coming_events) is tuple


def test_every_sheet_of_the_market_comes_back_equal(small_market: Path) -> None:
    store = MarketStore(small_market)
    builder = FactsBuilder(store, market_clock())
    sheets = [builder.build(hit.sku) for hit in store.all_names()]
    assert len(sheets) >= 60
    for sheet in sheets:
        assert sheet is not None and sheet_from_json(sheet_json(sheet)) == sheet
    assert len(sheet_json(sheets[0])) < 4096  # compact: one small value per product
