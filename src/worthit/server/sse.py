"""JSON on the wire, and server-sent events framing.

Every answer is encoded several times over (its `verdict` event, each `token`, `done`,
or one JSON object), so one fast encoder writes them all: orjson. Its output means what
`json.dumps(data, ensure_ascii=False)` does, written compactly: UTF-8 with Chinese as
itself, keys in the order the payload builds them.
"""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse

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


def sse_event(event: str, data: Any) -> str:
    """One event; the data is a single JSON line, so no framing escapes are needed."""
    return f"event: {event}\ndata: {json_text(data)}\n\n"


def wants_event_stream(accept: str | None) -> bool:
    return bool(accept) and "text/event-stream" in (accept or "")
