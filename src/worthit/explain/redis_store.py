"""The explanation store in Redis, for several `worthit serve` processes sharing one:
an explanation any of them wrote (live, or the background generator) serves them all.

Entries are one hash (`<prefix>explanations`, key -> compact JSON) and their order of last
use one sorted set (`<prefix>explanations:used`, key -> ms). A put writes both and drops the
least recently used past `capacity` in one Lua script, so concurrent writers cannot leave
the two out of step or the store over its bound; the bound is the store's own, whatever
Redis's `maxmemory` policy (an eviction policy that dropped the hash would drop them all).
As with SQLite, a hit's new last use is written in batches (`TOUCH_FLUSH_MS`), and a small
in-memory front holds kept texts, so a hit is mostly a dict lookup: a text under a key never
changes (the key is a hash of every input), only a failed entry is retried, and those are
always read from Redis.

Redis is a cache here, not the record: with `backing` (the market's own store, the service
always gives one) every put is written there first, and a key Redis lacks is read from
there and copied in, so explanations written before (`worthit explain --warm`) are served,
and a Redis restarted empty loses nothing. Redis unreachable: the backing store alone
answers, and Redis is tried again after `retry_after_s`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import cast

import orjson
import redis
from redis.exceptions import RedisError

from worthit.db.redis_outage import RedisOutage, ReportsOutage
from worthit.explain.store import (
    DEFAULT_CAPACITY,
    MEMORY_ENTRIES,
    TOUCH_FLUSH_MS,
    ExplanationStore,
    StoredExplanation,
)
from worthit.text.lru import LRU
from worthit.text.time import Clock, now_ms

log = logging.getLogger(__name__)

RETRY_AFTER_S = 1.0
_UNREACHABLE = (RedisError, OSError)

PUT = """
-- KEYS: entries hash, last-use sorted set; ARGV: key, json, ms, capacity
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
local over = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if over > 0 then
  local gone = redis.call('ZPOPMIN', KEYS[2], over)
  for i = 1, #gone, 2 do redis.call('HDEL', KEYS[1], gone[i]) end
end
return math.max(over, 0)
"""

_FIELDS = tuple(field.name for field in dataclasses.fields(StoredExplanation))


class RedisExplanationStore(ReportsOutage):
    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        capacity: int = DEFAULT_CAPACITY,
        *,
        clock: Clock = now_ms,
        backing: ExplanationStore | None = None,
        retry_after_s: float = RETRY_AFTER_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.client = client
        self.backing = backing
        self.capacity = capacity
        self.entries_key = prefix + "explanations"
        self.used_key = prefix + "explanations:used"
        self._clock = clock
        self._put = client.register_script(PUT)
        self._lock = threading.Lock()
        self._memory: LRU[str, StoredExplanation] = LRU(MEMORY_ENTRIES)
        self._touched: dict[str, int] = {}
        self._flushed_at = clock()
        self.outage = RedisOutage(
            "the shared explanation store is unreachable", retry_after_s, monotonic
        )
        self._count = 0
        self.hits = 0
        self.misses = 0
        self.evicted = 0

    def get(self, key: str) -> StoredExplanation | None:
        now = self._clock()
        with self._lock:
            entry = self._memory.get(key)
        if entry is None:
            entry = self._read(key)
            if entry is None and self.backing is not None:
                entry = self.backing.get(key)
                if entry is not None:
                    self._write(entry)
            if entry is None:
                self.misses += 1
                return None
            if not entry.failed:
                self._remember(entry)
        self.hits += 1
        with self._lock:
            self._touched[key] = now
            due = now - self._flushed_at >= TOUCH_FLUSH_MS
        if due:
            self.flush()
        return entry

    def latest(self, sku: str, language: str, model: str, verdict: str) -> StoredExplanation | None:
        """From the backing store, the record: Redis holds entries by key alone."""
        if self.backing is None:
            return None
        return self.backing.latest(sku, language, model, verdict)

    def put(self, entry: StoredExplanation) -> None:
        if self.backing is not None:
            self.backing.put(entry)
        entry = dataclasses.replace(entry, last_used_ms=self._clock())
        self._write(entry)
        if entry.failed:
            with self._lock:
                self._memory.pop(entry.key)
        else:
            self._remember(entry)

    def flush(self) -> None:
        """Write the last use of recent hits (the order `put` evicts by); only of entries
        still there (ZADD XX), so a touch cannot bring back one another worker evicted."""
        with self._lock:
            touched, self._touched = self._touched, {}
            self._flushed_at = self._clock()
        if not touched or self.outage.waiting:
            return
        try:
            self.client.zadd(self.used_key, touched, xx=True)
            self.outage.up()
        except _UNREACHABLE as exc:
            self.outage.failed(exc)

    def __len__(self) -> int:
        if self.backing is not None:
            return len(self.backing)
        if not self.outage.waiting:
            try:
                self._count = int(cast(int, self.client.zcard(self.used_key)))
                self.outage.up()
            except _UNREACHABLE as exc:
                self.outage.failed(exc)
        return self._count

    def close(self) -> None:
        self.flush()
        if self.backing is not None:
            self.backing.close()
        self.client.close()

    def _write(self, entry: StoredExplanation) -> None:
        if self.outage.waiting:
            return
        data = orjson.dumps([getattr(entry, name) for name in _FIELDS])
        args: list[str | bytes | int] = [entry.key, data, entry.last_used_ms, self.capacity]
        try:
            self.evicted += int(self._put(keys=[self.entries_key, self.used_key], args=args))
            self.outage.up()
        except _UNREACHABLE as exc:
            self.outage.failed(exc)

    def _read(self, key: str) -> StoredExplanation | None:
        if self.outage.waiting:
            return None
        try:
            raw = cast(bytes | None, self.client.hget(self.entries_key, key))
            self.outage.up()
        except _UNREACHABLE as exc:
            self.outage.failed(exc)
            return None
        if raw is None:
            return None
        try:
            return StoredExplanation(*orjson.loads(raw))
        except (orjson.JSONDecodeError, TypeError):
            return None  # written by another version of worthit: a miss

    def _remember(self, entry: StoredExplanation) -> None:
        with self._lock:
            self._memory.put(entry.key, entry)
