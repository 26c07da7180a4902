"""Server-sent events framing."""

from __future__ import annotations

import json
from typing import Any


def sse_event(event: str, data: Any) -> str:
    """One event; the data is a single JSON line, so no framing escapes are needed."""
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def wants_event_stream(accept: str | None) -> bool:
    return bool(accept) and "text/event-stream" in (accept or "")
