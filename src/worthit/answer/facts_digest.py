"""The audit record's facts digest, `sha256(canonical_json(sheet.to_dict()))`, without
turning the sheet into a dict and JSON on every answer.

Every answer about an unchanged product reads the same sheet but for its data age, which
grows with each read and is part of what the digest covers. The canonical JSON of a sheet
of one version is therefore built once, around a placeholder where the age goes; each
answer then hashes those bytes with its own age spliced in: the same bytes, so the same
digest a verifier computes from the sheet in the answer. The version hashes every fact on
the sheet but its moment, age and `extra` (facts/builder.py), so those three join the key.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

from worthit.audit.record import canonical_json
from worthit.facts.sheet import FactSheet

DEFAULT_CAPACITY = 4096
_AGE = -7_340_061_224_917
"""A data age no sheet has, marking where the age goes in the canonical JSON."""
_AGE_FIELD = b'"data_age_ms":'


class FactsDigests:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self.capacity = capacity
        self._parts: OrderedDict[tuple[str, str, bytes], tuple[bytes, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def digest(self, sheet: FactSheet) -> str:
        """`sha256_hex(canonical_json(sheet.to_dict()))`."""
        key = (sheet.version, sheet.as_of, canonical_json(sheet.extra))
        with self._lock:
            parts = self._parts.get(key)
            if parts is not None:
                self._parts.move_to_end(key)
        if parts is None:
            data = sheet.to_dict()
            data["data_age_ms"] = _AGE
            head, marker, tail = canonical_json(data).partition(_AGE_FIELD + str(_AGE).encode())
            if not marker or marker in tail:  # cannot happen for a sheet; be exact anyway
                data["data_age_ms"] = sheet.data_age_ms
                return hashlib.sha256(canonical_json(data)).hexdigest()
            parts = (head + _AGE_FIELD, tail)
            with self._lock:
                self._parts[key] = parts
                while len(self._parts) > self.capacity:
                    self._parts.popitem(last=False)
        head, tail = parts
        return hashlib.sha256(head + str(sheet.data_age_ms).encode() + tail).hexdigest()
