"""One error shape everywhere, through a real uvicorn (issue 23, finding 5): transport
refusals (408, 413, 431, 503) and 500s are problem details (OpenAI's error object on the
OpenAI routes) and close the connection; a slow body's 408 does not keep the connection;
redirects never name the client's Host."""

from __future__ import annotations

import contextlib
import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
from test_hardening import key_for, read_all

from worthit.engine.errors import EngineError
from worthit.http.app import create_app
from worthit.service.transport import TransportLimits

from live_server import LiveServer
from service_fixtures import fake_engine, market_copy, market_settings, serving

__all__ = ["market_copy"]

PROBLEM = "application/problem+json"


def parse(raw: bytes) -> tuple[int, dict[str, str], Any]:
    """A raw HTTP/1.1 response: status, headers (lower-case names), JSON body."""
    head, _, body = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, json.loads(body)


def is_problem(status: int, headers: dict[str, str], body: Any, expected: int) -> bool:
    return (
        status == expected
        and headers["content-type"].startswith(PROBLEM)
        and headers.get("connection") == "close"
        and body["status"] == expected
        and bool(body["title"])
        and bool(body["detail"])
    )


def exchange(port: int, request: bytes, timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port)) as conn:
        with contextlib.suppress(OSError):  # the server may close while this is sent
            conn.sendall(request)
        return read_all(conn, timeout)


def test_connections_beyond_the_limit_get_a_problem(market_copy: Path) -> None:
    limits = TransportLimits(max_connections=2, reserved_connections=0)  # no reserve: refuse
    with serving(market_copy, limits, auth=False) as server:
        held = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(2)]
        time.sleep(0.2)
        try:
            refused = exchange(server.port, b"")
        finally:
            for conn in held:
                conn.close()
    status, headers, body = parse(refused)
    assert is_problem(status, headers, body, 503)
    assert body["detail"] == "too many open connections"


def test_a_huge_head_gets_a_problem_or_the_openai_error(market_copy: Path) -> None:
    big = b"X-Big: " + b"a" * (20 * 1024) + b"\r\n"
    with serving(market_copy, auth=False) as server:
        plain = exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + big)
        chat = exchange(
            server.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n" + big
        )
    assert is_problem(*parse(plain), 431)
    status, headers, body = parse(chat)
    assert status == 431 and headers["connection"] == "close"
    assert headers["content-type"].startswith("application/json")
    assert body["error"]["type"] == "invalid_request_error" and body["error"]["message"]


def test_a_slow_head_gets_a_problem_or_the_openai_error(market_copy: Path) -> None:
    limits = TransportLimits(header_timeout_s=0.5)
    with serving(market_copy, limits, auth=False) as server:
        plain = exchange(server.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        models = exchange(server.port, b"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\nX-")
    assert is_problem(*parse(plain), 408)
    status, headers, body = parse(models)
    assert status == 408 and headers["connection"] == "close"
    assert body["error"]["type"] == "timeout"


def test_a_body_announced_too_large_is_refused_and_the_connection_closed(
    market_copy: Path,
) -> None:
    with serving(market_copy, auth=False) as server:
        answer = exchange(
            server.port,
            b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"content-length: 10000000\r\n\r\n{",
        )
    status, headers, body = parse(answer)
    assert is_problem(status, headers, body, 413) and body["field"] == "body"


def test_a_slow_bodys_408_closes_the_connection(market_copy: Path) -> None:
    """The 408 came, then the connection stayed open for another head's 10 s."""
    with (
        serving(market_copy, auth=False) as server,
        socket.create_connection(("127.0.0.1", server.port)) as conn,
    ):
        conn.sendall(
            b"POST /v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"content-type: application/json\r\ncontent-length: 100\r\n\r\n{"
        )
        conn.settimeout(30)
        first = conn.recv(65536)  # the 408, after the guard's 10 s body limit
        answered = time.monotonic()
        rest = read_all(conn, timeout=3)
        closed_after = time.monotonic() - answered
    status, headers, body = parse(first + rest)
    assert is_problem(status, headers, body, 408) and body["field"] == "body"
    assert closed_after < 3  # closed by the server, not by the test giving up


def test_an_unexpected_failure_is_a_500_in_the_routes_shape(market_copy: Path) -> None:
    """Any handler's exception (here, routes that fail on purpose beside the real ones)."""

    async def fail() -> None:
        raise EngineError("a bug")

    engine = fake_engine()
    app = create_app(market_settings(market_copy, auth=False), engine=engine)
    app.add_api_route("/v1/fail", fail)
    app.add_api_route("/v1/models/fail", fail)
    try:
        with LiveServer(app) as server:
            plain = httpx.get(server.base_url + "/v1/fail")
            openai = httpx.get(server.base_url + "/v1/models/fail")
            after = httpx.get(server.base_url + "/healthz")
    finally:
        engine.close()
    assert plain.status_code == 500
    assert plain.headers["content-type"].startswith(PROBLEM)
    assert plain.headers["connection"] == "close"
    assert plain.json()["status"] == 500 and "a bug" not in plain.text
    assert openai.status_code == 500 and openai.json()["error"]["type"] == "server_error"
    assert after.status_code == 200


def test_the_trailing_slash_redirect_does_not_echo_the_host(market_copy: Path) -> None:
    with serving(market_copy, auth=True) as server:
        auth = key_for(market_copy)
        r = httpx.get(
            server.base_url + "/v1/watches/?limit=5",
            headers={**auth, "Host": "evil.example"},
            follow_redirects=False,
        )
        followed = httpx.get(server.base_url + "/v1/watches/", headers=auth, follow_redirects=True)
    assert r.status_code in (307, 308)
    assert r.headers["location"] == "/v1/watches?limit=5"
    assert followed.status_code == 200
