"""An in-process cache of fact sheets, revalidated against the product's revision.

Every read costs one primary-key lookup (the revision); a sheet is rebuilt when an
input changed or when it is older than `max_age_s`, since rolling windows move with
time even when no input arrives.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from worthit.facts.builder import FactsBuilder, aged
from worthit.facts.sheet import FactSheet


@dataclass(frozen=True, slots=True)
class _Entry:
    sheet: FactSheet
    revision: int
    built_at: float


class FactsCache:
    def __init__(
        self, builder: FactsBuilder, max_age_s: float = 30.0, capacity: int = 4096
    ) -> None:
        self.builder = builder
        self.max_age_s = max_age_s
        self.capacity = capacity
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, sku: str) -> FactSheet | None:
        current = self.builder.store.revision(sku)
        if current is None:
            return None
        revision = current[0]
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(sku)
            if entry and entry.revision == revision and now - entry.built_at < self.max_age_s:
                self._entries.move_to_end(sku)
                self.hits += 1
                return aged(entry.sheet, int((now - entry.built_at) * 1000))
            self.misses += 1
        sheet = self.builder.build(sku)
        if sheet is None:
            return None
        with self._lock:
            self._entries[sku] = _Entry(sheet, sheet.revision, now)
            self._entries.move_to_end(sku)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return sheet
