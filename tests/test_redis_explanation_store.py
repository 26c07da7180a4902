"""The explanation store in Redis (explain/redis_store.py) against the real Redis: what
one worker writes the other serves, the bound holds across writers, least recently used
out first, and a dead Redis is a miss, never an error."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from worthit.explain.redis_store import RedisExplanationStore
from worthit.explain.store import ExplanationStore, SqliteExplanationStore
from worthit.facts.redis_tier import sync_client

from factories import make_stored
from redis_fixtures import PrivateRedis, private_redis, redis_prefix

__all__ = ["private_redis", "redis_prefix"]


class Clock:
    def __init__(self) -> None:
        self.ms = 1_000_000

    def __call__(self) -> int:
        self.ms += 1
        return self.ms


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    client = sync_client(redis_url)
    yield client
    client.close()


def test_what_one_worker_writes_the_other_serves_field_for_field(
    client: redis.Redis, redis_prefix: str
) -> None:
    clock = Clock()
    writer = RedisExplanationStore(client, redis_prefix, clock=clock)
    reader: ExplanationStore = RedisExplanationStore(client, redis_prefix, clock=clock)
    kept = make_stored(key="k1", text="等等再买：大促前价格常被抬高。")
    failed = make_stored(key="k2", text=None)
    writer.put(kept)
    writer.put(failed)
    got = reader.get("k1")
    assert got is not None and got.last_used_ms > 0
    assert got == dataclasses.replace(kept, last_used_ms=got.last_used_ms)
    other_failed = reader.get("k2")
    assert other_failed is not None and other_failed.failed
    assert reader.get("nope") is None and len(reader) == 2
    writer.put(make_stored(key="k2", text="Now it has a text."))
    retried = reader.get("k2")  # a failed entry is never held in memory
    assert retried is not None and retried.text == "Now it has a text."


def test_the_bound_holds_across_writers_least_recently_used_out_first(
    client: redis.Redis, redis_prefix: str
) -> None:
    clock = Clock()
    a = RedisExplanationStore(client, redis_prefix, capacity=3, clock=clock)
    b = RedisExplanationStore(client, redis_prefix, capacity=3, clock=clock)
    a.put(make_stored(key="k1"))
    b.put(make_stored(key="k2"))
    a.put(make_stored(key="k3"))
    assert b.get("k1") is not None
    b.flush()  # k1 was used last: k2 is now the oldest
    a.put(make_stored(key="k4"))
    c = RedisExplanationStore(client, redis_prefix, capacity=3, clock=clock)
    assert len(c) == 3 and a.evicted == 1
    assert c.get("k2") is None
    assert all(c.get(key) is not None for key in ("k1", "k3", "k4"))


def test_a_dead_redis_is_a_miss_and_a_dropped_put(private_redis: PrivateRedis) -> None:
    client = sync_client(private_redis.url)
    store = RedisExplanationStore(client, "worthit:test:", retry_after_s=0.0)
    store.put(make_stored(key="k1"))
    private_redis.kill()
    assert store.get("k1") is not None  # a kept text is served from memory
    assert store.get("k2") is None and store.last_error is not None
    store.put(make_stored(key="k3"))
    private_redis.start()
    fresh = RedisExplanationStore(sync_client(private_redis.url), "worthit:test:")
    assert fresh.get("k3") is None and len(fresh) == 0  # a new, empty Redis
    assert store.get("k2") is None and store.last_error is None
    store.close()
    fresh.close()


def test_behind_redis_the_markets_store_stays_the_record(
    private_redis: PrivateRedis, tmp_path: Path
) -> None:
    """What was written before (`worthit explain --warm`) is served and copied into Redis;
    a put lands in both; with Redis gone the market's store alone answers."""
    clock = Clock()
    durable = SqliteExplanationStore(tmp_path / "m.db", clock=clock)
    durable.put(make_stored(key="warm"))
    client = sync_client(private_redis.url)
    store = RedisExplanationStore(client, "worthit:test:", clock=clock, backing=durable)
    assert store.get("warm") is not None and client.hexists("worthit:test:explanations", "warm")
    store.put(make_stored(key="live", generated_at_ms=2_000))
    assert len(store) == 2 and client.hexists("worthit:test:explanations", "live")
    newest = store.latest("S2", "en", "m@1", "WAIT")
    assert newest is not None and newest.key == "live", "a product's texts are the record's"
    private_redis.kill()
    other = RedisExplanationStore(
        sync_client(private_redis.url), "worthit:test:", clock=clock, backing=durable
    )
    served = [other.get(key) for key in ("warm", "live")]
    assert all(entry is not None for entry in served) and other.last_error is not None
    other.client.close()
    store.close()
