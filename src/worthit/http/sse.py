"""JSON on the wire, and server-sent events framing.

Every answer is encoded several times over (its `verdict` event, each `token`, `done`,
or one JSON object), so one fast encoder writes them all: orjson. Its output means what
`json.dumps(data, ensure_ascii=False)` does, written compactly: UTF-8 with Chinese as
itself, keys in the order the payload builds them.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.types import Receive, Scope, Send

_OPTIONS = orjson.OPT_NON_STR_KEYS
"""Integer keys become strings, as with `json.dumps`, instead of an error."""


def json_bytes(data: Any) -> bytes:
    return orjson.dumps(data, option=_OPTIONS)


def json_text(data: Any) -> str:
    return orjson.dumps(data, option=_OPTIONS).decode()


class FastJSONResponse(JSONResponse):
    """A JSON response written by the same encoder as the events."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


def sse_event(event: str, data: Any, event_id: str | None = None) -> str:
    """One event; the data is a single JSON line, so no framing escapes are needed. An id
    (no line breaks) is what a reconnecting client sends back as `Last-Event-ID`."""
    if event_id is None:
        return f"event: {event}\ndata: {json_text(data)}\n\n"
    return f"event: {event}\ndata: {json_text(data)}\nid: {event_id}\n\n"


def wants_event_stream(accept: str | None) -> bool:
    return bool(accept) and "text/event-stream" in (accept or "")


class LastEvent(str):
    """The stream's last event (`done`, `error`): written with the body's end."""

    __slots__ = ()


class EventStreamResponse(StreamingResponse):
    """An SSE response for a short stream the shopper waits on.

    Starlette's streaming response costs an answer an anyio task group (to notice a
    client that goes away) and a write of its own for the body's end. Here a plain task
    watches for the disconnect and cancels the stream, which closes its generator as
    Starlette's does (the answer flow then aborts its engine request); and the
    `LastEvent` goes out in one write with the end of the body.
    """

    media_type = "text/event-stream"

    def __init__(self, content: AsyncIterator[str], headers: dict[str, str] | None = None) -> None:
        super().__init__(content, headers=headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        streaming = asyncio.current_task()
        assert streaming is not None
        gone = asyncio.Event()

        async def watch() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            gone.set()
            streaming.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await self._send_events(send)
        except asyncio.CancelledError:
            if not gone.is_set():
                raise
            streaming.uncancel()
        finally:
            watcher.cancel()

    async def _send_events(self, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers}
        )
        events = self.body_iterator
        try:
            async for chunk in events:
                last = isinstance(chunk, LastEvent)
                body = chunk.encode() if isinstance(chunk, str) else bytes(chunk)
                await send({"type": "http.response.body", "body": body, "more_body": not last})
                if last:
                    return
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            close = getattr(events, "aclose", None)
            if close is not None:
                await close()  # the generator's own clean-up runs now, not when collected
