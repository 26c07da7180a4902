"""Fact sheets as compact JSON bytes, for a cache tier other processes read (Redis).

orjson writes the dataclasses as they are; reading them back is driven by the sheet's own
type hints, so a field added to `FactSheet` or to one of its parts needs nothing here:
tuples come back as tuples, nested dataclasses as themselves, and an int stays an int.
The round trip is exact (`sheet_from_json(sheet_json(s)) == s`) for every sheet a builder
makes: finite floats (orjson writes NaN and infinities as null, and a sheet holds none).
A key the sheet no longer has is ignored and a field it lacks takes its default, or,
without one, raises TypeError: the Redis tier counts that sheet, written by another
version of worthit, as a miss.
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

import orjson

from worthit.facts.sheet import FactSheet

Convert = Callable[[Any], Any]


def sheet_json(sheet: FactSheet) -> bytes:
    return orjson.dumps(sheet)


def sheet_from_json(data: bytes | str) -> FactSheet:
    return sheet_from_dict(orjson.loads(data))


def sheet_from_dict(data: dict[str, Any]) -> FactSheet:
    """From the sheet's JSON form already parsed (inside a larger document)."""
    sheet = _converter(FactSheet)(data)
    assert isinstance(sheet, FactSheet)
    return sheet


def _same(value: Any) -> Any:
    return value


@cache
def _converter(tp: Any) -> Convert:
    """How to turn the JSON form of a value of type `tp` back into it."""
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        options = [arg for arg in get_args(tp) if arg is not type(None)]
        inner = _converter(options[0]) if len(options) == 1 else _same
        return lambda value: None if value is None else inner(value)
    if origin is tuple:
        element = _converter(get_args(tp)[0])
        if element is _same:
            return tuple
        return lambda value: tuple(element(item) for item in value)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        hints = get_type_hints(tp)
        fields = [(f.name, _converter(hints[f.name])) for f in dataclasses.fields(tp)]
        cls = tp
        return lambda value: cls(
            **{name: convert(value[name]) for name, convert in fields if name in value}
        )
    return _same
