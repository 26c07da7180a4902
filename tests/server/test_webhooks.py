"""POST /v1/webhooks/{source} through a real uvicorn, signed by the `standardwebhooks`
package's own signer; and `worthit sources add|list|remove`, which issues the secrets."""

from __future__ import annotations

import base64
import json
import math
import re
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from standardwebhooks.webhooks import Webhook

from worthit.http.app import create_app
from worthit.market.ingest.webhook_sources import SourceStore
from worthit.market.store import MarketStore
from worthit.service.tenants import TenantStore
from worthit.text.time import iso

from conftest import MARKET_NOW_MS, run_cli
from live_server import LiveServer
from service_fixtures import fake_engine, keyed_service, market_copy, market_settings

__all__ = ["keyed_service", "market_copy"]


def signed(
    secret: str, body: str, msg_id: str | None = None, at: datetime | None = None
) -> dict[str, str]:
    msg_id = msg_id or f"msg_{uuid.uuid4().hex}"
    at = at or datetime.now(UTC)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(math.floor(at.timestamp())),
        "webhook-signature": Webhook(secret).sign(msg_id, at, body),
        "content-type": "application/json",
    }


def price(event_id: str, value: float, sku: str = "S1", **extra: Any) -> dict[str, Any]:
    return {"type": "price", "event_id": event_id, "sku": sku,
            "ts": iso(MARKET_NOW_MS - 2000), "price": value, **extra}  # fmt: skip


@pytest.fixture
def pos_secret(market_copy: Path) -> str:
    return SourceStore(market_copy).add("pos")


