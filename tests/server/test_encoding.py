"""The wire's JSON encoder: what `json.dumps(..., ensure_ascii=False)` wrote, compactly:
Chinese as itself, keys in the payload's order, one line per SSE event."""

from __future__ import annotations

import json
from typing import Any

import httpx
from hypothesis import given
from hypothesis import strategies as st

from worthit.http.openai.wire import chat_chunk, error_response
from worthit.http.sse import FastJSONResponse, json_bytes, json_text, sse_event

from live_server import LiveServer
from service_fixtures import market_copy, open_service

__all__ = ["market_copy", "open_service"]

TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=20)
"""Any text a str can be encoded from (no lone surrogates), control characters included."""
SCALARS = st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | TEXT
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
NUMBERS = st.floats(allow_nan=False, allow_infinity=False)


def compact(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


@given(JSON)
def test_the_same_text_as_the_standard_encoder(data: Any) -> None:
    assert json_text(data) == compact(data)
    assert json_bytes(data) == compact(data).encode()


@given(st.lists(NUMBERS, max_size=8))
def test_floats_read_back_exactly(values: list[float]) -> None:
    assert json.loads(json_text(values)) == values


def test_chinese_stays_readable_and_keys_keep_their_order() -> None:
    data = {"question": "值不值得买？", "verdict": "BUY", "a": 1, "reasons": []}
    assert json_text(data) == '{"question":"值不值得买？","verdict":"BUY","a":1,"reasons":[]}'
    body = bytes(FastJSONResponse(data).body)
    assert "值不值得买".encode() in body and b"\\u" not in body
    assert list(json.loads(body)) == ["question", "verdict", "a", "reasons"]


def test_integer_keys_become_strings_as_before() -> None:
    assert json_text({1: "a", "b": 2}) == compact({1: "a", "b": 2})


def test_an_sse_event_is_one_data_line() -> None:
    event = sse_event("token", {"text": "第一行\n第二行", "n": 2})
    assert event == 'event: token\ndata: {"text":"第一行\\n第二行","n":2}\n\n'


def test_the_openai_shapes_keep_chinese_and_order() -> None:
    line = chat_chunk("chatcmpl-1", 7, "worthit", {"content": "值得买"})
    assert line.startswith("data: ") and line.endswith("\n\n") and "值得买" in line
    assert list(json.loads(line[6:])) == ["id", "object", "created", "model", "choices"]
    error = error_response(400, "消息: 缺少问题", "invalid_request_error", "messages")
    assert "缺少问题".encode() in error.body


VERDICT_FIELDS = ["question", "status", "intent", "language", "verdict", "verdict_label",
                  "confidence", "calibrated_confidence", "calibration_evidence", "reasons",
                  "sku", "title", "facts", "data_age_ms", "facts_version"]  # fmt: skip


def test_an_answer_over_http_is_utf8_in_the_payload_order(open_service: LiveServer) -> None:
    url = open_service.base_url + "/v1/decide"
    question = {"question": "极光NC700值不值得买？", "deadline_ms": 100}
    r = httpx.post(url, json=question)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "application/json"
    assert "值得".encode() in r.content and b"\\u" not in r.content
    assert list(r.json())[: len(VERDICT_FIELDS)] == VERDICT_FIELDS
    with httpx.stream("POST", url, json=question, headers={"Accept": "text/event-stream"}) as s:
        lines = [line for line in s.iter_lines() if line.startswith("data: ")]
    verdict = json.loads(lines[0][6:])
    assert list(verdict)[: len(VERDICT_FIELDS)] == VERDICT_FIELDS
    assert "值得" in lines[0] and "\\u" not in lines[0]


def test_a_raw_utf8_request_target_is_a_problem_that_says_to_encode_it(
    open_service: LiveServer,
) -> None:
    """`curl 'http://…/v1/products?q=极光'` sends the UTF-8 bytes as they are, which HTTP
    does not allow in a request target: the answer was uvicorn's plain-text "Invalid HTTP
    request received."; it is the API's problem+json now, saying what to send instead."""
    import socket
    from urllib.parse import urlsplit

    where = urlsplit(open_service.base_url)
    with socket.create_connection((where.hostname, where.port), timeout=10) as conn:
        conn.sendall("GET /v1/products?q=极光 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        raw = b""
        while chunk := conn.recv(65536):
            raw += chunk
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ")
    assert b"content-type: application/problem+json" in head.lower()
    problem = json.loads(body)
    assert problem["status"] == 400 and "percent-encode" in problem["detail"]
    encoded = httpx.get(open_service.base_url + "/v1/products", params={"q": "极光"})
    assert encoded.status_code == 200 and encoded.json()
