"""POST /v1/events and GET /v1/events/schema through a real uvicorn; and the live
simulator inside the server, as `worthit serve --demo` runs it."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx

from worthit.facts.builder import FactsBuilder
from worthit.http.app import create_app
from worthit.http.events_api import MAX_EVENTS
from worthit.market.events import SCHEMA_ID
from worthit.market.store import MarketStore
from worthit.service.settings import ServiceSettings
from worthit.service.tenants import TenantStore
from worthit.text.time import DAY_MS, iso, now_ms

from conftest import MARKET_END, MARKET_NOW_MS
from live_server import LiveServer
from service_fixtures import fake_engine, keyed_service, market_copy

__all__ = ["keyed_service", "market_copy"]


def key_for(market: Path, scope: str = "ask") -> dict[str, str]:
    """A plain key, or (`scope="events"`) one that writes events as source `pos`."""
    source = "pos" if scope == "events" else None
    _, key = TenantStore(market).create(
        "acme", "medium", rpm=1_000, tpm=10_000, scope=scope, source=source
    )
    return {"Authorization": f"Bearer {key}"}


def price(event_id: str, sku: str, value: float, ago_ms: int = 1000) -> dict[str, Any]:
    return {"type": "price", "event_id": event_id, "source": "pos", "sku": sku,
            "ts": iso(MARKET_NOW_MS - ago_ms), "price": value}  # fmt: skip


def test_events_need_a_tenant_key(keyed_service: LiveServer) -> None:
    r = httpx.post(keyed_service.base_url + "/v1/events", json={"events": [price("e", "S1", 1)]})
    assert r.status_code == 401
    assert r.headers["content-type"].startswith("application/problem+json")


def test_an_answer_right_after_a_price_event_shows_the_new_price(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    headers = key_for(market_copy)
    ask = {"question": "Is the Aurora NC700 worth buying?", "sku": "S1"}
    before = httpx.post(keyed_service.base_url + "/v1/decide", json=ask, headers=headers).json()
    new_price = round(before["facts"]["current_price"] - 10.0, 2)
    r = httpx.post(
        keyed_service.base_url + "/v1/events",
        json={"events": [price("pos-1", "S1", new_price)]},
        headers=key_for(market_copy, "events"),
    )
    assert r.json() == {"applied": ["pos-1"], "duplicates": [], "rejected": []}
    after = httpx.post(keyed_service.base_url + "/v1/decide", json=ask, headers=headers).json()
    assert after["facts"]["current_price"] == new_price
    assert after["facts_version"] != before["facts_version"]
    assert after["data_age_ms"] == 1000  # the service's clock is pinned to the market's end


def test_the_sheet_an_event_dropped_is_built_again_before_the_next_question(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    headers = key_for(market_copy)
    readyz = keyed_service.base_url + "/readyz"
    warmed = httpx.get(readyz).json()["facts"]
    assert warmed["cached"] == warmed["warmed"] and warmed["refreshed"] == 0
    r = httpx.post(
        keyed_service.base_url + "/v1/events",
        json={"events": [price("pos-r", "S1", 321.0)]},
        headers=key_for(market_copy, "events"),
    )
    assert r.json()["applied"] == ["pos-r"]
    for _ in range(100):  # the bus applies, the cache drops S1, a quiet moment rebuilds it
        facts = httpx.get(readyz).json()["facts"]
        if facts["refreshed"]:
            break
        time.sleep(0.05)
    assert facts["refreshed"] == 1 and facts["cached"] == warmed["cached"]
    ask = {"question": "Is the Aurora NC700 worth buying?", "sku": "S1"}
    answer = httpx.post(keyed_service.base_url + "/v1/decide", json=ask, headers=headers).json()
    assert answer["facts"]["current_price"] == 321.0
    assert httpx.get(readyz).json()["facts"]["misses"] == facts["misses"]


def test_bad_events_are_named_by_index_and_field_and_the_good_ones_land(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    headers = key_for(market_copy)
    stock = {"type": "stock", "event_id": "e5", "source": "pos", "sku": "S2",
             "ts": iso(MARKET_NOW_MS - 500), "quantity": 0}  # fmt: skip
    body = {
        "events": [
            price("e1", "S2", 499.0),
            price("e2", "S2", -1.0),
            42,
            price("e4", "NO-SUCH-SKU", 10.0),
            stock,
            price("e1", "S2", 1.0),
        ]
    }
    url = keyed_service.base_url + "/v1/events"
    writer = key_for(market_copy, "events")
    first = httpx.post(url, json=body, headers=writer)
    assert first.status_code == 200
    assert first.json() == {
        "applied": ["e1", "e5"],
        "duplicates": ["e1"],
        "rejected": [
            {"index": 1, "field": "price",
             "message": "Input should be greater than or equal to 0.01", "event_id": "e2"},
            {"index": 2, "field": "(event)", "message": "expected a JSON object"},
            {"index": 3, "field": "sku", "event_id": "e4",
             "message": "unknown sku 'NO-SUCH-SKU': send its product event first"},
        ],
    }  # fmt: skip
    facts = httpx.get(keyed_service.base_url + "/v1/products/S2/facts", headers=headers).json()
    assert facts["facts"]["current_price"] == 499.0 and facts["facts"]["stock"] == 0
    again = httpx.post(url, json=body, headers=writer).json()
    assert again["applied"] == [] and again["duplicates"] == ["e1", "e5", "e1"]
    assert [e["index"] for e in again["rejected"]] == [1, 2, 3]


def test_a_body_that_is_not_a_list_of_events_is_refused_whole(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    headers = key_for(market_copy, "events")
    url = keyed_service.base_url + "/v1/events"
    for body in ({"events": []}, {"events": [{}] * (MAX_EVENTS + 1)}, {"evts": [{}]}, [{}]):
        r = httpx.post(url, json=body, headers=headers)
        assert r.status_code == 422, body
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["field"].startswith("body")


def test_the_event_schema_is_served_with_its_version(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    r = httpx.get(keyed_service.base_url + "/v1/events/schema", headers=key_for(market_copy))
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("application/schema+json")
    assert r.json()["$id"] == SCHEMA_ID
    assert {"price", "stock", "review", "promotion", "sales", "product"} == {
        option["$ref"].split("/")[-1].removesuffix("Event").lower() for option in r.json()["oneOf"]
    }


def test_the_live_simulator_in_the_server_moves_prices_and_data_age(market_copy: Path) -> None:
    """`worthit serve --live-rate`: the demo's data, hours old at its end, becomes seconds
    old, and prices move; the clock runs on from the market's last minute."""
    store = MarketStore(market_copy)
    before = FactsBuilder(store, clock=lambda: MARKET_NOW_MS).build("S1")
    store.close()
    started = now_ms()
    settings = ServiceSettings(
        db_path=market_copy,
        auth=False,
        background=False,
        clock=lambda: MARKET_NOW_MS + now_ms() - started,
        ticker_rate=400,
        freshness=True,
    )
    engine = fake_engine()
    app = create_app(settings, engine=engine)
    ask = {"question": "Is the Aurora NC700 worth buying?", "sku": "S1"}
    try:
        with LiveServer(app) as server:
            url = server.base_url
            moved: set[str] = set()
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                time.sleep(0.3)
                history = [httpx.get(f"{url}/v1/products/S{n}/history?days=1").json()
                           for n in range(1, 61)]  # fmt: skip
                moved = {h["sku"] for h in history if _moved_in_the_last_minute(h)}
                answer = httpx.post(url + "/v1/decide", json=ask).json()
                if len(moved) >= 3 and answer["data_age_ms"] < 5_000:
                    break
    finally:
        engine.close()
    # the simulated market's newest rows are hours old (read before the feed can touch S1)
    assert before is not None and before.data_age_ms > 3_600_000
    assert answer["data_age_ms"] < 5_000
    assert "stale_data" not in {reason["code"] for reason in answer["reasons"]}
    assert len(moved) >= 3


