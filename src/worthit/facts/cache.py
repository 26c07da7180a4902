"""An in-process cache of fact sheets: evicted by the events that change them, and
revalidated against the product's revision on every read as the safety net.

The event bus evicts a product's sheet as soon as a commit changes it (`evict`), so the
next answer rebuilds from the new data. A writer the bus does not see (`worthit import`,
or `worthit simulate --live` in another process, on the same SQLite file) still bumps the
revision, which every read checks with one primary-key lookup. A sheet is also rebuilt
when it is older than its TTL (`max_age_s` ± 10 %, so sheets built together do not all
expire together), since rolling windows move with time even when no input arrives.

A hot product must not stampede the store: concurrent misses on one SKU share one build
(single flight), and a reader may rebuild a sheet shortly before it expires (XFetch,
Vattani et al. 2015) so the rebuild is one reader's, not everyone's after expiry.
Lookups of products that do not exist (typos, scrapers) never reach the store: a Bloom
filter of the known SKUs rejects most, and a short-lived negative entry the rest.

Several processes on one store may share a second tier (`tier`, a `SheetTier`: Redis, in
facts/redis_tier.py): a miss here asks it before building, and a sheet built here is
handed to it, so a product is built once for all of them. The in-memory tier stays in
front, and the revision check guards both: a shared sheet of an older revision is never
used. `evict` also tells the tier, which tells the other processes' caches.

A live feed would otherwise drain the cache (every event evicts a sheet, and the next
question about that product pays for its build), and a quiet spell would let every sheet
expire. The sheets events dropped and those about to expire are queued for `refresh`,
read ones first, which the service calls in its idle time (answer/facts_refresh.py), so
the next question finds them built.
"""

from __future__ import annotations

import math
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Protocol

from rbloom import Bloom

from worthit.facts.builder import FactsBuilder, aged
from worthit.facts.sheet import FactSheet
from worthit.text.lru import LRU

DEFAULT_WARM_S = 5.0
"""How long a starting service spends on `warm`: the demo market's 2,000 sheets take
2-4 s on a 2-core machine."""

JITTER = 0.10
"""Each entry's TTL is `max_age_s` times a factor drawn from [1 - JITTER, 1 + JITTER]."""

REFRESH_LEAD = 0.10
"""`refresh` rebuilds a sheet once less than this share of `max_age_s` is left of it,
before a reader's XFetch draw or its expiry would."""


def xfetch_probability(remaining_s: float, delta_s: float, beta: float = 1.0) -> float:
    """The chance that one read refreshes an entry `remaining_s` before its expiry.

    XFetch refreshes when `now - delta * beta * ln(U) >= expiry` for U uniform in (0, 1],
    which happens with probability exp(-remaining / (delta * beta)): near zero while the
    expiry is many build-times away, one at the expiry. A build that took no time never
    needs to start early.
    """
    if remaining_s <= 0:
        return 1.0
    if delta_s <= 0 or beta <= 0:
        return 0.0
    return math.exp(-remaining_s / (delta_s * beta))


@dataclass(frozen=True, slots=True)
class _Entry:
    sheet: FactSheet
    revision: int
    expires_at: float
    delta: float
    aged_from_ms: int
    """The service clock's moment at which the sheet's `data_age_ms` held: a read ages
    it by that clock, so a pinned clock (a replay, the tests) pins the age too."""


@dataclass(frozen=True, slots=True)
class SharedSheet:
    """A sheet another process built, as a second tier holds it."""

    sheet: FactSheet
    age_s: float
    """Since it was built."""
    remaining_s: float
    """Until the tier drops it: the TTL its builder drew, less its age."""
    delta_s: float
    """How long it took to build (XFetch's delta)."""


class SheetTier(Protocol):
    """A cache of sheets shared with other processes; any failure is a miss, never an error."""

    def load(self, sku: str, revision: int) -> SharedSheet | None: ...
    def save(self, sheet: FactSheet, ttl_s: float, delta_s: float) -> None: ...
    def evicted(self, skus: list[str]) -> None: ...


