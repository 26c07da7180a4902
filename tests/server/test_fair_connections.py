"""Fair connections (issue 23, finding 3), through real HTTP on a real uvicorn: one
tenant's streams take at most its share, the open routes keep a reserve no tenant can
take, and an event stream ends after its maximum life and resumes without loss."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
from test_watches import eventually, key, listed, post_events, price, watch, writer

from worthit.service.transport import TransportLimits

from service_fixtures import market_copy, serving

__all__ = ["market_copy"]


def open_stream(stack: ExitStack, base: str, auth: dict[str, str]) -> httpx.Response:
    """A watch stream held open (in `stack`), read up to its `ready` event; or the refusal."""
    client = stack.enter_context(httpx.Client(timeout=20))
    response = stack.enter_context(client.stream("GET", base + "/v1/watches/events",
                                                 headers=auth))  # fmt: skip
    if response.status_code == 200:
        lines = response.iter_lines()
        stack.callback(lines.close)  # held: a reader collected early closes the connection
        for line in lines:
            if line.startswith("event: ready"):
                break
    else:
        response.read()
    return response


def sse(response: httpx.Response, within_s: float = 20.0) -> Iterator[dict[str, Any]]:
    """The events of a stream as {event, id, data}, to its end, which must come within
    `within_s` (checked at each line: the keep-alive comments come every 15 s)."""
    give_up = time.monotonic() + within_s
    event: dict[str, Any] = {}
    for line in response.iter_lines():
        assert time.monotonic() < give_up, "the stream did not end"
        if line == "":
            if event:
                yield event
            event = {}
        elif not line.startswith(":"):
            field, _, value = line.partition(": ")
            event[field] = json.loads(value) if field == "data" else value


def test_one_tenant_trying_every_connection_leaves_the_others_served(market_copy: Path) -> None:
    """acme asks for as many streams as the server has connections: it gets its share of
    streams, the rest are 429 problem+json with Retry-After and closed, and beta's
    requests, its own stream and /healthz are served (before: acme held all 8 and everyone
    else got 503 `too many open connections`)."""
    limits = TransportLimits(max_connections=8)
    with (
        serving(market_copy, limits, auth=True, tenant_streams=3, tenant_connections=4) as server,
        ExitStack() as stack,
    ):
        base = server.base_url
        acme, beta = key(market_copy, "acme"), key(market_copy, "beta")
        tries = [open_stream(stack, base, acme) for _ in range(8)]
        more = httpx.get(base + "/v1/watches", headers=acme)  # 3 streams + 1 = its 4 in flight
        held = httpx.get(base + "/v1/watches", headers=beta)
        beta_stream = open_stream(stack, base, beta)
        health = httpx.get(base + "/healthz")
    assert [r.status_code for r in tries] == [200] * 3 + [429] * 5
    refused = tries[-1]
    assert refused.headers["content-type"] == "application/problem+json"
    assert int(refused.headers["retry-after"]) >= 1
    assert refused.headers["connection"] == "close"
    assert "3 open event streams" in refused.json()["detail"]
    assert more.status_code == 200  # a plain request still fits in acme's 4
    assert (held.status_code, beta_stream.status_code, health.status_code) == (200, 200, 200)


def test_a_tenant_over_its_requests_in_flight_is_refused_and_others_are_not(
    market_copy: Path,
) -> None:
    with (
        serving(market_copy, auth=True, tenant_streams=2, tenant_connections=2) as server,
        ExitStack() as stack,
    ):
        base = server.base_url
        acme, beta = key(market_copy, "acme"), key(market_copy, "beta")
        streams = [open_stream(stack, base, acme) for _ in range(2)]
        over = httpx.get(base + "/v1/watches", headers=acme)
        other = httpx.get(base + "/v1/watches", headers=beta)
    assert [s.status_code for s in streams] == [200, 200]
    assert over.status_code == 429 and over.headers["retry-after"] == "1"
    assert "2 requests in flight" in over.json()["detail"]
    assert other.status_code == 200


def test_the_open_routes_keep_a_reserve_no_connection_flood_takes(market_copy: Path) -> None:
    """With every ordinary connection taken, /healthz and the page are still answered on
    the reserve, and a tenant's request on it is refused; past the reserve, nothing."""
    limits = TransportLimits(max_connections=3, reserved_connections=2)
    with serving(market_copy, limits, auth=True) as server:
        acme = key(market_copy, "acme")
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        try:
            time.sleep(0.2)
            health = httpx.get(server.base_url + "/healthz")
            page = httpx.get(server.base_url + "/")
            api = httpx.get(server.base_url + "/v1/watches", headers=acme)
            held += [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
            time.sleep(0.2)
            with socket.create_connection(("127.0.0.1", server.port)) as extra:
                extra.settimeout(5)
                past = extra.recv(200)
        finally:
            for conn in held:
                conn.close()
    assert (health.status_code, page.status_code) == (200, 200)
    assert api.status_code == 503
    assert past.startswith(b"HTTP/1.1 503")


def test_a_stream_ends_at_its_max_life_and_a_reconnect_resumes_without_loss(
    market_copy: Path,
) -> None:
    """A watch that fires while the stream is open comes live, the stream then ends by
    itself with `end`, one that fires while no stream is open comes first on the
    reconnect with Last-Event-ID: every notification is seen."""
    with serving(market_copy, auth=True, stream_life_s=2.0) as server:
        base = server.base_url
        acme, pos = key(market_copy, "acme"), writer(market_copy)
        first, second = watch(base, acme), watch(base, acme, "price_at_most", target=400.0)
        seen: list[dict[str, Any]] = []
        with (
            httpx.Client(timeout=30) as client,
            client.stream("GET", base + "/v1/watches/events", headers=acme) as stream,
        ):
            for event in sse(stream):  # until the server ends it
                seen.append(event)
                if event["event"] == "ready":
                    post_events(base, pos, price("p1", 500.0))  # first fires (BUY)
        ended = seen[-1]
        post_events(base, pos, price("p2", 300.0))  # second fires, no stream open
        eventually(lambda: listed(base, acme)[second["id"]]["state"] == "fired", "it fired")
        with (
            httpx.Client(timeout=30) as client,
            client.stream("GET", base + "/v1/watches/events",
                          headers=acme | {"last-event-id": ended["id"]}) as again,
        ):  # fmt: skip
            resumed = []
            for event in sse(again):
                resumed.append(event)
                if event["event"] == "ready":
                    break
    assert [e["event"] for e in seen] == ["ready", "watch", "end"]
    assert ended["data"] == {"reason": "max_life", "life_s": 2.0} and ended["id"].isdigit()
    fired = {e["data"]["data"]["watch_id"] for e in seen + resumed if e["event"] == "watch"}
    assert fired == {first["id"], second["id"]}
    assert resumed[-1]["event"] == "ready"