def post(server: LiveServer, source: str, body: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(f"{server.base_url}/v1/webhooks/{source}", content=body, headers=headers)


def test_a_signed_event_lands_without_an_api_key_and_the_next_answer_shows_it(
    keyed_service: LiveServer, market_copy: Path, pos_secret: str
) -> None:
    body = json.dumps(price("wh-1", 123.45))
    r = post(keyed_service, "pos", body, signed(pos_secret, body))
    assert r.status_code == 200, r.text
    assert r.json() == {"applied": ["wh-1"], "duplicates": [], "rejected": []}
    _, key = TenantStore(market_copy).create("acme", "medium", rpm=100, tpm=10_000)
    answer = httpx.post(
        keyed_service.base_url + "/v1/decide",
        json={"question": "Is the Aurora NC700 worth buying?", "sku": "S1"},
        headers={"Authorization": f"Bearer {key}"},
    ).json()
    assert answer["facts"]["current_price"] == 123.45


def test_an_envelope_is_answered_per_event_and_a_source_cannot_write_as_another(
    keyed_service: LiveServer, pos_secret: str
) -> None:
    events = [
        price("wh-a", 250.0),
        price("wh-b", -3.0),
        price("wh-c", 251.0, source="feed.eu"),
        price("wh-d", 252.0, sku="NO-SUCH-SKU"),
        price("wh-a", 250.0, source="pos"),
    ]
    body = json.dumps({"events": events})
    r = post(keyed_service, "pos", body, signed(pos_secret, body))
    assert r.status_code == 200
    assert r.json() == {
        "applied": ["wh-a"],
        "duplicates": ["wh-a"],
        "rejected": [
            {
                "index": 1,
                "field": "price",
                "message": "Input should be greater than or equal to 0.01",
                "event_id": "wh-b",
            },
            {
                "index": 2,
                "field": "source",
                "message": "must be 'pos', this webhook's source, or left out",
                "event_id": "wh-c",
            },
            {
                "index": 3,
                "field": "sku",
                "message": "unknown sku 'NO-SUCH-SKU': send its product event first",
                "event_id": "wh-d",
            },
        ],
    }


def test_a_replayed_webhook_id_is_refused_here_and_after_a_restart(
    market_copy: Path, pos_secret: str
) -> None:
    body = json.dumps({"events": [price("wh-r", 240.0)]})
    headers = signed(pos_secret, body, msg_id="msg_replayed")
    engines = [fake_engine(), fake_engine()]
    with LiveServer(create_app(market_settings(market_copy), engine=engines[0])) as server:
        assert post(server, "pos", body, headers).status_code == 200
        again = post(server, "pos", body, headers)
        resent = post(server, "pos", body, signed(pos_secret, body))  # a new delivery id
    with LiveServer(create_app(market_settings(market_copy), engine=engines[1])) as restarted:
        after_restart = post(restarted, "pos", body, headers)
    for engine in engines:
        engine.close()
    assert again.status_code == 409 and again.json()["field"] == "webhook-id"
    assert again.headers["content-type"].startswith("application/problem+json")
    assert resent.json() == {"applied": [], "duplicates": ["wh-r"], "rejected": []}
    assert after_restart.status_code == 409


def _refusals(secret: str) -> list[tuple[str, str, dict[str, str], str]]:
    """(case, body, headers, the field the 401 names)."""
    body = json.dumps(price("wh-x", 200.0))
    good = signed(secret, body)
    other_secret = "whsec_" + base64.b64encode(b"k" * 32).decode()
    now = datetime.now(UTC)
    cases = [
        (f"no {name}", body, {k: v for k, v in good.items() if k != name}, name)
        for name in ("webhook-id", "webhook-timestamp", "webhook-signature")
    ]
    return [
        *cases,
        ("another secret", body, signed(other_secret, body), "webhook-signature"),
        ("body changed", body.replace("200.0", "2.0"), good, "webhook-signature"),
        ("malformed signature", body, good | {"webhook-signature": "v1"}, "webhook-signature"),
        ("330 s old", body, signed(secret, body, at=now - timedelta(seconds=330)),
         "webhook-timestamp"),
        ("330 s ahead", body, signed(secret, body, at=now + timedelta(seconds=330)),
         "webhook-timestamp"),
        ("not seconds", body, good | {"webhook-timestamp": "soon"}, "webhook-timestamp"),
        ("id changed", body, good | {"webhook-id": "msg_other"}, "webhook-signature"),
    ]  # fmt: skip


def test_a_bad_missing_or_expired_signature_is_401_naming_the_header(
    keyed_service: LiveServer, market_copy: Path, pos_secret: str
) -> None:
    before = MarketStore(market_copy).applied_event_count()
    for case, body, headers, field in _refusals(pos_secret):
        r = post(keyed_service, "pos", body, headers)
        assert (r.status_code, r.json().get("field")) == (401, field), case
        assert r.headers["content-type"].startswith("application/problem+json"), case
    body = json.dumps(price("wh-y", 200.0))
    unknown = post(keyed_service, "nobody", body, signed(pos_secret, body))
    assert (unknown.status_code, unknown.json()["field"]) == (401, "source")
    assert MarketStore(market_copy).applied_event_count() == before


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(position=st.integers(min_value=0), byte=st.integers(min_value=0, max_value=255))
def test_any_change_to_a_signed_body_is_refused(
    keyed_service: LiveServer, pos_secret: str, position: int, byte: int
) -> None:
    body = json.dumps(price("wh-p", 210.0)).encode()
    headers = signed(pos_secret, body.decode())
    at = position % len(body)
    tampered = body[:at] + bytes([byte]) + body[at + 1 :]
    r = httpx.post(f"{keyed_service.base_url}/v1/webhooks/pos", content=tampered, headers=headers)
    if tampered == body:
        assert r.status_code in (200, 409)
    else:
        assert r.status_code in (401, 422) and r.json()["field"] in ("webhook-signature", "body")


def test_a_signed_body_that_is_not_events_is_422(
    keyed_service: LiveServer, pos_secret: str
) -> None:
    for body, field in (("[1, 2]", "body"), ("{oops", "body"), ('{"events": []}', "body.events")):
        r = post(keyed_service, "pos", body, signed(pos_secret, body))
        assert (r.status_code, r.json()["field"]) == (422, field), body


def test_sources_cli_issues_a_secret_the_server_verifies_lists_and_removes_it(
    keyed_service: LiveServer, market_copy: Path
) -> None:
    db = ["--db", str(market_copy)]
    added = run_cli("sources", "add", "feed.eu", *db)
    assert added.returncode == 0, added.stderr
    secret = added.stdout.strip()
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret)
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    body = json.dumps({"events": [price("wh-cli", 230.0)]})
    assert post(keyed_service, "feed.eu", body, signed(secret, body)).status_code == 200
    assert run_cli("sources", "add", "feed.eu", *db).returncode == 1
    assert run_cli("sources", "add", "no spaces", *db).returncode == 2
    listed = json.loads(run_cli("sources", "list", "--json", *db).stdout)
    assert [s["name"] for s in listed] == ["feed.eu"] and "secret" not in listed[0]
    assert run_cli("sources", "remove", "feed.eu", *db).returncode == 0
    refused = post(keyed_service, "feed.eu", body, signed(secret, body))
    assert (refused.status_code, refused.json()["field"]) == (401, "source")
    assert run_cli("sources", "remove", "feed.eu", *db).returncode == 1


def test_a_delivery_id_is_remembered_until_its_timestamp_leaves_the_window(
    market_copy: Path,
) -> None:
    sources = SourceStore(market_copy)
    assert sources.take("pos", "msg_1", expires_ms=2_000, now_ms=1_000)
    assert sources.seen("pos", "msg_1", now_ms=1_999)
    assert not sources.seen("feed.eu", "msg_1", now_ms=1_999)  # ids are per source
    assert not sources.take("pos", "msg_1", expires_ms=3_000, now_ms=1_500)
    assert not sources.seen("pos", "msg_1", now_ms=2_001)
    assert sources.take("pos", "msg_1", expires_ms=4_000, now_ms=2_001)