class _Flight:
    """One build in progress; readers that miss meanwhile wait for it instead of building."""

    __slots__ = ("done", "sheet", "stale")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.sheet: FactSheet | None = None
        self.stale = False
        """An eviction arrived mid-build: the sheet may predate the commit, so it is
        handed to the waiters (their reads began before it) but not kept."""


class FactsCache:
    def __init__(
        self,
        builder: FactsBuilder,
        max_age_s: float = 30.0,
        capacity: int = 4096,
        *,
        fed_by_events: bool = False,
        tier: SheetTier | None = None,
        negative_ttl_s: float = 5.0,
        bloom_refresh_s: float = 60.0,
        beta: float = 1.0,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.builder = builder
        self.max_age_s = max_age_s
        self.capacity = capacity
        self.fed_by_events = fed_by_events
        """Events keep the store current: sheets say so (`FactSheet.fed_by_events`), and
        old data counts against an answer. Off for a store loaded once (an import, the
        pinned test market), where the data's age says nothing about whether it is current."""
        self.negative_ttl_s = negative_ttl_s
        self.bloom_refresh_s = bloom_refresh_s
        """A product added by a writer the bus does not see is missing from the filter;
        a rejected lookup reloads the filter from the store at most this often."""
        self.beta = beta
        self._rng = rng or random.Random()
        self._clock = clock
        self._entries: LRU[str, _Entry] = LRU(capacity)
        self._negative: LRU[str, float] = LRU(capacity)
        """Unknown SKUs, until when they are taken to stay unknown."""
        self._flights: dict[str, _Flight] = {}
        self._due: OrderedDict[str, None] = OrderedDict()
        """Sheets for `refresh` to rebuild: those read since built at the front. A queue
        with two ends, not an LRU: a read sheet goes to the front, and when it is full
        the newest unread one goes, so the front is never given up for it."""
        self._read: set[str] = set()
        """SKUs whose entry was read since it was built."""
        self._scanned_at = -math.inf
        self._lock = threading.Lock()
        self._bloom_reload = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.evictions = 0
        self.negative_hits = 0
        self.bloom_rejects = 0
        self.coalesced = 0
        self.early_refreshes = 0
        self.tier = tier
        """The sheets several processes share (Redis), asked before a build; None: this
        process's own only."""
        self.tier_hits = 0
        self.warmed = 0
        self.refreshed = 0
        self._bloom, self._bloom_at = self._load_bloom()

    def get(self, sku: str, at_ms: int | None = None) -> FactSheet | None:
        """The sheet now; or as of `at_ms`, built afresh and never cached.

        An as-of sheet is asked for rarely (a dispute, a replay) and is cheap to build, and
        keeping it out leaves this cache holding one sheet per product, the current one,
        which the events evict. It is never marked `fed_by_events`: it is old on purpose.
        """
        if at_ms is not None:
            return self.builder.build(sku, at_ms)
        return self._get(sku, read=True)

    def _get(self, sku: str, *, read: bool) -> FactSheet | None:
        """The current sheet; `read`: a reader asked for it (so `refresh` keeps it built)."""
        now = self._clock()
        if not self._maybe_known(sku, now):
            return None
        current = self.builder.store.revision(sku)
        if current is None:
            with self._lock:
                self._negative.put(sku, now + self.negative_ttl_s)
            return None
        revision = current[0]
        with self._lock:
            entry = self._entries.peek(sku)
            flight = self._flights.get(sku)
            if (
                entry
                and entry.revision == revision
                and now < entry.expires_at
                and entry.sheet.fed_by_events is self.fed_by_events
            ):
                remaining = entry.expires_at - now
                if flight is not None or self._rng.random() >= xfetch_probability(
                    remaining, entry.delta, self.beta
                ):
                    self._entries.get(sku)  # a use: now the most recently used
                    if read:
                        self._read.add(sku)
                    self.hits += 1
                    return aged(entry.sheet, max(0, self.builder.clock() - entry.aged_from_ms))
                self.early_refreshes += 1
            else:
                self.misses += 1
            if flight is None:
                flight = self._flights[sku] = _Flight()
                leader = True
            else:
                leader = False
        if leader:
            return self._lead(flight, sku, revision, read=read)
        return self._await(flight, sku, revision)

    def warm(self, skus: Iterable[str], budget_s: float) -> int:
        """Build the sheets of `skus` not cached yet, each once, in the order given, until
        the cache is full or `budget_s` has passed; the number built.

        A process that starts (or a worker that got no traffic yet) would otherwise
        build each product's sheet on its first question: a few milliseconds each, and a
        burst of questions on products it has not seen waited behind all of them. A sheet
        a live feed drops meanwhile is not built again here: `refresh` has it queued.
        """
        started = self._clock()
        built = 0
        seen: set[str] = set()
        for sku in skus:
            if len(self) >= self.capacity or self._clock() - started >= budget_s:
                break
            with self._lock:
                cached = sku in self._entries or sku in seen
            seen.add(sku)
            if not cached and self._get(sku, read=False) is not None:
                built += 1
        self.warmed += built
        return built

    def refresh(self, budget_s: float) -> int:
        """Rebuild the sheets queued for it until `budget_s` has passed (one at least);
        the number rebuilt.

        Queued is every sheet the cache holds that an event dropped or that is less than
        `REFRESH_LEAD` of its TTL from expiry, the ones read since they were built first.
        An unread sheet near expiry is queued only when nothing else waits: a sale's
        first burst after a quiet spell would otherwise find every sheet expired
        (bench/peak.py --idle-s), but under a live feed, keeping them too took the time
        the dropped sheets needed (bench/live_cache.py: 7 % of reads missed, not 1 %). A
        sheet a reader is building already, or rebuilt since it was queued, is skipped.
        """
        started = self._clock()
        self._queue_expiring(started)
        built = 0
        while self._clock() - started < budget_s or built == 0:
            with self._lock:
                if not self._due:
                    break
                sku = self._due.popitem(last=False)[0]
            current = self.builder.store.revision(sku)
            if current is None:
                continue
            with self._lock:
                if sku in self._flights:
                    continue
                flight = self._flights[sku] = _Flight()
            self._lead(flight, sku, current[0], read=False)
            built += 1
        with self._lock:
            self.refreshed += built
        return built

    @property
    def refresh_pending(self) -> int:
        """Sheets queued for `refresh`."""
        return len(self._due)

    def _queue_expiring(self, now: float) -> None:
        """Queue the entries close to expiry, the read ones at the front and the unread
        only when nothing else waits; a scan at most every half lead."""
        lead = self.max_age_s * REFRESH_LEAD
        if now - self._scanned_at < lead / 2:
            return
        self._scanned_at = now
        with self._lock:
            nothing_waits = not self._due
            for sku, entry in self._entries.items():
                if entry.expires_at - now >= lead or sku in self._due:
                    continue
                if sku in self._read:
                    self._due[sku] = None
                    self._due.move_to_end(sku, last=False)
                elif nothing_waits:
                    self._due[sku] = None

    def _maybe_known(self, sku: str, now: float) -> bool:
        with self._lock:
            if sku in self._bloom:
                expires = self._negative.peek(sku)
                if expires is None:
                    return True
                if now < expires:
                    self.negative_hits += 1
                    return False
                self._negative.pop(sku)
                return True
            stale_filter = now - self._bloom_at >= self.bloom_refresh_s
        if stale_filter and self._bloom_reload.acquire(blocking=False):
            try:
                bloom, built_at = self._load_bloom()
                with self._lock:
                    self._bloom, self._bloom_at = bloom, built_at
            finally:
                self._bloom_reload.release()
            return self._maybe_known(sku, now)
        with self._lock:
            self.bloom_rejects += 1
        return False

    def _load_bloom(self) -> tuple[Bloom, float]:
        skus = [hit.sku for hit in self.builder.store.all_names()]
        bloom = Bloom(max(4 * len(skus), 1024), 0.01)
        bloom.update(skus)
        return bloom, self._clock()

    def _await(self, flight: _Flight, sku: str, revision: int) -> FactSheet | None:
        flight.done.wait()
        sheet = flight.sheet
        if sheet is not None and sheet.revision >= revision:
            with self._lock:
                self.coalesced += 1
            return sheet
        return self._build(sku)[0]

    def _lead(self, flight: _Flight, sku: str, revision: int, *, read: bool) -> FactSheet | None:
        share: tuple[FactSheet, float, float] | None = None
        try:
            shared = self._shared(sku, revision)
            if shared is not None:
                return self._keep_shared(flight, sku, shared, read=read)
            moment = self.builder.clock()
            sheet, started, delta = self._build(sku)
            with self._lock:
                current = self._entries.peek(sku)
                if (
                    sheet is not None
                    and not flight.stale
                    and (current is None or current.revision <= sheet.revision)
                ):
                    ttl = self.max_age_s * (1 + self._rng.uniform(-JITTER, JITTER))
                    self._keep(
                        sku,
                        _Entry(sheet, sheet.revision, started + ttl, delta, moment),
                        read,
                    )
                    share = (sheet, ttl, delta)
                flight.sheet = sheet
            return sheet
        finally:
            with self._lock:
                if self._flights.get(sku) is flight:
                    del self._flights[sku]
            flight.done.set()
            if share is not None and self.tier is not None:
                self.tier.save(*share)

    def _shared(self, sku: str, revision: int) -> SharedSheet | None:
        """The tier's sheet of this revision, unless this reader draws its early refresh:
        XFetch runs on the shared copy too, so one reader of all the processes rebuilds
        it shortly before it expires, and saves the new one for the others."""
        if self.tier is None:
            return None
        shared = self.tier.load(sku, revision)
        if (
            shared is None
            or shared.sheet.revision != revision
            or shared.sheet.fed_by_events is not self.fed_by_events
        ):
            return None
        if self._rng.random() < xfetch_probability(shared.remaining_s, shared.delta_s, self.beta):
            with self._lock:
                self.early_refreshes += 1
            return None
        return shared

    def _keep_shared(
        self, flight: _Flight, sku: str, shared: SharedSheet, *, read: bool
    ) -> FactSheet:
        now = self._clock()
        with self._lock:
            self.tier_hits += 1
            current = self._entries.peek(sku)
            if not flight.stale and (current is None or current.revision <= shared.sheet.revision):
                entry = _Entry(
                    shared.sheet, shared.sheet.revision, now + shared.remaining_s,
                    shared.delta_s, self.builder.clock() - int(shared.age_s * 1000),
                )  # fmt: skip
                self._keep(sku, entry, read)
            flight.sheet = sheet = aged(shared.sheet, int(shared.age_s * 1000))
        return sheet

    def _keep(self, sku: str, entry: _Entry, read: bool) -> None:
        """Under the lock; `read`: a reader asked for this sheet."""
        if read:
            self._read.add(sku)
        else:
            self._read.discard(sku)
        self._due.pop(sku, None)
        for forgotten in self._entries.put(sku, entry):
            self._read.discard(forgotten)

    def _build(self, sku: str) -> tuple[FactSheet | None, float, float]:
        started = self._clock()
        sheet = self.builder.build(sku)
        if sheet is not None and self.fed_by_events:
            sheet = replace(sheet, fed_by_events=True)
        return sheet, started, self._clock() - started

    def evict(self, skus: Iterable[str], *, share: bool = True) -> int:
        """Forget these products' sheets now (an event changed their facts); the next
        read rebuilds them. Returns how many were cached.

        A SKU the filter has not seen is a product the event just added, so it becomes
        known here, and any negative entry for it goes. With a tier, the other processes
        are told too (`share`; off when this eviction is one another process told of).
        A dropped sheet is queued for `refresh`, ahead of the others if a reader had
        asked for it.
        """
        skus = list(skus)
        dropped = 0
        with self._lock:
            for sku in skus:
                if sku not in self._bloom:
                    self._bloom.add(sku)
                self._negative.pop(sku)
                flight = self._flights.get(sku)
                if flight is not None:
                    flight.stale = True
                if self._entries.pop(sku) is not None:
                    dropped += 1
                    self._due[sku] = None
                    if sku in self._read:
                        self._read.discard(sku)
                        self._due.move_to_end(sku, last=False)
                    if len(self._due) > self.capacity:
                        self._due.popitem()
            self.evictions += dropped
        if share and skus and self.tier is not None:
            self.tier.evicted(skus)
        return dropped

    def __len__(self) -> int:
        return len(self._entries)
