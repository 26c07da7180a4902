"""Text hygiene through real HTTP (issue 23, finding 5): a product "S1\u202e " with S1's
title used to sit beside S1; now the SKU is refused naming the field, on the events API and
on a signed webhook alike, and a title's controls are stripped before it is stored."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import httpx
from test_webhooks import signed

from worthit.market.ingest.webhook_sources import SourceStore
from worthit.market.store import MarketStore

from live_server import LiveServer
from service_fixtures import market_copy, open_service

__all__ = ["market_copy", "open_service"]

TWIN = "S1\u202e "


def product(
    event_id: str, sku: str, title: str = "Aurora NC700 Wireless Headphones"
) -> dict[str, str]:
    return {"type": "product", "event_id": event_id, "source": "pos", "sku": sku,
            "title": title, "brand": "Aurora", "category": "headphones"}  # fmt: skip


def test_a_sku_with_a_bidi_override_is_refused_naming_the_field(
    open_service: LiveServer, market_copy: Path
) -> None:
    base = open_service.base_url
    r = httpx.post(
        base + "/v1/events",
        json={
            "events": [product("twin-1", TWIN), product("new-1", "S99", "Kestrel\u202e\nQ5\x1b")]
        },
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["applied"] == ["new-1"]
    assert [(e["index"], e["field"]) for e in body["rejected"]] == [(0, "sku")]
    assert "U+202E" in body["rejected"][0]["message"]
    secret = SourceStore(market_copy).add("pos")
    payload = json.dumps(product("twin-2", TWIN))
    hook = httpx.post(base + "/v1/webhooks/pos", content=payload, headers=signed(secret, payload))
    assert hook.status_code == 200
    assert [e["field"] for e in hook.json()["rejected"]] == ["sku"]
    assert httpx.get(base + f"/v1/products/{quote(TWIN.strip())}/facts").status_code == 404
    store = MarketStore(market_copy)
    assert store.product(TWIN.strip()) is None
    assert store.product("S99").title == "Kestrel Q5"  # type: ignore[union-attr]
    store.close()
