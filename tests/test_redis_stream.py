"""Redis Streams against the real Redis: the consumer group feeding the apply path, dead
letters, a consumer killed mid-batch, Redis itself killed and restarted while events flow,
and `worthit simulate --live --redis`.

Most tests use the shared Redis (127.0.0.1:6379, a stream key of their own, deleted after).
The outage tests start a private `redis-server` on a free port, so killing it disturbs no
one else's tests; it keeps the stream in an append-only file (fsync always), as a Redis
holding an event log should, so "none lost" is Redis's promise and the consumer's alike.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from worthit.http.app import create_app
from worthit.market.bus import EventBus
from worthit.market.events import Event, EventError, parse_event, parse_json_event
from worthit.market.ingest.redis_stream import (
    Backoff,
    ConsumerState,
    StreamConfig,
    StreamConsumer,
    StreamPublisher,
)
from worthit.market.store import MarketStore
from worthit.text.time import iso

from conftest import MARKET_NOW_MS, run_cli
from live_server import LiveServer
from redis_fixtures import PrivateRedis, poll, private_redis
from service_fixtures import fake_engine, market_copy, market_settings

__all__ = ["market_copy", "private_redis"]

FAST = Backoff(first_s=0.02, max_s=0.3)


@pytest.fixture
def stream_key(redis_url: str) -> Iterator[str]:
    key = f"worthit:test:{uuid.uuid4().hex[:12]}"
    yield key
    client = redis.Redis.from_url(redis_url)
    client.delete(key, key + ":dead")
    client.close()


def valid(data: dict[str, Any]) -> Event:
    parsed = parse_event(data)
    assert not isinstance(parsed, EventError), parsed
    return parsed


def stock(n: int, sku: str = "S1", source: str = "fault") -> Event:
    """A stock reading with a time of its own, so each one writes a row."""
    return valid(
        {
            "type": "stock",
            "event_id": f"{source}-{n}",
            "source": source,
            "sku": sku,
            "ts": iso(MARKET_NOW_MS - 500_000 + n),
            "quantity": n % 50,
        }
    )


def config(url: str, key: str, **overrides: Any) -> StreamConfig:
    defaults: dict[str, Any] = {"block_ms": 50, "claim_idle_s": 0.2, "backoff": FAST}
    return StreamConfig(url, key, **(defaults | overrides))


async def eventually(check: Callable[[], bool | Awaitable[bool]], within_s: float = 15) -> None:
    deadline = time.monotonic() + within_s
    while True:
        outcome = check()
        if outcome if isinstance(outcome, bool) else await outcome:
            return
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


def pending(url: str, key: str, group: str = "worthit") -> int:
    client = redis.Redis.from_url(url)
    try:
        return int(client.xpending(key, group)["pending"])
    finally:
        client.close()


def test_entries_are_applied_once_acked_after_the_commit_and_seen_by_the_next_answer(
    redis_url: str, stream_key: str, market_copy: Path
) -> None:
    settings = market_settings(
        market_copy, auth=False, redis_url=redis_url, redis_stream=stream_key
    )
    ask = {"question": "Is the Aurora NC700 worth buying?", "sku": "S1"}
    with LiveServer(create_app(settings, engine=fake_engine())) as server:
        before = httpx.post(server.base_url + "/v1/decide", json=ask).json()
        new_price = round(before["facts"]["current_price"] - 7.0, 2)
        price = valid(
            {
                "type": "price",
                "event_id": "pos-r1",
                "source": "pos",
                "sku": "S1",
                "ts": iso(MARKET_NOW_MS - 1000),
                "price": new_price,
            }
        )

        async def publish() -> None:
            publisher = StreamPublisher(redis_url, stream_key)
            for event in (price, stock(1), price):  # the price twice: a redelivery
                await publisher.publish(event)
            await publisher.close()

        asyncio.run(publish())
        poll(lambda: httpx.get(server.base_url + "/readyz").json()["events"]["redis"]["acked"] == 3)
        after = httpx.post(server.base_url + "/v1/decide", json=ask).json()
        ready = httpx.get(server.base_url + "/readyz").json()
    assert after["facts"]["current_price"] == new_price
    assert after["facts_version"] != before["facts_version"]
    consumer = ready["events"]["redis"]
    assert consumer["state"] == "connected" and ready["ready"] is True
    assert (consumer["applied"], consumer["duplicates"], consumer["dead_lettered"]) == (2, 1, 0)
    assert consumer["stream"] == stream_key and ready["degraded"] == []
    assert pending(redis_url, stream_key) == 0


def test_a_malformed_entry_is_dead_lettered_at_once_and_a_rejected_one_after_five_deliveries(
    redis_url: str, stream_key: str, market_copy: Path
) -> None:
    client = redis.Redis.from_url(redis_url)
    bad_price = {"type": "price", "event_id": "bad-1", "source": "pos", "sku": "S1",
                 "ts": iso(MARKET_NOW_MS), "price": -1}  # fmt: skip
    unknown = {**bad_price, "event_id": "bad-2", "sku": "NO-SUCH-SKU", "price": 10}
    client.xadd(stream_key, {"event": "{not json"})
    client.xadd(stream_key, {"payload": stock(1).model_dump_json()})
    client.xadd(stream_key, {"event": json.dumps(bad_price)})
    client.xadd(stream_key, {"event": json.dumps(unknown)})
    client.xadd(stream_key, {"event": stock(2).model_dump_json()})
    store = MarketStore(market_copy)

    async def run() -> StreamConsumer:
        bus = EventBus(store)
        bus.start()
        consumer = StreamConsumer(config(redis_url, stream_key, claim_idle_s=0.05), bus.submit)
        consumer.start()
        await eventually(lambda: consumer.stats.dead_lettered == 4)
        await consumer.stop()
        await bus.stop()
        return consumer

    consumer = asyncio.run(run())
    dead = client.xrange(stream_key + ":dead")
    client.close()
    reasons = [fields[b"reason"].decode() for _, fields in dead]
    assert reasons[0].startswith("(event): not valid JSON")
    assert reasons[1] == "no 'event' field"
    assert reasons[2] == "price: Input should be greater than or equal to 0.01"
    assert reasons[3] == "rejected 5 times: unknown sku 'NO-SUCH-SKU': send its product event first"
    assert [fields[b"deliveries"] for _, fields in dead] == [b"1", b"1", b"1", b"5"]
    assert json.loads(dead[3][1][b"event"]) == unknown
    assert (consumer.stats.applied, consumer.stats.retrying) == (1, 4)
    assert pending(redis_url, stream_key) == 0
    assert store.latest_stock("S1") is not None


def test_a_rejected_event_lands_on_a_later_delivery_once_its_product_has(
    redis_url: str, stream_key: str, market_copy: Path
) -> None:
    store = MarketStore(market_copy)
    price = {"type": "price", "event_id": "late-price", "source": "pos", "sku": "NEW-1",
             "ts": iso(MARKET_NOW_MS), "price": 99.5}  # fmt: skip
    product = {"type": "product", "event_id": "late-product", "source": "pos", "sku": "NEW-1",
               "title": "Nimbus Kettle"}  # fmt: skip

    async def run() -> StreamConsumer:
        bus = EventBus(store)
        bus.start()
        consumer = StreamConsumer(config(redis_url, stream_key), bus.submit)
        consumer.start()
        publisher = StreamPublisher(redis_url, stream_key)
        await publisher.publish(valid(price))
        await eventually(lambda: consumer.stats.retrying == 1)
        await publisher.publish(valid(product))
        await eventually(lambda: consumer.stats.applied == 2)
        await publisher.close()
        await consumer.stop()
        await bus.stop()
        return consumer

    consumer = asyncio.run(run())
    assert [p.price for p in store.prices("NEW-1")] == [99.5]
    assert consumer.stats.dead_lettered == 0 and pending(redis_url, stream_key) == 0


DOOMED = """
import asyncio, os, sys
from worthit.market.apply import apply_events
from worthit.market.ingest.redis_stream import StreamConfig, StreamConsumer
from worthit.market.store import MarketStore

