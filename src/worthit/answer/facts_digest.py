"""The audit record's facts digest, `sha256(canonical_json(sheet.to_dict()))`, without
turning the sheet into a dict and JSON on every answer.

Every answer about an unchanged product reads the same sheet but for its data age, which
grows with each read and is part of what the digest covers, and its moment, which moves
each time the sheet is rebuilt with nothing changed (its TTL, the idle-time refresher).
The canonical JSON of a sheet of one version is therefore built once, around
placeholders where the moment and the age go; each answer then hashes those bytes with
its own spliced in: the same bytes, so the same digest a verifier computes from the
sheet in the answer. The version hashes every fact on the sheet but its moment, age and
`fed_by_events` (facts/builder.py), so `fed_by_events` joins the key.
"""

from __future__ import annotations

import hashlib
import threading

from worthit.audit.record import canonical_json
from worthit.facts.sheet import FactSheet
from worthit.text.lru import LRU

DEFAULT_CAPACITY = 4096
_AGE = -7_340_061_224_917
"""A data age no sheet has, marking where the age goes in the canonical JSON."""
_AS_OF = "as_of-placeholder-7340061224917"
"""A moment no sheet has, marking where the moment goes."""
_AGE_FIELD = b'"data_age_ms":'
_AS_OF_FIELD = b'"as_of":'
_AGE_MARK = _AGE_FIELD + str(_AGE).encode()
_AS_OF_MARK = _AS_OF_FIELD + canonical_json(_AS_OF)

_Parts = tuple[bytes, bytes, bytes]
"""Before the moment, between the moment and the age, after the age."""


class FactsDigests:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._parts: LRU[tuple[str, bool], _Parts] = LRU(capacity)
        self._lock = threading.Lock()

    def digest(self, sheet: FactSheet) -> str:
        """`sha256_hex(canonical_json(sheet.to_dict()))`."""
        key = (sheet.version, sheet.fed_by_events)
        with self._lock:
            parts = self._parts.get(key)
        if parts is None:
            parts = _split(sheet)
            if parts is None:  # cannot happen for a sheet; be exact anyway
                return hashlib.sha256(canonical_json(sheet.to_dict())).hexdigest()
            with self._lock:
                self._parts.put(key, parts)
        head, middle, tail = parts
        return hashlib.sha256(
            head + canonical_json(sheet.as_of) + middle + str(sheet.data_age_ms).encode() + tail
        ).hexdigest()


def _split(sheet: FactSheet) -> _Parts | None:
    """The sheet's canonical JSON cut around its moment and its age (sorted keys put the
    moment first); None if either mark is not found exactly once, in that order."""
    data = sheet.to_dict()
    data["as_of"], data["data_age_ms"] = _AS_OF, _AGE
    head, mark, rest = canonical_json(data).partition(_AS_OF_MARK)
    middle, age_mark, tail = rest.partition(_AGE_MARK)
    if not mark or not age_mark or _AS_OF_MARK in rest or _AGE_MARK in head + tail:
        return None
    return head + _AS_OF_FIELD, middle + _AGE_FIELD, tail
