"""Key scopes through a real uvicorn (issue 23, finding 2): a plain key cannot write the
shared market, an events key writes only as the source it is bound to, and no key can
pre-empt a signed webhook source's event ids. Migrations of existing key and event-id
tables, on SQLite and PostgreSQL."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import httpx
from test_webhooks import signed

from worthit.db.migrations import apply_migration
from worthit.market.ingest.webhook_sources import SourceStore
from worthit.market.schema import MIGRATIONS as MARKET_MIGRATIONS
from worthit.market.schema import POSTGRES_MIGRATIONS
from worthit.market.store import MarketStore
from worthit.service.tenants import MIGRATIONS as TENANT_MIGRATIONS
from worthit.service.tenants import KeyScope, TenantStore
from worthit.text.time import iso

from conftest import MARKET_NOW_MS, run_cli
from live_server import LiveServer
from service_fixtures import keyed_service, market_copy, open_service

__all__ = ["keyed_service", "market_copy", "open_service"]

PROBLEM = "application/problem+json"


def price(event_id: str, value: float, source: str = "pos") -> dict[str, Any]:
    return {"type": "price", "event_id": event_id, "source": source, "sku": "S1",
            "ts": iso(MARKET_NOW_MS - 2000), "price": value}  # fmt: skip


def bearer(market: Path, scope: str = "ask", source: str | None = None) -> dict[str, str]:
    _, key = TenantStore(market).create(
        "acme", "low", rpm=1_000, tpm=10_000, scope=scope, source=source
    )
    return {"Authorization": f"Bearer {key}"}


def post_events(server: LiveServer, headers: dict[str, str], *events: Any) -> httpx.Response:
    return httpx.post(
        f"{server.base_url}/v1/events", json={"events": list(events)}, headers=headers
    )


def claimed_sources(market: Path, event_id: str) -> list[str]:
    with sqlite3.connect(market) as conn:
        rows = conn.execute(
            "SELECT source FROM applied_events WHERE event_id = ? ORDER BY source", (event_id,)
        ).fetchall()
    return [row[0] for row in rows]


def current_price(server: LiveServer, headers: dict[str, str]) -> float:
    facts = httpx.get(f"{server.base_url}/v1/products/S1/facts", headers=headers)
    assert facts.status_code == 200, facts.text
    return float(facts.json()["facts"]["current_price"])


def test_a_plain_key_cannot_write_events_and_is_told_the_scope(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    plain = bearer(market_copy)
    before = current_price(keyed_service, plain)
    r = post_events(keyed_service, plain, price("pos-1", 1.00))
    assert r.status_code == 403
    assert r.headers["content-type"].startswith(PROBLEM)
    problem = r.json()
    assert problem["field"] == "authorization" and problem["scope"] == "events"
    assert "--scope events --source" in problem["detail"]
    assert current_price(keyed_service, plain) == before  # every tenant still reads the truth
    assert claimed_sources(market_copy, "pos-1") == []
    schema = httpx.get(f"{keyed_service.base_url}/v1/events/schema", headers=plain)
    assert schema.status_code == 200


def test_an_events_key_writes_as_its_bound_source_whatever_the_body_says(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    writer = bearer(market_copy, "events", "shop")
    r = post_events(
        keyed_service, writer, price("e-1", 123.45, source="pos"),
        {k: v for k, v in price("e-2", 120.0).items() if k != "source"},
    )  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json() == {"applied": ["e-1", "e-2"], "duplicates": [], "rejected": []}
    assert claimed_sources(market_copy, "e-1") == ["shop"]
    assert claimed_sources(market_copy, "e-2") == ["shop"]
    assert current_price(keyed_service, bearer(market_copy)) == 120.0


def test_an_events_key_does_nothing_else(keyed_service: LiveServer, market_copy: Path) -> None:
    writer = bearer(market_copy, "events", "shop")
    ask = {"question": "Is the Aurora NC700 worth buying?", "sku": "S1"}
    decided = httpx.post(f"{keyed_service.base_url}/v1/decide", json=ask, headers=writer)
    assert decided.status_code == 403
    assert decided.headers["content-type"].startswith(PROBLEM)
    assert decided.json()["scope"] == "ask"
    chat = httpx.post(
        f"{keyed_service.base_url}/v1/chat/completions",
        json={"model": "worthit", "messages": [{"role": "user", "content": "hi"}]},
        headers=writer,
    )
    assert chat.status_code == 403
    assert chat.json()["error"]["type"] == "permission_error"


def test_no_key_can_pre_empt_a_signed_webhook_sources_event_ids(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    """The probe: a key posed as `pos` with a `pos-`-style id, so that the real, signed
    `pos` webhook's later event with that id was dropped as a duplicate."""
    pos_secret = SourceStore(market_copy).add("pos")
    plain = post_events(keyed_service, bearer(market_copy), price("pos-7", 1.00))
    other = post_events(keyed_service, bearer(market_copy, "events", "shop"), price("pos-7", 2.0))
    posing = post_events(keyed_service, bearer(market_copy, "events", "pos"), price("pos-7", 3.0))
    assert plain.status_code == 403
    assert other.status_code == 200 and other.json()["applied"] == ["pos-7"]
    assert posing.status_code == 403 and "webhook source" in posing.json()["detail"]
    body = json.dumps(price("pos-7", 249.0))
    r = httpx.post(
        f"{keyed_service.base_url}/v1/webhooks/pos", content=body, headers=signed(pos_secret, body)
    )
    assert r.status_code == 200, r.text
    assert r.json() == {"applied": ["pos-7"], "duplicates": [], "rejected": []}
    assert claimed_sources(market_copy, "pos-7") == ["pos", "shop"]


