"""An in-process cache of fact sheets: evicted by the events that change them, and
revalidated against the product's revision on every read as the safety net.

The event bus evicts a product's sheet as soon as a commit changes it (`evict`), so the
next answer rebuilds from the new data. A writer the bus does not see (`worthit import`,
or `worthit simulate --live` in another process, on the same SQLite file) still bumps the
revision, which every read checks with one primary-key lookup. A sheet is also rebuilt
when it is older than `max_age_s`, since rolling windows move with time even when no
input arrives.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, replace

from worthit.facts.builder import FactsBuilder, aged
from worthit.facts.sheet import FactSheet

LIVE_KEY = "live"
"""`FactSheet.extra[LIVE_KEY]` is True on a sheet read from a store fed live: its
`data_age_ms` is then held to the freshness objective (decide/rules.py)."""


@dataclass(frozen=True, slots=True)
class _Entry:
    sheet: FactSheet
    revision: int
    built_at: float


class FactsCache:
    def __init__(
        self,
        builder: FactsBuilder,
        max_age_s: float = 30.0,
        capacity: int = 4096,
        *,
        live: bool = False,
    ) -> None:
        self.builder = builder
        self.max_age_s = max_age_s
        self.capacity = capacity
        self.live = live
        """The store is fed live: sheets say so (LIVE_KEY), and old data counts against
        an answer. Off for a store loaded once (an import, the pinned test market), where
        the data's age says nothing about whether it is current."""
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.evictions = 0

    def get(self, sku: str, at_ms: int | None = None) -> FactSheet | None:
        """The sheet now; or as of `at_ms`, built afresh and never cached.

        An as-of sheet is asked for rarely (a dispute, a replay) and is cheap to build, and
        keeping it out leaves this cache holding one sheet per product, the live one,
        which the events evict. It is never marked live: it is old on purpose.
        """
        if at_ms is not None:
            return self.builder.build(sku, at_ms)
        current = self.builder.store.revision(sku)
        if current is None:
            return None
        revision = current[0]
        now = time.monotonic()
        with self._lock:
            entry = self._entries.get(sku)
            if (
                entry
                and entry.revision == revision
                and now - entry.built_at < self.max_age_s
                and entry.sheet.extra.get(LIVE_KEY, False) is self.live
            ):
                self._entries.move_to_end(sku)
                self.hits += 1
                return aged(entry.sheet, int((now - entry.built_at) * 1000))
            self.misses += 1
        sheet = self.builder.build(sku)
        if sheet is None:
            return None
        if self.live:
            sheet = replace(sheet, extra={**sheet.extra, LIVE_KEY: True})
        with self._lock:
            self._entries[sku] = _Entry(sheet, sheet.revision, now)
            self._entries.move_to_end(sku)
            while len(self._entries) > self.capacity:
                self._entries.popitem(last=False)
        return sheet

    def evict(self, skus: Iterable[str]) -> int:
        """Forget these products' sheets now (an event changed their facts); the next
        read rebuilds them. Returns how many were cached."""
        dropped = 0
        with self._lock:
            for sku in skus:
                if self._entries.pop(sku, None) is not None:
                    dropped += 1
            self.evictions += dropped
        return dropped

    def __len__(self) -> int:
        return len(self._entries)
