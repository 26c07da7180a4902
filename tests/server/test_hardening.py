"""What an attacker tried (issue 9), through real HTTP on a real uvicorn: budgets, bodies,
heads, connections, inputs that used to be 500s, error shapes, caches and the demo."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from worthit.http.app import create_app
from worthit.service.tenants import TenantStore
from worthit.service.transport import DEFAULT_LIMITS, TransportLimits

from live_server import LiveServer
from service_fixtures import market_copy, market_settings, serving

__all__ = ["market_copy"]

CHAT = "/v1/chat/completions"
QUESTION = "Is the Aurora NC700 worth buying?"


def key_for(
    market: Path, tpm: int = 10_000, rpm: int = 1_000, name: str = "acme"
) -> dict[str, str]:
    _, key = TenantStore(market).create(name, "medium", rpm=rpm, tpm=tpm)
    return {"Authorization": f"Bearer {key}"}


def chat(max_tokens: int, **extra: Any) -> dict[str, Any]:
    return {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": max_tokens,
        **extra,
    }


# --- LLM-token budget -------------------------------------------------------------------


def test_a_request_may_not_generate_more_than_the_tenants_minute(market_copy: Path) -> None:
    """A tenant with 50 tokens a minute asked for 300 and got 347 before; now it gets
    at most its minute, and is not refused forever for having a small budget."""
    auth = key_for(market_copy, tpm=50)
    with serving(market_copy) as server:
        reply = httpx.post(server.base_url + CHAT, json=chat(300), headers=auth, timeout=30)
    assert reply.status_code == 200, reply.text
    assert reply.json()["usage"]["completion_tokens"] <= 50
    assert reply.json()["choices"][0]["finish_reason"] == "length"


def test_unused_tokens_are_refunded(market_copy: Path) -> None:
    """Two answers of a few tokens each fit in a 120-token minute when each reserves
    100: what the first did not generate came back."""
    auth = key_for(market_copy, tpm=120)
    body = chat(100, stop=["a", "b", "c", " "])
    with serving(market_copy) as server:
        first = httpx.post(server.base_url + CHAT, json=body, headers=auth, timeout=30)
        second = httpx.post(server.base_url + CHAT, json=body, headers=auth, timeout=30)
    assert first.status_code == 200, first.text
    assert first.json()["usage"]["completion_tokens"] < 10
    assert second.status_code == 200, second.text


def test_a_spent_budget_says_how_long_to_wait(market_copy: Path) -> None:
    auth = key_for(market_copy, tpm=100)
    with serving(market_copy) as server:
        spent = httpx.post(server.base_url + CHAT, json=chat(100), headers=auth, timeout=30)
        refused = httpx.post(server.base_url + CHAT, json=chat(100), headers=auth, timeout=30)
        decide = httpx.post(
            server.base_url + "/v1/decide", json={"question": QUESTION}, headers=auth, timeout=30
        )
    assert spent.json()["usage"]["completion_tokens"] == 100
    assert refused.status_code == 429
    assert 1 <= int(refused.headers["retry-after"]) <= 60
    assert refused.json()["error"]["param"] == "max_tokens"  # OpenAI's shape on its route
    assert decide.status_code == 429 and decide.json()["field"] == "max_tokens"
    assert decide.headers["content-type"].startswith("application/problem+json")


def test_requests_refused_before_the_model_cost_no_tokens(market_copy: Path) -> None:
    auth = key_for(market_copy, tpm=100)
    with serving(market_copy) as server:
        for _ in range(3):
            bad = httpx.post(server.base_url + "/v1/decide", json={"question": ""}, headers=auth)
            assert bad.status_code == 422
        good = httpx.post(server.base_url + CHAT, json=chat(90), headers=auth, timeout=30)
    assert good.status_code == 200, good.text


# --- bodies, heads and connections ------------------------------------------------------


def test_a_chunked_body_stops_at_the_limit(market_copy: Path) -> None:
    sent = 0

    def twelve_megabytes() -> Iterator[bytes]:
        nonlocal sent
        yield b'{"question": "'
        for _ in range(12 * 16):
            sent += 65536
            yield b"x" * 65536
        yield b'"}'

    with serving(market_copy, auth=False) as server:
        reply = httpx.post(
            server.base_url + "/v1/decide",
            content=twelve_megabytes(),
            headers={"content-type": "application/json"},
            timeout=30,
        )
    assert reply.status_code == 413
    assert reply.headers["content-type"].startswith("application/problem+json")
    assert reply.json()["field"] == "body"
    assert sent < 12 * 1024 * 1024


def read_all(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (TimeoutError, ConnectionResetError):
            return received
        if not chunk:
            return received
        received += chunk


def test_a_head_sent_too_slowly_is_cut_off(market_copy: Path) -> None:
    limits = TransportLimits(header_timeout_s=0.5)
    with serving(market_copy, limits, auth=False) as server:
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", server.port)) as slow:
            slow.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
            answer = read_all(slow, timeout=10)
        with socket.create_connection(("127.0.0.1", server.port)) as silent:
            nothing = read_all(silent, timeout=10)
        waited = time.monotonic() - started
        ok = httpx.get(server.base_url + "/healthz")
    assert answer.startswith(b"HTTP/1.1 408")
    assert nothing.startswith(b"HTTP/1.1 408")
    assert waited < 10  # both were closed by the server, not by the client giving up
    assert ok.status_code == 200


def test_a_head_sent_byte_by_byte_does_not_keep_the_connection(market_copy: Path) -> None:
    limits = TransportLimits(header_timeout_s=0.5)
    with (
        serving(market_copy, limits, auth=False) as server,
        socket.create_connection(("127.0.0.1", server.port)) as drip,
    ):
        drip.sendall(b"GET /healthz HTTP/1.1\r\n")
        closed = False
        for _ in range(40):
            try:
                drip.sendall(b"X")
            except OSError:
                closed = True
                break
            time.sleep(0.1)
        answer = read_all(drip, timeout=2)
    assert closed or answer.startswith(b"HTTP/1.1 408")


def test_a_huge_header_is_refused(market_copy: Path) -> None:
    with serving(market_copy, auth=False) as server:
        with socket.create_connection(("127.0.0.1", server.port)) as conn:
            # the server may close the connection while this is still being sent
            with contextlib.suppress(OSError):
                conn.sendall(
                    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: "
                    + b"a" * (32 * 1024 * 1024)
                    + b"\r\n\r\n"
                )
            answer = read_all(conn, timeout=10)
        small_but_over = httpx.get(
            server.base_url + "/healthz", headers={"X-Big": "a" * (DEFAULT_LIMITS.max_header_bytes)}
        )
        ok = httpx.get(server.base_url + "/healthz")
    assert answer == b"" or answer.startswith(b"HTTP/1.1 431")
    assert small_but_over.status_code == 431
    assert ok.status_code == 200


def test_connections_beyond_the_limit_are_refused(market_copy: Path) -> None:
    limits = TransportLimits(max_connections=2, reserved_connections=0)
    with serving(market_copy, limits, auth=False) as server:
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
        time.sleep(0.2)
        try:
            with socket.create_connection(("127.0.0.1", server.port)) as extra:
                refused = read_all(extra, timeout=5)
        finally:
            for conn in held:
                conn.close()
        time.sleep(0.2)
        ok = httpx.get(server.base_url + "/healthz")
    assert refused.startswith(b"HTTP/1.1 503")
    assert ok.status_code == 200


# --- inputs that were 500s, and the shape of every error --------------------------------

HUGE = int("1" + "0" * 400)


@pytest.mark.parametrize("field", ["deadline_ms", "max_tokens", "max_completion_tokens"])
def test_huge_integers_are_a_400_naming_the_field(market_copy: Path, field: str) -> None:
    with serving(market_copy, auth=False) as server:
        for model in ("fake-model", "worthit"):
            body = {"model": model, "messages": [{"role": "user", "content": QUESTION}]}
            reply = httpx.post(server.base_url + CHAT, json=body | {field: HUGE}, timeout=30)
            assert reply.status_code == 400, reply.text
            assert reply.json()["error"]["param"] == field


def test_an_unpaired_surrogate_is_a_4xx_naming_the_field(market_copy: Path) -> None:
    content = b'{"model": "worthit", "messages": [{"role": "user", "content": "hi \\ud800"}]}'
    decide = b'{"question": "Is the Aurora \\udfff NC700 worth it?"}'
    with serving(market_copy, auth=False) as server:
        chat_reply = httpx.post(
            server.base_url + CHAT, content=content, headers={"content-type": "application/json"}
        )
        streamed = httpx.post(
            server.base_url + CHAT,
            content=content.replace(b"}]}", b'}], "stream": true}'),
            headers={"content-type": "application/json"},
        )
        decide_reply = httpx.post(
            server.base_url + "/v1/decide",
            content=decide,
            headers={"content-type": "application/json"},
        )
    assert chat_reply.status_code == 400
    assert chat_reply.json()["error"]["param"] == "messages.0.content"
    assert streamed.status_code == 400
    assert decide_reply.status_code == 422 and decide_reply.json()["field"] == "body.question"


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"question": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", "nested too deeply"),
        (b'{"question": "caf\xe9"}', "not valid UTF-8"),
    ],
)
def test_unparseable_bodies_get_problem_json(market_copy: Path, content: bytes, says: str) -> None:
    headers = {"content-type": "application/json"}
    with serving(market_copy, auth=False) as server:
        decide = httpx.post(server.base_url + "/v1/decide", content=content, headers=headers)
        chat_reply = httpx.post(server.base_url + CHAT, content=content, headers=headers)
        unknown = httpx.get(server.base_url + "/v1/nothing-here")
    assert decide.status_code == 400
    assert decide.headers["content-type"].startswith("application/problem+json")
    problem = decide.json()
    assert problem["field"] == "body" and says in problem["detail"]
    assert chat_reply.status_code == 400 and says in chat_reply.json()["error"]["message"]
    assert unknown.status_code == 404
    assert unknown.headers["content-type"].startswith("application/problem+json")


# --- caches, operations and the page ----------------------------------------------------


def test_keyed_fact_sheets_are_private(market_copy: Path) -> None:
    auth = key_for(market_copy)
    with serving(market_copy) as server:
        keyed = httpx.get(server.base_url + "/v1/products/S1/facts", headers=auth)
    with serving(market_copy, auth=False) as server:
        open_ = httpx.get(server.base_url + "/v1/products/S1/facts")
    assert keyed.status_code == 200
    assert keyed.headers["cache-control"].startswith("private")
    assert "authorization" in keyed.headers["vary"].lower()
    assert open_.headers["cache-control"].startswith("public")


@pytest.mark.parametrize("path", ["/metrics", "/docs", "/openapi.json"])
def test_operations_need_a_key_unless_opened(market_copy: Path, path: str) -> None:
    auth = key_for(market_copy)
    with serving(market_copy) as server:
        anonymous = httpx.get(server.base_url + path)
        keyed = httpx.get(server.base_url + path, headers=auth)
        probes = [httpx.get(server.base_url + p).status_code for p in ("/healthz", "/readyz")]
    with serving(market_copy, open_operations=True) as server:
        opened = httpx.get(server.base_url + path)
    assert anonymous.status_code == 401
    assert keyed.status_code == 200 and opened.status_code == 200
    assert probes == [200, 200]


def test_the_keyless_demo_answers_only_to_loopback_names(market_copy: Path) -> None:
    with serving(market_copy, auth=False) as server:
        rebound = httpx.get(server.base_url + "/v1/products?q=aur", headers={"Host": "evil.test"})
        page_rebound = httpx.get(server.base_url + "/", headers={"Host": "evil.test:8000"})
        by_name = httpx.get(f"http://localhost:{server.port}/healthz")
        by_ip = httpx.get(server.base_url + "/v1/products?q=aur")
    with serving(market_copy) as server:  # keys on: a proxy's Host is fine
        keyed_host = httpx.get(server.base_url + "/healthz", headers={"Host": "shop.example"})
    assert rebound.status_code == 421 and rebound.json()["field"] == "host"
    assert page_rebound.status_code == 421
    assert by_name.status_code == 200 and by_ip.status_code == 200
    assert keyed_host.status_code == 200


def test_the_page_is_served_with_security_headers(market_copy: Path) -> None:
    with serving(market_copy, auth=False) as server:
        page = httpx.get(server.base_url + "/")
        script = httpx.get(server.base_url + "/static/app.js")
        refused = httpx.get(server.base_url + "/", headers={"Host": "evil.test"})
    for response in (page, script, refused):
        assert response.headers["x-content-type-options"] == "nosniff"
    policy = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "default-src 'self'" in policy
    assert "unsafe-inline" not in policy


def test_openai_errors_keep_their_shape_for_the_sdk(market_copy: Path) -> None:
    """The guard's own refusals on the OpenAI route parse as OpenAI errors."""
    with serving(market_copy) as server:
        reply = httpx.post(server.base_url + CHAT, json=chat(4))
    assert reply.status_code == 401
    assert json.loads(reply.text)["error"]["type"] == "authentication_error"