def test_the_demo_without_keys_writes_events_as_before(
    open_service: LiveServer, market_copy: Path
) -> None:
    r = post_events(open_service, {}, price("demo-1", 150.0, source="feed.eu"))
    assert r.status_code == 200 and r.json()["applied"] == ["demo-1"]
    assert claimed_sources(market_copy, "demo-1") == ["feed.eu"]


def test_the_cli_creates_events_keys_and_keeps_webhook_sources_to_their_secrets(
    market_copy: Path,
) -> None:
    db = str(market_copy)
    made = run_cli("keys", "create", "--db", db, "--scope", "events", "--source", "shop", "--json")
    assert made.returncode == 0, made.stderr
    info = json.loads(made.stdout)
    assert (info["scope"], info["source"], info["tenant"]) == ("events", "shop", "shop")
    tenant = TenantStore(market_copy).authenticate(info["key"])
    assert (tenant.scope, tenant.source) == (KeyScope.EVENTS, "shop")
    no_source = run_cli("keys", "create", "--db", db, "--scope", "events")
    assert no_source.returncode == 2 and "source" in no_source.stderr
    assert run_cli("sources", "add", "shop", "--db", db).returncode == 2  # a key writes as it
    assert run_cli("sources", "add", "pos", "--db", db).returncode == 0
    as_pos = run_cli("keys", "create", "--db", db, "--scope", "events", "--source", "pos")
    assert as_pos.returncode == 2 and "webhook source" in as_pos.stderr
    listed = run_cli("keys", "list", "--db", db)
    assert "events:shop" in listed.stdout


def test_existing_keys_become_plain_keys(tmp_path: Path) -> None:
    """A database from before scopes: its keys keep working and write nothing."""
    db = tmp_path / "old.db"
    key_id = "wk_0123456789ab"
    key = f"{key_id}_{'x' * 43}"
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("CREATE TABLE schema_components (component TEXT PRIMARY KEY, version INTEGER)")
    apply_migration(
        conn, TENANT_MIGRATIONS[0],
        "INSERT INTO schema_components (component, version) VALUES ('tenants', 1)",
    )  # fmt: skip
    conn.execute(
        "INSERT INTO api_keys VALUES (?, ?, 'acme', 'high', 10, 10, '2026-01-01T00:00:00Z', NULL)",
        (key_id, hashlib.sha256(key.encode()).hexdigest()),
    )
    conn.close()
    tenant = TenantStore(db).authenticate(key)
    assert (tenant.name, tenant.scope, tenant.source) == ("acme", KeyScope.ASK, None)


def test_a_sqlite_market_keeps_its_claims_when_ids_become_per_source(tmp_path: Path) -> None:
    db = tmp_path / "v5.db"
    conn = sqlite3.connect(db, isolation_level=None)
    for migration in MARKET_MIGRATIONS[:5]:
        apply_migration(conn, migration, f"PRAGMA user_version = {migration.version}")
    conn.execute("INSERT INTO applied_events VALUES ('pos-1', 'pos', 1)")
    conn.close()
    store = MarketStore(db)
    with store.transaction() as tx:
        assert store.claim_events(tx, [("pos-1", "pos"), ("pos-1", "shop")], 2) == [False, True]
    assert store.applied_event_count() == 2
    store.close()


def test_a_postgres_market_keeps_its_claims_when_ids_become_per_source(pg_market: str) -> None:
    import psycopg

    with psycopg.connect(pg_market, autocommit=True) as conn:
        conn.execute("CREATE TABLE schema_components (component TEXT PRIMARY KEY, version INT)")
        conn.execute(POSTGRES_MIGRATIONS[0].postgres or "")
        conn.execute("INSERT INTO schema_components VALUES ('market', 5)")
        conn.execute("INSERT INTO applied_events VALUES ('pos-1', 'pos', 1)")
    store = MarketStore(pg_market)
    with store.transaction() as tx:
        assert store.claim_events(tx, [("pos-1", "pos"), ("pos-1", "shop")], 2) == [False, True]
    assert store.applied_event_count() == 2
    store.close()
    tenants = TenantStore(pg_market)
    _, key = tenants.create("pos", "medium", 10, 10, scope="events", source="pos")
    assert tenants.authenticate(key).source == "pos"
    tenants.close()
