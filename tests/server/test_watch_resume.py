"""The watch stream resumes: ids on its events, and `Last-Event-ID` replays what fired while
the client was away (its own tenant's only), through the real service."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from test_watches import eventually, key, listed, post_events, price, watch, writer

from live_server import LiveServer
from service_fixtures import keyed_service, market_copy

__all__ = ["keyed_service", "market_copy"]


def events(
    base: str, headers: dict[str, str], last_event_id: str | None = None
) -> Iterator[dict[str, Any]]:
    """The stream's events as {event, id, data}, up to and with the first `ready`."""
    if last_event_id is not None:
        headers = headers | {"last-event-id": last_event_id}
    with httpx.stream("GET", base + "/v1/watches/events", headers=headers, timeout=20.0) as r:
        assert r.status_code == 200, r.read()
        event: dict[str, Any] = {}
        for line in r.iter_lines():
            if line == "":
                yield event
                if event.get("event") == "ready":
                    return
                event = {}
            elif not line.startswith(":"):
                field, _, value = line.partition(": ")
                event[field] = json.loads(value) if field == "data" else value


def test_a_reconnect_with_last_event_id_gets_what_fired_meanwhile_once(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    base = keyed_service.base_url
    acme, beta = key(market_copy, "acme"), key(market_copy, "beta")
    (ready,) = events(base, acme)
    assert ready["id"].isdigit()
    made = watch(base, acme)
    post_events(base, writer(market_copy), price("p1", 500.0))  # fires, no stream open
    eventually(lambda: listed(base, acme)[made["id"]]["state"] == "fired", "the watch fired")

    missed, again = events(base, acme, ready["id"])
    assert missed["event"] == "watch" and missed["data"]["data"]["watch_id"] == made["id"]
    assert missed["id"].endswith("." + made["id"])
    assert again["event"] == "ready"
    assert [e["event"] for e in events(base, acme, missed["id"])] == ["ready"]
    assert [e["event"] for e in events(base, beta, ready["id"])] == ["ready"]
    assert [e["event"] for e in events(base, acme, "not-one-of-ours")] == ["ready"]
