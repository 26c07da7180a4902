"""The feed poller against a real loopback HTTP server that serves ETags and 304s, into a
real bus and store; and a feed configured on the real service, seen in /v1/decide."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import typer

from worthit.cli.serve import feed_config
from worthit.http.app import create_app
from worthit.market.bus import EventBus
from worthit.market.ingest.feed import (
    FeedConfig,
    FeedFormat,
    FeedPoller,
    FeedState,
    PollResult,
    parse_feed,
)
from worthit.market.ingest.redis_stream import Backoff
from worthit.market.store import MarketStore
from worthit.text.time import iso

from conftest import MARKET_NOW_MS
from live_server import LiveServer
from service_fixtures import fake_engine, market_copy, market_settings

__all__ = ["market_copy"]

T0_MS = 1_790_000_000_000
FAST = Backoff(first_s=0.02, max_s=0.08)


class FeedServer:
    """One feed file on a loopback http.server: ETag and Last-Modified on every 200, 304
    when the request's validators match (If-None-Match first, as RFC 9110 says); the
    statuses in `failures` are answered first, one per request."""

    def __init__(self, path: str = "/feed") -> None:
        self.path = path
        self.lock = threading.Lock()
        self.requests: list[dict[str, str]] = []
        self.failures: list[tuple[int, dict[str, str]]] = []
        self.version = 0
        self.set(b"[]", "application/json")
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}{self.path}"

    def set(self, body: bytes, content_type: str) -> None:
        with self.lock:
            self.version += 1
            self.body, self.content_type = body, content_type
            self.etag = f'"{hashlib.sha256(body).hexdigest()[:16]}"'
            self.last_modified = formatdate(1_790_000_000 + self.version * 60, usegmt=True)

    def set_events(self, events: list[dict[str, Any]], fmt: FeedFormat) -> None:
        if fmt is FeedFormat.JSON:
            self.set(json.dumps({"events": events}).encode(), "application/json")
        elif fmt is FeedFormat.JSONL:
            lines = "".join(json.dumps(event) + "\n" for event in events)
            self.set(lines.encode(), "application/x-ndjson")
        else:
            self.set(to_csv(events).encode(), "text/csv; charset=utf-8")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        feed = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with feed.lock:
                    feed.requests.append(dict(self.headers.items()))
                    failure = feed.failures.pop(0) if feed.failures else None
                    body, kind = feed.body, feed.content_type
                    etag, modified = feed.etag, feed.last_modified
                if failure is not None:
                    status, headers = failure
                    self.send_response(status)
                    for name, value in headers.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                match = self.headers.get("If-None-Match")
                since = self.headers.get("If-Modified-Since")
                fresh = match == etag if match is not None else since == modified
                self.send_response(304 if fresh else 200)
                self.send_header("ETag", etag)
                self.send_header("Last-Modified", modified)
                if fresh:
                    self.end_headers()
                    return
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        return Handler

    def __enter__(self) -> FeedServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def feed_server() -> Iterator[FeedServer]:
    with FeedServer() as server:
        yield server


def to_csv(events: list[dict[str, Any]]) -> str:
    columns = list(dict.fromkeys(name for event in events for name in event))
    rows = [",".join(columns)]
    rows += [",".join(str(event.get(name, "")) for name in columns) for event in events]
    return "\n".join(rows) + "\n"


def product(event_id: str, sku: str = "F1") -> dict[str, Any]:
    return {"type": "product", "event_id": event_id, "sku": sku, "title": "Feed Kettle 2L",
            "brand": "Acme", "category": "kettles"}  # fmt: skip


def price(event_id: str, value: float, minute: int, sku: str = "F1") -> dict[str, Any]:
    return {"type": "price", "event_id": event_id, "sku": sku,
            "ts": iso(T0_MS + minute * 60_000), "price": value}  # fmt: skip


def stock(event_id: str, quantity: int, minute: int, sku: str = "F1") -> dict[str, Any]:
    return {"type": "stock", "event_id": event_id, "sku": sku,
            "ts": iso(T0_MS + minute * 60_000), "quantity": quantity}  # fmt: skip


FIRST = [product("f-1"), price("f-2", 39.9, 0), price("f-3", 37.5, 10)]


@contextlib.asynccontextmanager
async def polling(store: MarketStore, config: FeedConfig) -> AsyncIterator[FeedPoller]:
    bus = EventBus(store)
    bus.start()
    poller = FeedPoller(config, bus.submit)
    try:
        yield poller
    finally:
        await poller.stop()
        await bus.stop()


def poll_times(store: MarketStore, config: FeedConfig, times: int) -> list[PollResult]:
    async def run() -> list[PollResult]:
        async with polling(store, config) as poller:
            return [await poller.poll() for _ in range(times)]

    return asyncio.run(run())


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MarketStore]:
    market = MarketStore(tmp_path / "m.db")
    yield market
    market.close()


def test_a_first_poll_applies_the_feed_and_a_second_gets_304_and_applies_nothing(
    feed_server: FeedServer, store: MarketStore
) -> None:
    feed_server.set_events(FIRST, FeedFormat.JSON)

    first, second = poll_times(store, FeedConfig(feed_server.url), 2)

    assert (first.status, first.applied, first.duplicates, first.rejected) == (200, 3, 0, [])
    assert (second.status, second.applied, second.duplicates) == (304, 0, 0)
    assert first.wait_s == second.wait_s == 60.0
    assert "if-none-match" not in {name.lower() for name in feed_server.requests[0]}
    conditional = {name.lower(): value for name, value in feed_server.requests[1].items()}
    assert conditional["if-none-match"] == feed_server.etag
    assert conditional["if-modified-since"] == feed_server.last_modified
    assert [p.price for p in store.prices("F1")] == [39.9, 37.5]


def test_a_changed_feed_applies_only_its_new_events(
    feed_server: FeedServer, store: MarketStore
) -> None:
    config = FeedConfig(feed_server.url)

    async def run() -> list[PollResult]:
        async with polling(store, config) as poller:
            feed_server.set_events(FIRST, FeedFormat.JSON)
            results = [await poller.poll()]
            feed_server.set_events([*FIRST, price("f-4", 35.0, 20)], FeedFormat.JSON)
            results.append(await poller.poll())
            results.append(await poller.poll())
            assert poller.stats.fetched == 2 and poller.stats.not_modified == 1
            assert poller.etag == feed_server.etag
            return results

    first, changed, unchanged = asyncio.run(run())

    assert (first.applied, first.duplicates) == (3, 0)
    assert (changed.status, changed.applied, changed.duplicates) == (200, 1, 3)
    assert unchanged.status == 304
    assert store.prices("F1")[-1].price == 35.0


@pytest.mark.parametrize(
    ("fmt", "path"),
    [(FeedFormat.JSONL, "/feed"), (FeedFormat.CSV, "/feed"), (FeedFormat.CSV, "/feed.csv")],
)
def test_jsonl_and_csv_feeds_land_like_json(fmt: FeedFormat, path: str, store: MarketStore) -> None:
    """A CSV mixes event types in one header: each row fills its own columns."""
    events = [*FIRST, stock("f-5", 12, 10)]
    with FeedServer(path) as server:
        server.set_events(events, fmt)
        if path.endswith(".csv"):  # the URL's suffix says what a vague Content-Type does not
            server.set(server.body, "text/plain")
        first, second = poll_times(store, FeedConfig(server.url), 2)

    assert (first.status, first.applied, first.rejected) == (200, 4, [])
    assert second.status == 304
    assert [p.price for p in store.prices("F1")] == [39.9, 37.5]
    latest = store.latest_stock("F1")
    assert latest is not None and latest.quantity == 12


def test_bad_events_are_counted_and_logged_by_index_and_field_and_the_others_land(
    feed_server: FeedServer, store: MarketStore, caplog: pytest.LogCaptureFixture
) -> None:
    lines = [
        json.dumps(product("b-1")),
        json.dumps(price("b-2", -1.0, 0)),
        "{not json",
        json.dumps(price("b-4", 20.0, 1, sku="NO-SUCH-SKU")),
        "",
        json.dumps(price("b-5", 21.0, 2)),
    ]
    feed_server.set("\n".join(lines).encode(), "application/x-ndjson")

    async def run() -> tuple[PollResult, dict[str, Any]]:
        async with polling(store, FeedConfig(feed_server.url)) as poller:
            return await poller.poll(), poller.status()

    with caplog.at_level(logging.WARNING, logger="worthit.market.ingest.feed"):
        result, status = asyncio.run(run())

    assert result.status == 200 and result.applied == 2
    assert [(error.index, error.field) for error in result.rejected] == [
        (1, "price"),
        (2, "(event)"),
        (3, "sku"),
    ]
    assert status["rejected"] == 3 and status["applied"] == 2 and status["state"] == "ok"
    assert [error["index"] for error in status["last_rejected"]] == [1, 2, 3]
    logged = [r.getMessage() for r in caplog.records]
    assert any("event 1 (b-2) rejected: price" in line for line in logged)
    assert any("event 3 (b-4) rejected: sku" in line for line in logged)
    assert [p.price for p in store.prices("F1")] == [21.0]


def test_a_csv_feed_refuses_nested_product_fields_by_name() -> None:
    body = (
        "type,event_id,sku,title,attributes\n"
        "product,c-1,C1,Plain Kettle,\n"
        'product,c-2,C2,Fancy Kettle,"{""litres"": 2}"\n'
        "product,c-3,C3,Odd Row,,surplus\n"
    )

    batch = parse_feed(body.encode(), FeedFormat.CSV, "shop")

    assert [event.sku for _, event in batch.events] == ["C1"]
    assert [(e.index, e.field, e.event_id) for e in batch.rejected] == [
        (1, "attributes", "c-2"),
        (2, "(row)", "c-3"),
    ]


def test_events_without_a_source_get_the_feeds_and_the_others_keep_theirs() -> None:
    body = "\n".join(
        [json.dumps(product("s-1")), json.dumps({**product("s-2", "F2"), "source": "pos"})]
    )

    batch = parse_feed(body.encode(), FeedFormat.JSONL, "shop")

    assert [event.source for _, event in batch.events] == ["shop", "pos"]


def test_errors_back_off_with_jitter_and_a_success_returns_to_the_interval(
    feed_server: FeedServer, store: MarketStore
) -> None:
    feed_server.set_events(FIRST, FeedFormat.JSON)
    feed_server.failures = [(500, {}), (502, {}), (500, {})]
    config = FeedConfig(feed_server.url, interval_s=30.0, backoff=FAST)

    results = poll_times(store, config, 4)

    assert [r.status for r in results] == [500, 502, 500, 200]
    waits = [r.wait_s for r in results]
    assert 0.01 <= waits[0] <= 0.02 and 0.02 <= waits[1] <= 0.04 and 0.04 <= waits[2] <= 0.08
    assert waits[3] == 30.0 and results[3].applied == 3
    assert results[0].error == "HTTP 500"


def test_the_running_poller_backs_off_through_errors_and_recovers_by_itself(
    feed_server: FeedServer, store: MarketStore
) -> None:
    feed_server.set_events(FIRST, FeedFormat.JSON)
    feed_server.failures = [(500, {}), (503, {}), (500, {})]
    config = FeedConfig(feed_server.url, interval_s=3600.0, backoff=FAST)

    async def run() -> dict[str, Any]:
        async with polling(store, config) as poller:
            poller.start()
            async with asyncio.timeout(10):
                while poller.stats.fetched == 0:
                    await asyncio.sleep(0.01)
            return poller.status()

    status = asyncio.run(run())

    assert status["state"] == "ok" and status["errors"] == 3 and status["applied"] == 3
    assert status["last_status"] == 200 and status["last_error"] is None
    assert len(feed_server.requests) == 4


def test_429_and_503_honour_retry_after(feed_server: FeedServer, store: MarketStore) -> None:
    feed_server.failures = [(429, {"Retry-After": "7"}), (503, {"Retry-After": "2"})]

    results = poll_times(store, FeedConfig(feed_server.url, backoff=FAST), 2)

    assert [(r.status, r.wait_s) for r in results] == [(429, 7.0), (503, 2.0)]


def test_a_4xx_is_retried_at_the_interval_and_marks_the_feed_failing(
    feed_server: FeedServer, store: MarketStore
) -> None:
    feed_server.failures = [(404, {})]

    async def run() -> PollResult:
        async with polling(store, FeedConfig(feed_server.url, interval_s=45.0)) as poller:
            result = await poller.poll()
            assert poller.state is FeedState.FAILING and not poller.healthy
            return result

    result = asyncio.run(run())

    assert (result.status, result.wait_s, result.error) == (404, 45.0, "HTTP 404")


def test_no_connection_and_a_bad_body_back_off_and_keep_no_validators(
    feed_server: FeedServer, store: MarketStore
) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{probe.getsockname()[1]}/feed.json"
    (refused,) = poll_times(store, FeedConfig(closed, backoff=FAST), 1)
    assert refused.status is None and refused.error is not None
    assert "ConnectError" in refused.error and refused.wait_s <= FAST.first_s

    feed_server.set(b'{"events": [', "application/json")
    bad, again = poll_times(store, FeedConfig(feed_server.url, backoff=FAST), 2)
    assert bad.status == 200 and bad.error is not None and bad.error.startswith("bad body")
    assert again.status == 200 and again.wait_s <= 2 * FAST.first_s
    assert "if-none-match" not in {name.lower() for name in feed_server.requests[-1]}


def test_serve_reads_a_feed_as_url_and_optional_seconds() -> None:
    assert feed_config("https://feeds.example.com/prices.jsonl@30").interval_s == 30.0
    plain = feed_config("https://user:pw@feeds.example.com/prices.csv")
    assert (plain.url, plain.interval_s) == ("https://user:pw@feeds.example.com/prices.csv", 60.0)
    assert plain.where == "https://feeds.example.com/prices.csv"
    for bad in ("ftp://feeds.example.com/f.csv", "https://feeds.example.com/f.csv@0"):
        with pytest.raises(typer.BadParameter):
            feed_config(bad)


def test_a_feed_on_the_service_makes_its_price_visible_in_decide(market_copy: Path) -> None:
    ask = {"question": "Is the Aurora NC700 worth buying?", "sku": "S1"}
    new_price = 111.11
    event = {"type": "price", "event_id": "feed-s1-1", "sku": "S1",
             "ts": iso(MARKET_NOW_MS - 1000), "price": new_price}  # fmt: skip
    engine = fake_engine()
    with FeedServer("/prices.jsonl") as feed:
        feed.set_events([event], FeedFormat.JSONL)
        settings = market_settings(
            market_copy, auth=False, feeds=(FeedConfig(feed.url, source="shop"),)
        )
        with LiveServer(create_app(settings, engine=engine)) as server:
            deadline = time.monotonic() + 15
            while True:
                ready = httpx.get(server.base_url + "/readyz").json()
                feeds = ready["events"]["feeds"]
                if feeds[0]["applied"] == 1 or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            answer = httpx.post(server.base_url + "/v1/decide", json=ask).json()
    engine.close()

    assert feeds[0]["state"] == "ok" and feeds[0]["etag"] == feed.etag
    assert feeds[0]["url"] == feed.url and feeds[0]["source"] == "shop"
    assert ready["degraded"] == []
    assert answer["facts"]["current_price"] == new_price
