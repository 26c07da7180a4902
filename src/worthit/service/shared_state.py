"""What the `worthit serve` processes on one store share when they share a Redis.

With `settings.redis_url` (`--redis`): the tenants' rate-limit buckets
(service/redis_limiter.py), a second tier of the fact cache (facts/redis_tier.py), the
explanation store (explain/redis_store.py, in front of the market's), and two pub/sub
channels (service/redis_channels.py): fact-cache evictions, so a commit applied by one worker
drops the sheet from every worker's memory at once, and fired watch notifications, so a
shopper's SSE stream gets a watch fired by whichever worker applied the event. Without
it, each is this process's own.

Every key and channel is under a prefix derived from the store's path (or URL), so two
markets on one Redis never read each other's sheets or limits. Redis failing never refuses
a request: the limits fall back to each worker's own buckets, sheets are built from the
store, explanations are read from the market's own store, and /readyz lists what is
degraded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from worthit.explain.redis_store import RedisExplanationStore
from worthit.explain.store import ExplanationStore
from worthit.facts.cache import FactsCache
from worthit.facts.redis_tier import RedisSheetTier, evicted_skus, sync_client
from worthit.market.ingest.redis_stream import StreamConfig
from worthit.service.ratelimit import Limiter, TenantLimiter
from worthit.service.redis_channels import Channels
from worthit.service.redis_limiter import RedisLimiter
from worthit.service.settings import ServiceSettings
from worthit.watches.deliver import WatchService


def store_prefix(db_path: str | Path | None) -> str:
    """`worthit:<12 hex of the store's resolved path (or PostgreSQL URL)>:`, the namespace
    of one market."""
    if db_path is None:
        return "worthit:engine:"
    where = db_path if isinstance(db_path, str) else str(Path(db_path).resolve())
    digest = hashlib.sha256(where.encode()).hexdigest()[:12]
    return f"worthit:{digest}:"


class SharedState:
    """Built with the app. The market's parts take what they share from it when they are
    built (`fact_tier`, `watch_fanout`); `attach` subscribes them to what the other workers
    publish, and `start` runs the subscriber."""

    def __init__(self, settings: ServiceSettings, *, prefix: str | None = None) -> None:
        self.url = settings.redis_url
        self.prefix = prefix or store_prefix(settings.db_path)
        self.limiter: Limiter
        self.channels: Channels | None = None
        self.tier: RedisSheetTier | None = None
        self.explanations: RedisExplanationStore | None = None
        self._redis_limiter: RedisLimiter | None = None
        if self.url is None:
            self.limiter = TenantLimiter()
            return
        self.where = StreamConfig(self.url).where
        self._redis_limiter = RedisLimiter(self.url, prefix=self.prefix + "ratelimit:")
        self.limiter = self._redis_limiter
        self.channels = Channels(self.url)
        self.channels.on_reconnect = self._revive
        self._client = sync_client(self.url)

    @property
    def shared(self) -> bool:
        return self.url is not None

    def explanation_store(self, durable: ExplanationStore, capacity: int) -> ExplanationStore:
        """The store the answer flow uses: `durable` (the market's), behind Redis when
        shared."""
        if self.url is None:
            return durable
        self.explanations = RedisExplanationStore(
            self._client, self.prefix, capacity, backing=durable
        )
        return self.explanations

    def fact_tier(self) -> RedisSheetTier | None:
        """The second tier of the market's fact cache (None: not shared); its evictions
        are published to the other workers."""
        if self.channels is None:
            return None
        if self.tier is None:
            self.tier = RedisSheetTier(self._client, self.prefix, publish=self.channels.send)
        return self.tier

    def watch_fanout(self) -> Callable[[str, dict[str, Any]], None] | None:
        """What hands a fired watch's notification to the other workers' streams (None:
        not shared)."""
        channels = self.channels
        if channels is None:
            return None
        channel = self._watch_channel
        return lambda tenant, body: channels.send(channel, {"tenant": tenant, "body": body})

    def attach(self, facts: FactsCache, watches: WatchService | None) -> None:
        """Subscribe `facts` to the other workers' evictions and `watches`' streams to the
        notifications they fire."""
        if self.channels is None:
            return
        assert self.tier is not None, "the fact cache is built on fact_tier() first"
        self.channels.subscribe(self.tier.channel, lambda message: _evict(facts, message))
        if watches is not None:
            self.channels.subscribe(self._watch_channel, lambda message: _deliver(watches, message))

    @property
    def _watch_channel(self) -> str:
        return self.prefix + "watches"

    def start(self) -> None:
        """On the running loop: the subscriber and the sender."""
        if self.channels is not None:
            self.channels.start()

    async def stop(self) -> None:
        if self.channels is not None:
            await self.channels.stop()
        if self._redis_limiter is not None:
            await self._redis_limiter.aclose()

    def _revive(self) -> None:
        for part in (self._redis_limiter, self.tier, self.explanations):
            if part is not None:
                part.revive()

    def problems(self) -> list[str]:
        """/readyz's degraded lines: answers go on, but each worker is on its own."""
        if self.url is None:
            return []
        found = list(self._redis_limiter.problems()) if self._redis_limiter else []
        if self.tier is not None and self.tier.last_error is not None:
            found.append(
                f"fact cache: Redis at {self.where} is unreachable ({self.tier.last_error}); "
                "each worker builds its sheets from the store"
            )
        if self.explanations is not None and self.explanations.last_error is not None:
            found.append(
                f"explanations: Redis at {self.where} is unreachable "
                f"({self.explanations.last_error}); each worker reads the store's own"
            )
        if self.channels is not None and self.channels.last_error is not None:
            found.append(
                f"shared state: Redis pub/sub at {self.where} is down "
                f"({self.channels.last_error}); other workers' evictions and watch "
                "notifications do not reach this one"
            )
        return found

    def status(self) -> dict[str, Any] | None:
        """The `shared` entry of /readyz (None: this process shares nothing)."""
        if self.url is None:
            return None
        assert self._redis_limiter is not None and self.channels is not None
        tier = self.tier
        return {
            "redis": self.where,
            "prefix": self.prefix,
            "rate_limits_failed_open": self._redis_limiter.failed_open,
            "facts": None if tier is None else {
                "hits": tier.hits, "misses": tier.misses, "saved": tier.saved,
            },
            "pubsub": self.channels.status(),
        }  # fmt: skip


def _evict(facts: FactsCache, message: dict[str, Any]) -> None:
    facts.evict(evicted_skus(message), share=False)


def _deliver(watches: WatchService, message: dict[str, Any]) -> None:
    tenant, body = message.get("tenant"), message.get("body")
    if isinstance(tenant, str) and isinstance(body, dict):
        watches.streams.publish(tenant, body)
