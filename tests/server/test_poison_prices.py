"""A sub-cent price through real HTTP: refused at the edge naming the field, and a store
that already holds one (written before the floor existed) still answers every route."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx

from worthit.market.records import PriceRecord
from worthit.market.store import MarketStore
from worthit.text.time import iso

from conftest import MARKET_NOW_MS
from service_fixtures import market_copy, serving

__all__ = ["market_copy"]

SSE = {"Accept": "text/event-stream"}


def test_a_price_below_one_minor_unit_is_refused_naming_the_field(market_copy: Path) -> None:
    events = [
        {"type": "price", "event_id": "e1", "source": "pos", "sku": "S1",
         "ts": iso(MARKET_NOW_MS - 1000), "price": 0.001},
        {"type": "price", "event_id": "e2", "source": "pos", "sku": "S1",
         "ts": iso(MARKET_NOW_MS - 1000), "price": 0.5, "currency": "JPY"},
    ]  # fmt: skip
    with serving(market_copy, auth=False) as server:
        r = httpx.post(server.base_url + "/v1/events", json={"events": events})
        assert r.status_code == 200
        rejected = r.json()["rejected"]
        assert [(e["index"], e["field"]) for e in rejected] == [(0, "price"), (1, "price")]
        assert "0.01" in rejected[0]["message"] and "JPY (1)" in rejected[1]["message"]
        facts = httpx.get(server.base_url + "/v1/products/S1/facts").json()
        assert facts["facts"]["current_price"] > 1


def test_a_stored_sub_cent_price_leaves_every_route_answering(market_copy: Path) -> None:
    """The row a store from before the floor may hold: every price fact rounds to zero."""
    store = MarketStore(market_copy)
    row = PriceRecord.model_construct(
        sku="S1", type="price", price=0.001, currency="USD", list_price=None,
        ts=datetime.fromtimestamp((MARKET_NOW_MS - 60_000) / 1000, UTC),
    )  # fmt: skip
    store.apply([row])
    store.close()
    with serving(market_copy, auth=False) as server:
        base = server.base_url
        facts = httpx.get(base + "/v1/products/S1/facts")
        assert facts.status_code == 200 and facts.json()["facts"]["all_time_low"] == 0
        ask = {"question": "Is the Aurora NC700 worth buying?", "sku": "S1"}
        decided = httpx.post(base + "/v1/decide", json=ask)
        assert decided.status_code == 200, decided.text
        body = decided.json()
        assert body["verdict"] == "INSUFFICIENT_DATA"
        assert body["reasons"][0]["code"] == "unusable_price"
        with httpx.stream("POST", base + "/v1/decide", json=ask, headers=SSE) as streamed:
            assert streamed.status_code == 200
            text = streamed.read().decode()
        assert "event: verdict" in text and "event: done" in text
        compared = httpx.post(base + "/v1/decide", json={"question": "Aurora NC700 or Kestrel Q5?"})
        assert compared.status_code == 200, compared.text
        watched = httpx.post(base + "/v1/watches", json={"sku": "S1", "condition": "verdict_buy"})
        assert watched.status_code in (200, 201), watched.text
        history = httpx.get(base + "/v1/products/S1/history")
        assert history.status_code == 200
