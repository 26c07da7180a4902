"""The fact cache's shared tier in Redis: a sheet one worker built serves the others.

A sheet is kept under `<prefix>facts:<sku>:<revision>` with the TTL its builder drew, as
compact JSON (facts/sheet_codec.py) beside when it was built and how long the build took,
so the reader ages it and runs XFetch as if it had built it. The revision in the key is
the invalidation: a commit bumps the product's revision, and every reader asks for the new
one, so an older sheet is never read again and simply expires. Evictions also go out on
`<prefix>facts:evicted`, so the other workers' in-memory tiers drop those sheets (and learn
of new products) at once instead of at their next revision check.

Reads are on the answer's path and synchronous (the decide path is), so the client has a
short timeout, and after a failure Redis is left alone for `retry_after_s`: while it is
down every miss builds from the store, as it would without a tier, at no extra wait.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import orjson
import redis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from worthit.db.redis_outage import RedisOutage, ReportsOutage
from worthit.facts.cache import SharedSheet
from worthit.facts.sheet import FactSheet
from worthit.facts.sheet_codec import sheet_from_dict, sheet_json

log = logging.getLogger(__name__)

TIMEOUT_S = 0.1
"""A shared sheet slower to fetch than this is slower than building one."""
RETRY_AFTER_S = 1.0

_UNREACHABLE = (RedisError, OSError)

Publish = Callable[[str, dict[str, Any]], None]
"""Send a message on a channel without waiting (`Channels.send`)."""


def sync_client(url: str, timeout_s: float = TIMEOUT_S) -> redis.Redis:
    """A client that fails fast instead of retrying: the caller has a fallback."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=timeout_s,
        socket_timeout=timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


class RedisSheetTier(ReportsOutage):
    def __init__(
        self,
        client: redis.Redis,
        prefix: str,
        *,
        publish: Publish | None = None,
        retry_after_s: float = RETRY_AFTER_S,
        wall: Callable[[], float] = time.time,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.prefix = prefix
        self.channel = prefix + "facts:evicted"
        self.publish = publish
        """Where evictions go; None: published synchronously on `client`."""
        self._wall = wall
        """Ages a sheet across processes: the builder's and the reader's wall clocks."""
        self.outage = RedisOutage("the shared fact cache is unreachable", retry_after_s, clock)
        self.hits = 0
        self.misses = 0
        self.saved = 0

    def key(self, sku: str, revision: int) -> str:
        return f"{self.prefix}facts:{sku}:{revision}"

    def load(self, sku: str, revision: int) -> SharedSheet | None:
        if self.outage.waiting:
            return None
        try:
            with self.client.pipeline(transaction=False) as pipe:
                pipe.get(self.key(sku, revision))
                pipe.pttl(self.key(sku, revision))
                raw, ttl_ms = pipe.execute()
        except _UNREACHABLE as exc:
            self.outage.failed(exc)
            return None
        self.outage.up()
        if raw is None or ttl_ms <= 0:
            self.misses += 1
            return None
        try:
            value = orjson.loads(raw)
            sheet = sheet_from_dict(value["sheet"])
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            # a sheet written by another version of worthit: build it again
            self.misses += 1
            return None
        self.hits += 1
        age_s = max(0.0, self._wall() - value["built"])
        return SharedSheet(sheet, age_s, ttl_ms / 1000, value["delta"])

    def save(self, sheet: FactSheet, ttl_s: float, delta_s: float) -> None:
        if self.outage.waiting:
            return
        value = b'{"built":%s,"delta":%s,"sheet":%s}' % (
            orjson.dumps(self._wall()), orjson.dumps(delta_s), sheet_json(sheet),
        )  # fmt: skip
        try:
            key = self.key(sheet.sku, sheet.revision)
            self.client.set(key, value, px=max(1, round(ttl_s * 1000)))
        except _UNREACHABLE as exc:
            self.outage.failed(exc)
            return
        self.outage.up()
        self.saved += 1

    def evicted(self, skus: list[str]) -> None:
        message = {"skus": skus}
        if self.publish is not None:
            self.publish(self.channel, message)
            return
        if self.outage.waiting:
            return
        try:
            self.client.publish(self.channel, orjson.dumps({"origin": "", "message": message}))
        except _UNREACHABLE as exc:
            self.outage.failed(exc)


def evicted_skus(message: dict[str, Any]) -> list[str]:
    """The SKUs of an eviction message another worker published."""
    skus = message.get("skus")
    return [sku for sku in skus if isinstance(sku, str)] if isinstance(skus, list) else []
