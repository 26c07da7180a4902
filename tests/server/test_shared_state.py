"""Two workers through one Redis (service/shared_state.py): two apps on one store and one
Redis, as `worthit serve --workers 2 --redis` runs them. A watch fired by the worker that
applied the event reaches a shopper's SSE stream held by the other; the tenant's limits
are one budget; and a Redis that dies leaves both answering, /readyz saying degraded."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from pathlib import Path
from typing import Any

import httpx
import redis

from worthit.http.app import create_app
from worthit.service.shared_state import store_prefix
from worthit.service.tenants import TenantStore
from worthit.text.time import iso
from worthit.watches.store import Condition, Delivery, WatchStore

from conftest import MARKET_NOW_MS
from live_server import LiveServer
from redis_fixtures import PrivateRedis, poll, private_redis
from service_fixtures import fake_engine, market_copy, market_settings

__all__ = ["market_copy", "private_redis"]

WAIT_SKU = "S2"
"""WAIT in the small market at 719.43; BUY at 500."""


@contextmanager
def workers(market: Path, url: str, n: int = 2) -> Iterator[list[LiveServer]]:
    """`n` apps on `market` sharing the Redis at `url`; its keys deleted after."""
    prefix = store_prefix(market)
    settings = market_settings(
        market, redis_url=url, redis_stream=prefix + "events", audit=False
    )  # the audit log has one writer
    engines = [fake_engine() for _ in range(n)]
    try:
        with ExitStack() as stack:
            servers = [
                stack.enter_context(LiveServer(create_app(settings, engine=engine)))
                for engine in engines
            ]
            for server in servers:
                poll(lambda s=server: shared(s)["pubsub"]["connected"], what="subscribed")
            yield servers
    finally:
        for engine in engines:
            engine.close()
        client = redis.Redis.from_url(url)
        with suppress(redis.ConnectionError):  # a test that killed its private Redis
            keys = list(client.scan_iter(match=prefix + "*"))
            if keys:
                client.delete(*keys)
        client.close()


def shared(server: LiveServer) -> dict[str, Any]:
    return dict(httpx.get(server.base_url + "/readyz").json()["shared"])


def key(market: Path, name: str, rpm: int = 1_000) -> dict[str, str]:
    _, secret = TenantStore(market).create(name, "medium", rpm=rpm, tpm=10_000)
    return {"Authorization": f"Bearer {secret}"}


def writer(market: Path) -> dict[str, str]:
    """A key that writes market events, as source `pos`."""
    _, secret = TenantStore(market).create("pos", "medium", 1_000, 10_000, scope="events",
                                           source="pos")  # fmt: skip
    return {"Authorization": f"Bearer {secret}"}


def price(event_id: str, value: float) -> dict[str, Any]:
    return {"type": "price", "event_id": event_id, "source": "pos", "sku": WAIT_SKU,
            "ts": iso(MARKET_NOW_MS - 1000), "price": value}  # fmt: skip


def test_a_watch_fired_by_one_worker_reaches_the_sse_stream_on_the_other(
    market_copy: Path, redis_url: str
) -> None:
    headers = key(market_copy, "acme")
    with workers(market_copy, redis_url) as (applier, holder):
        made = httpx.post(applier.base_url + "/v1/watches", headers=headers,
                          json={"sku": WAIT_SKU, "condition": "verdict_buy"}).json()  # fmt: skip
        url = holder.base_url + "/v1/watches/events"
        with httpx.stream("GET", url, headers=headers, timeout=20) as stream:
            lines = stream.iter_lines()
            assert next(lines) == "event: ready"
            sent = httpx.post(applier.base_url + "/v1/events", headers=writer(market_copy),
                              json={"events": [price("p1", 500.0)]})  # fmt: skip
            assert sent.status_code == 200 and sent.json()["applied"], sent.text
            event = next(line for line in lines if line.startswith("event:"))
            data = json.loads(next(line for line in lines if line.startswith("data:"))[5:])
        fired = httpx.get(f"{holder.base_url}/v1/watches/{made['id']}", headers=headers).json()
        evicted = shared(holder)["pubsub"]["received"]
    assert event == "event: watch" and data["data"]["watch_id"] == made["id"]
    assert data["data"]["verdict"] == "BUY" and data["data"]["price"] == 500.0
    assert fired["state"] == "fired"
    assert evicted >= 2  # the sheet's eviction and the notification came over Redis


def test_workers_racing_to_fire_one_watch_fire_it_once(market_copy: Path) -> None:
    """The store's fired flag decides, in one transaction per process (BEGIN IMMEDIATE and
    an UPDATE only of an armed watch), so of the workers evaluating one event's watches
    exactly one fires each watch and queues its delivery."""
    stores = [WatchStore(market_copy) for _ in range(4)]
    armed = [
        stores[0].add("acme", WAIT_SKU, Condition.VERDICT_BUY, None, delivery, url, 1)
        for delivery, url in ((Delivery.SSE, None), (Delivery.WEBHOOK, "http://127.0.0.1/h"))
    ]
    start = threading.Barrier(len(stores))
    fired: list[tuple[str, str | None]] = []

    def race(store: WatchStore) -> None:
        start.wait()
        for watch in armed:
            fired.append((watch.watch_id, store.fire(watch.watch_id, {"n": 1}, 2)))

    threads = [threading.Thread(target=race, args=(store,)) for store in stores]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [(watch_id, outcome) for watch_id, outcome in fired if outcome is not None]
    assert sorted(watch_id for watch_id, _ in won) == sorted(w.watch_id for w in armed)
    assert len(stores[0].due(10, 10)) == 1  # one webhook queued, not one per worker
    for store in stores:
        store.close()


def test_a_tenants_limit_is_one_budget_across_workers(market_copy: Path, redis_url: str) -> None:
    headers = key(market_copy, "acme", rpm=4)
    with workers(market_copy, redis_url) as (a, b):
        codes = [
            httpx.get(server.base_url + "/v1/watches", headers=headers).status_code
            for server in (a, b, a, b, a, b)
        ]
    assert codes == [200] * 4 + [429] * 2


def test_with_redis_dead_both_workers_answer_and_say_they_are_degraded(
    market_copy: Path, private_redis: PrivateRedis
) -> None:
    headers = key(market_copy, "acme", rpm=4)
    ask = {"question": "Is S1 worth buying?"}
    with workers(market_copy, private_redis.url) as (a, b):
        assert httpx.post(a.base_url + "/v1/decide", json=ask, headers=headers).status_code == 200
        private_redis.kill()
        answers = [
            httpx.post(s.base_url + "/v1/decide", json=ask, headers=headers).status_code
            for s in (a, b)
        ]
        ready = httpx.get(a.base_url + "/readyz")
    assert answers == [200, 200]
    body = ready.json()
    assert ready.status_code == 200 and body["ready"] is True
    degraded = " | ".join(body["degraded"])
    assert "rate limits: Redis at redis://127.0.0.1" in degraded
    assert "Redis pub/sub" in degraded
    assert body["shared"]["rate_limits_failed_open"] >= 1


def test_a_worker_starting_after_another_warms_from_the_sheets_it_shared(
    market_copy: Path, redis_url: str
) -> None:
    """Start-up's warming goes through the shared fact tier: the first builds and saves
    every sheet, the second (started after it) reads them instead of building."""
    with workers(market_copy, redis_url) as (first, second):
        products = httpx.get(first.base_url + "/readyz").json()["products"]
        assert shared(first)["facts"]["saved"] == products
        assert shared(second)["facts"]["hits"] == products
        ready = httpx.get(second.base_url + "/readyz").json()
        assert ready["facts"]["warmed"] == ready["facts"]["cached"] == products
