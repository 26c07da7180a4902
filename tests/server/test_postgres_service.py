"""The service over a PostgreSQL market: keys, answers and events through a real uvicorn,
the audit log in its own SQLite file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from worthit.demo.simulator import simulate
from worthit.market.store import MarketStore
from worthit.service.tenants import TenantStore
from worthit.text.time import iso

from conftest import MARKET_END, MARKET_NOW_MS, postgres_schema
from service_fixtures import serving


@pytest.fixture(scope="module")
def pg_small_market(postgres_url: str) -> Iterator[str]:
    with postgres_schema(postgres_url) as url:
        store = MarketStore(url)
        simulate(store, skus=8, days=40, seed=7, end=MARKET_END)
        store.close()
        yield url


def test_the_service_answers_and_applies_events_on_postgres(
    pg_small_market: str, tmp_path: Path
) -> None:
    tenants = TenantStore(pg_small_market)
    _, key = tenants.create("acme", "medium", rpm=1_000, tpm=10_000)
    _, pos_key = tenants.create("pos", "medium", 1_000, 10_000, scope="events", source="pos")
    tenants.close()
    headers = {"Authorization": f"Bearer {key}"}
    writer = {"Authorization": f"Bearer {pos_key}"}
    audit = tmp_path / "pg.audit.db"
    with serving(pg_small_market, auth=True, audit_db=audit) as server:  # type: ignore[arg-type]
        ask = {"question": "Is the Aurora NC700 worth buying?", "sku": "S1"}
        before = httpx.post(server.base_url + "/v1/decide", json=ask, headers=headers)
        assert before.status_code == 200, before.text
        new_price = round(before.json()["facts"]["current_price"] - 10.0, 2)
        event = {"type": "price", "event_id": "pos-1", "source": "pos", "sku": "S1",
                 "ts": iso(MARKET_NOW_MS - 1000), "price": new_price}  # fmt: skip
        sent = httpx.post(server.base_url + "/v1/events", json={"events": [event]},
                          headers=writer)  # fmt: skip
        assert sent.json() == {"applied": ["pos-1"], "duplicates": [], "rejected": []}
        again = httpx.post(server.base_url + "/v1/events", json={"events": [event]},
                           headers=writer)  # fmt: skip
        assert again.json()["duplicates"] == ["pos-1"]
        after = httpx.post(server.base_url + "/v1/decide", json=ask, headers=headers).json()
        assert after["facts"]["current_price"] == new_price
        assert after["facts_version"] != before.json()["facts_version"]
    assert audit.exists()
