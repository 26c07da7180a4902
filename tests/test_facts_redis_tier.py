"""The fact cache's Redis tier (facts/redis_tier.py) against the real Redis: two caches on
one store, as two workers: a sheet one builds the other serves without a build, a commit
makes the shared sheet unusable at once, an eviction one publishes drops the other's
in-memory sheet, and a dead Redis leaves every answer to the store."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import redis

from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.facts.redis_tier import RedisSheetTier, evicted_skus, sync_client
from worthit.facts.sheet import FactSheet
from worthit.market.events import EventError, parse_event
from worthit.market.store import MarketStore
from worthit.service.redis_channels import Channels
from worthit.text.time import iso

from conftest import MARKET_NOW_MS, market_clock
from redis_fixtures import PrivateRedis, private_redis, redis_prefix

__all__ = ["private_redis", "redis_prefix"]


class CountingBuilder(FactsBuilder):
    """The real builder, counting what it builds (the store reads a tier spares)."""

    builds = 0

    def build(self, sku: str, at_ms: int | None = None) -> FactSheet | None:
        self.builds += 1
        return super().build(sku, at_ms)


def worker(path: Path, client: redis.Redis, prefix: str, beta: float = 1.0) -> FactsCache:
    """One worker's cache: its own store connection, the shared tier."""
    builder = CountingBuilder(MarketStore(path), market_clock())
    return FactsCache(builder, beta=beta, tier=RedisSheetTier(client, prefix))


def builds(cache: FactsCache) -> int:
    assert isinstance(cache.builder, CountingBuilder)
    return cache.builder.builds


@pytest.fixture
def market(small_market: Path, tmp_path: Path) -> Path:
    shutil.copy(small_market, tmp_path / "m.db")
    return tmp_path / "m.db"


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = sync_client(redis_url)
    yield client
    client.close()


def price(event_id: str, value: float, sku: str = "S1") -> object:
    parsed = parse_event({"type": "price", "event_id": event_id, "source": "test", "sku": sku,
                          "ts": iso(MARKET_NOW_MS - 1000), "price": value})  # fmt: skip
    assert not isinstance(parsed, EventError), parsed
    return parsed


def test_a_sheet_built_by_one_worker_is_served_by_the_other_without_a_build(
    market: Path, client: redis.Redis, redis_prefix: str
) -> None:
    a, b = worker(market, client, redis_prefix), worker(market, client, redis_prefix)
    built = a.get("S1")
    served = b.get("S1")
    assert built is not None and served is not None
    assert builds(a) == 1 and builds(b) == 0 and b.tier_hits == 1
    assert served.version == built.version and served.current_price == built.current_price
    assert served.data_age_ms >= built.data_age_ms  # aged by the time since it was built
    again = b.get("S1")
    assert again is not None and b.hits == 1 and builds(b) == 0  # memory first now


def test_xfetch_runs_on_the_shared_copy_so_one_reader_refreshes_it_for_all(
    market: Path, client: redis.Redis, redis_prefix: str
) -> None:
    """A reader that draws the early refresh (certain here: a huge beta) rebuilds the
    shared sheet and saves the new one, rather than taking the copy about to expire."""
    a = worker(market, client, redis_prefix)
    eager = worker(market, client, redis_prefix, beta=1e12)
    assert a.get("S1") is not None
    assert eager.get("S1") is not None
    assert builds(eager) == 1 and eager.early_refreshes == 1 and eager.tier_hits == 0
    tier = eager.tier
    assert isinstance(tier, RedisSheetTier) and tier.saved == 1


def test_a_commit_makes_the_shared_sheet_unusable_at_once(
    market: Path, client: redis.Redis, redis_prefix: str
) -> None:
    a, b = worker(market, client, redis_prefix), worker(market, client, redis_prefix)
    assert a.get("S1") is not None
    MarketStore(market).apply([price("x1", 123.45)])  # a writer neither cache hears of
    after = b.get("S1")
    assert after is not None and after.current_price == 123.45 and builds(b) == 1


def test_an_eviction_published_by_one_worker_drops_the_others_sheet(
    market: Path, client: redis.Redis, redis_url: str, redis_prefix: str
) -> None:
    a, b = worker(market, client, redis_prefix), worker(market, client, redis_prefix)

    async def run() -> int:
        channels = {name: Channels(redis_url) for name in "ab"}
        for name, cache in (("a", a), ("b", b)):
            tier = cache.tier
            assert isinstance(tier, RedisSheetTier)
            tier.publish = channels[name].send
            channels[name].subscribe(
                tier.channel, lambda m, c=cache: c.evict(evicted_skus(m), share=False)
            )
            channels[name].start()
            await channels[name].subscribed()
        assert a.get("S1") is not None and b.get("S1") is not None and len(b) == 1
        a.evict(["S1", "NEW-1"])
        for _ in range(500):
            if b.evictions:
                break
            await asyncio.sleep(0.01)
        received = channels["b"].received
        for each in channels.values():
            await each.stop()
        return received

    assert asyncio.run(run()) == 1
    assert len(a) == 0 and len(b) == 0 and b.evictions == 1
    assert b.get("NEW-1") is None and b.bloom_rejects == 0  # known to b's filter now


def test_with_redis_dead_the_cache_builds_from_the_store(
    market: Path, private_redis: PrivateRedis
) -> None:
    client = sync_client(private_redis.url)
    a = worker(market, client, "worthit:test:")
    assert a.get("S1") is not None and a.tier is not None
    private_redis.kill()
    sheet = a.get("S2")
    tier = a.tier
    assert isinstance(tier, RedisSheetTier)
    assert sheet is not None and sheet.sku == "S2" and builds(a) == 2
    assert tier.last_error is not None and "Connection" in tier.last_error
    a.evict(["S1"])  # the eviction cannot go out either; it still drops the sheet here
    assert a.get("S1") is not None and builds(a) == 3
    client.close()


def test_a_sheet_an_older_worthit_shared_is_rebuilt_not_an_error(
    market: Path, client: redis.Redis, redis_prefix: str
) -> None:
    """A sheet in the shape an older worthit wrote (an `extra` dict, no staleness fields)
    lies under the same key during a rolling upgrade: it is a miss, and the reader builds
    and shares its own."""
    a = worker(market, client, redis_prefix)
    built = a.get("S1")
    assert built is not None
    tier = a.tier
    assert isinstance(tier, RedisSheetTier)
    key = tier.key("S1", built.revision)
    stored = orjson.loads(client.get(key))  # type: ignore[arg-type]
    old = {k: v for k, v in stored["sheet"].items() if k not in ("price_age_days", "price_stale")}
    stored["sheet"] = old | {"extra": {"live": True}}
    client.set(key, orjson.dumps(stored), px=30_000)
    b = worker(market, client, redis_prefix)
    rebuilt = b.get("S1")
    assert rebuilt is not None and rebuilt.version == built.version
    b_tier = b.tier
    assert isinstance(b_tier, RedisSheetTier)
    assert (b_tier.hits, b_tier.misses, builds(b)) == (0, 1, 1)