# --- fair share between tenants ---------------------------------------------------------


def test_one_tenants_backlog_does_not_starve_another(market_copy: Path) -> None:
    """Tenant A queues 12 long streams on a 4-slot engine, then B asks twice: B is served
    as soon as a slot frees, not after A's whole backlog (before: after all 12)."""
    import asyncio

    from worthit.engine.config import EngineConfig
    from worthit.engine.engine import Engine

    from engine_fakes import FakeRunner

    config = EngineConfig(context_size=4096, block_size=16, max_sequences=4)
    engine = Engine(FakeRunner(n_ctx=4096, step_delay_s=(0.002, 0.0)), config)
    app = create_app(market_settings(market_copy), engine=engine)
    a, b = key_for(market_copy, name="a"), key_for(market_copy, name="b")

    async def first_token_at(client: httpx.AsyncClient, auth: dict[str, str]) -> float:
        body = chat(60, stream=True)
        async with client.stream("POST", CHAT, json=body, headers=auth) as response:
            assert response.status_code == 200
            first = None
            async for line in response.aiter_lines():
                if first is None and line.startswith("data: {"):
                    choices = json.loads(line[6:])["choices"]
                    if choices and choices[0]["delta"].get("content"):
                        first = time.monotonic()
            assert first is not None
            return first

    async def race(base_url: str) -> tuple[list[float], list[float]]:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            backlog = [asyncio.create_task(first_token_at(client, a)) for _ in range(12)]
            await asyncio.sleep(0.1)
            late = [asyncio.create_task(first_token_at(client, b)) for _ in range(2)]
            return list(await asyncio.gather(*backlog)), list(await asyncio.gather(*late))

    try:
        with LiveServer(app) as server:
            a_firsts, b_firsts = asyncio.run(race(server.base_url))
    finally:
        engine.close()
    served_before_b = sum(t < min(b_firsts) for t in a_firsts)
    assert served_before_b <= 8, f"{served_before_b} of A's 12 streams started before B's first"