def _moved_in_the_last_minute(history: dict[str, Any]) -> bool:
    """A live price (stamped after the market's end) that differs from the one before."""
    points = history["points"]
    live = [p for p in points if p["ts"] >= iso(MARKET_NOW_MS)]
    before = points[: len(points) - len(live)]
    return bool(live and before) and live[-1]["price"] != before[-1]["price"]


def test_a_promotion_is_known_from_its_arrival_and_not_before(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    """No look-ahead: posted without saying when it was announced, a sale five days away
    is known from its arrival (the service's clock), so the facts as of the day before
    do not list it, though it starts within the notice a stored row without an
    announcement is given; a bad announcement is named by its field."""
    sale = {"type": "promotion", "event_id": "sale-1", "source": "pos", "sku": "S1",
            "name": "Flash Sale", "starts": iso(MARKET_NOW_MS + 5 * DAY_MS),
            "ends": iso(MARKET_NOW_MS + 8 * DAY_MS), "price": 1.0}  # fmt: skip
    bad = sale | {"event_id": "sale-2", "announced_at": "next week"}
    url = keyed_service.base_url
    r = httpx.post(
        url + "/v1/events", json={"events": [sale, bad]}, headers=key_for(market_copy, "events")
    )
    assert r.status_code == 200, r.text
    assert r.json()["applied"] == ["sale-1"]
    assert [(e["index"], e["field"]) for e in r.json()["rejected"]] == [(1, "announced_at")]
    headers = key_for(market_copy)

    def listed(**params: str) -> list[str]:
        got = httpx.get(url + "/v1/products/S1/facts", params=params, headers=headers)
        assert got.status_code == 200, got.text
        return [p["name"] for p in got.json()["facts"]["upcoming_promotions"]]

    assert "Flash Sale" in listed()
    assert "Flash Sale" not in listed(as_of=(MARKET_END - timedelta(days=1)).isoformat())
