"""`json_body` answers every body as FastAPI answers a declared one: the same model when
it is good, the same status and errors when it is not."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worthit.http.decide_api import DecideRequest
from worthit.http.json_body import json_body, openapi


async def _errors(request: Request, exc: Exception) -> JSONResponse:
    """FastAPI's own handler echoes the input, which fails on bytes that are not UTF-8."""
    assert isinstance(exc, RequestValidationError)
    return JSONResponse([(e["type"], e["loc"], e["msg"]) for e in exc.errors()], 422)


app = FastAPI(exception_handlers={RequestValidationError: _errors})


@app.post("/declared")
async def declared(body: DecideRequest) -> dict[str, Any]:
    return body.model_dump()


@app.post("/read", openapi_extra=openapi(DecideRequest))
async def read(request: Request) -> dict[str, Any]:
    return (await json_body(request, DecideRequest)).model_dump()


def _seen(response: httpx.Response) -> tuple[int, Any]:
    return response.status_code, response.json()


async def _both(content: bytes, content_type: str | None) -> tuple[Any, Any]:
    headers = {} if content_type is None else {"content-type": content_type}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        declared_reply = await client.post("/declared", content=content, headers=headers)
        read_reply = await client.post("/read", content=content, headers=headers)
    return _seen(declared_reply), _seen(read_reply)


VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 400), st.floats(allow_nan=False),
    st.text(max_size=8), st.just("x" * 501), st.sampled_from(["en", "zh", "fr", "2026-11-30"]),
    st.lists(st.integers(), max_size=2),
)  # fmt: skip
FIELDS = st.sampled_from(
    ["question", "sku", "locale", "max_tokens", "deadline_ms", "as_of", "colour"]
)
OBJECTS = st.dictionaries(FIELDS, VALUES, max_size=5).map(lambda d: json.dumps(d).encode())
BODIES = st.one_of(
    OBJECTS,
    OBJECTS.map(lambda b: b[:-1]),  # cut short
    st.binary(max_size=40),
    st.sampled_from(
        [b"", b"[1, 2]", b'"hi"', b"null", b"{not json", b'{"question": "caf\xe9"}',
         b'{"question": "\\ud800"}', b'{"question": "ok", "max_tokens": NaN}',
         b'\xef\xbb\xbf{"question": "ok"}', b'{"question": "a", "question": "b"}',
         b'{"question": "ok"} x', b'{"question": ' + b"[" * 5000 + b"]" * 5000 + b"}"]
    ),
)  # fmt: skip
CONTENT_TYPES = st.sampled_from(
    [None, "application/json", "application/json; charset=utf-8", "application/vnd.x+json",
     "text/plain", "APPLICATION/JSON"]
)  # fmt: skip


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(content=BODIES, content_type=CONTENT_TYPES)
def test_every_body_is_answered_as_a_declared_one(content: bytes, content_type: str | None) -> None:
    declared_seen, read_seen = asyncio.run(_both(content, content_type))
    assert read_seen == declared_seen


@pytest.mark.parametrize(
    ("content", "status"),
    [
        (b'{"question": "Is it worth it?", "max_tokens": 5}', 200),
        (b'{"question": "caf\xe9"}', 400),
        (b'{"question": ' + b"[" * 5000 + b"]" * 5000 + b"}", 400),
        (b"{}", 422),
    ],
)
def test_examples(content: bytes, status: int) -> None:
    declared_seen, read_seen = asyncio.run(_both(content, "application/json"))
    assert read_seen == declared_seen and read_seen[0] == status


def test_the_route_documents_the_body_a_declared_one_documents() -> None:
    spec = app.openapi()
    read_op, declared_op = spec["paths"]["/read"]["post"], spec["paths"]["/declared"]["post"]
    assert (
        read_op["requestBody"]["content"]["application/json"]["schema"]
        == (spec["components"]["schemas"]["DecideRequest"])
    )
    assert read_op["requestBody"]["required"] is True
    assert read_op["responses"]["422"] == declared_op["responses"]["422"]