store = MarketStore(sys.argv[1])

async def die(events):
    if sys.argv[4] == "after-commit":
        apply_events(store, events)
    os._exit(17)  # read, maybe committed, never acknowledged

async def main():
    StreamConsumer(StreamConfig(sys.argv[2], sys.argv[3], consumer="doomed"), die).start()
    await asyncio.sleep(60)

asyncio.run(main())
"""


@pytest.mark.parametrize("dies", ["before-apply", "after-commit"])
def test_a_consumer_killed_mid_batch_leaves_its_entries_to_another(
    redis_url: str, stream_key: str, market_copy: Path, dies: str
) -> None:
    async def publish(numbers: range) -> None:
        publisher = StreamPublisher(redis_url, stream_key)
        for n in numbers:
            await publisher.publish(stock(n))
        await publisher.close()

    asyncio.run(publish(range(40)))
    doomed = subprocess.run(
        [sys.executable, "-c", DOOMED, str(market_copy), redis_url, stream_key, dies],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert doomed.returncode == 17, doomed.stderr
    assert pending(redis_url, stream_key) == 40
    store = MarketStore(market_copy)
    applied_before = store.applied_event_count()

    async def survive() -> StreamConsumer:
        bus = EventBus(store)
        bus.start()
        consumer = StreamConsumer(config(redis_url, stream_key), bus.submit)
        consumer.start()
        await publish(range(40, 50))
        await eventually(lambda: consumer.stats.acked == 50)
        await consumer.stop()
        await bus.stop()
        return consumer

    consumer = asyncio.run(survive())
    stats = consumer.stats
    assert stats.claimed == 40 and pending(redis_url, stream_key) == 0
    if dies == "after-commit":
        assert (stats.applied, stats.duplicates) == (10, 40)
    else:
        assert (stats.applied, stats.duplicates) == (50, 0)
    assert store.applied_event_count() - applied_before == stats.applied
    client = redis.Redis.from_url(redis_url)
    consumers = {c["name"]: c["pending"] for c in client.xinfo_consumers(stream_key, "worthit")}
    client.close()
    assert consumers == {b"doomed": 0}  # the survivor left the group on its way out


@pytest.mark.parametrize("private_redis", [True], indirect=True)
def test_redis_killed_and_restarted_while_events_flow_loses_none_and_applies_none_twice(
    private_redis: PrivateRedis, market_copy: Path
) -> None:
    """Also: while Redis is down /readyz says degraded (still 200) and answers go on."""
    total = 300
    settings = market_settings(
        market_copy, auth=False, redis_url=private_redis.url, redis_claim_idle_s=0.5
    )
    published = threading.Event()
    halfway = threading.Event()
    publisher = StreamPublisher(private_redis.url, backoff=FAST)

    async def produce() -> None:
        for n in range(total):
            await publisher.publish(stock(n))
            if n == total // 3:
                halfway.set()
            await asyncio.sleep(0.002)
        await publisher.close()
        published.set()

    ask = {"question": "Is the Aurora NC700 worth buying?"}
    with LiveServer(create_app(settings, engine=fake_engine())) as server:
        producer = threading.Thread(target=asyncio.run, args=(produce(),), daemon=True)
        producer.start()
        assert halfway.wait(30)
        private_redis.kill()
        ready_url = server.base_url + "/readyz"
        poll(lambda: httpx.get(ready_url).json()["events"]["redis"]["state"] == "disconnected")
        during = httpx.get(ready_url)
        answer = httpx.post(server.base_url + "/v1/decide", json=ask)
        time.sleep(0.3)
        private_redis.start()
        assert published.wait(60)
        producer.join(10)
        poll(lambda: httpx.get(ready_url).json()["events"]["redis"]["applied"] >= total, 30)
        poll(lambda: pending(private_redis.url, "worthit:events") == 0)
        after = httpx.get(ready_url).json()
    body = during.json()
    assert during.status_code == 200 and body["ready"] is True
    assert any("Redis stream worthit:events" in line for line in body["degraded"])
    assert answer.status_code == 200 and answer.json()["verdict"]
    consumer = after["events"]["redis"]
    assert consumer["state"] == ConsumerState.CONNECTED and after["degraded"] == []
    assert consumer["applied"] == total  # every event once; a resent copy is a duplicate
    assert consumer["reconnects"] >= 1 and consumer["dead_lettered"] == 0
    assert publisher.retries >= 1  # events were still being sent while Redis was down
    store = MarketStore(market_copy)
    assert store.applied_event_count() == total


@pytest.mark.parametrize("private_redis", [False], indirect=True)
def test_a_group_lost_with_a_redis_without_persistence_is_joined_again(
    private_redis: PrivateRedis, market_copy: Path
) -> None:
    store = MarketStore(market_copy)

    async def run() -> StreamConsumer:
        bus = EventBus(store)
        bus.start()
        consumer = StreamConsumer(config(private_redis.url, "worthit:events"), bus.submit)
        consumer.start()
        publisher = StreamPublisher(private_redis.url, backoff=FAST)
        for n in range(5):
            await publisher.publish(stock(n))
        await eventually(lambda: consumer.stats.applied == 5)
        private_redis.kill()
        await eventually(lambda: consumer.state is ConsumerState.DISCONNECTED)
        await asyncio.to_thread(private_redis.start)
        for n in range(5, 10):
            await publisher.publish(stock(n))
        await eventually(lambda: consumer.stats.applied == 10)
        await publisher.close()
        await consumer.stop()
        await bus.stop()
        return consumer

    consumer = asyncio.run(run())
    assert consumer.stats.acked == 10 and consumer.stats.reconnects >= 1


def test_a_service_whose_redis_is_unreachable_answers_and_says_it_is_degraded(
    market_copy: Path,
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        nobody = probe.getsockname()[1]
    url = f"redis://:secret@127.0.0.1:{nobody}/0"
    settings = market_settings(market_copy, auth=False, redis_url=url)
    with LiveServer(create_app(settings, engine=fake_engine())) as server:
        poll(lambda: httpx.get(server.base_url + "/readyz").json()["degraded"] != [])
        ready = httpx.get(server.base_url + "/readyz")
        answer = httpx.post(server.base_url + "/v1/decide", json={"question": "Is S1 worth it?"})
    assert ready.status_code == 200 and ready.json()["ready"] is True
    consumer = ready.json()["events"]["redis"]
    assert consumer["state"] == "disconnected" and "Error" in consumer["last_error"]
    assert consumer["redis"] == f"redis://127.0.0.1:{nobody}/0"  # no password shown
    assert "secret" not in ready.text
    assert answer.status_code == 200


def test_simulate_live_publishes_to_the_stream_instead_of_applying(
    redis_url: str, stream_key: str, market_copy: Path
) -> None:
    before = MarketStore(market_copy).applied_event_count()
    result = run_cli(
        "simulate", "--live", "--rate", "100", "--duration", "1", "--db", str(market_copy),
        "--redis", redis_url, "--redis-stream", stream_key,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert f"published to {stream_key}" in result.stdout
    client = redis.Redis.from_url(redis_url)
    entries = client.xrange(stream_key)
    client.close()
    assert len(entries) >= 20
    events = [parse_json_event(fields[b"event"]) for _, fields in entries]
    assert all(getattr(event, "source", None) == "live" for event in events)
    assert MarketStore(market_copy).applied_event_count() == before


def test_simulate_redis_needs_live_and_a_redis_url(market_copy: Path) -> None:
    no_live = run_cli("simulate", "--db", str(market_copy), "--redis", "redis://127.0.0.1:1/0")
    assert no_live.returncode == 2 and "--live" in no_live.stderr
    bad = run_cli("simulate", "--live", "--db", str(market_copy), "--redis", "127.0.0.1:6379")
    assert bad.returncode == 2 and "--redis" in bad.stderr
