"""OpenAI's wire shapes: error objects and `chat.completion(.chunk)` objects.

The same protocol as the anchors (llama-server, ``python -m llama_cpp.server``), so SDKs
raise their typed errors with our message and one benchmark client measures all three.
"""

from __future__ import annotations

from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from worthit.http.sse import FastJSONResponse, json_text


def error_response(
    status: int, message: str, kind: str, param: str | None = None, code: str | None = None
) -> JSONResponse:
    """OpenAI's error shape; a 5xx says `x-should-retry: false` (the SDK would retry it late)."""
    headers = {"x-should-retry": "false"} if status >= 500 else None
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return FastJSONResponse(body, status_code=status, headers=headers)


def openai_validation_error(exc: RequestValidationError) -> JSONResponse:
    """A 400 in OpenAI's shape naming the first bad field (what the SDKs expect)."""
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(loc) or None
    message = f"{param}: {first.get('msg', 'invalid value')}" if param else "invalid body"
    return error_response(400, message, "invalid_request_error", param)


def completion_object(
    completion_id: str,
    created: int,
    model: str,
    text: str,
    finish: str,
    usage: dict[str, Any],
    extension: dict[str, Any],
) -> dict[str, Any]:
    """A whole `chat.completion`, with worthit's evidence under `worthit`."""
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish}
        ],
        "usage": usage,
        "worthit": extension,
    }


def chat_chunk(
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, str] | None,
    finish: str | None = None,
    **extra: Any,
) -> str:
    """One `chat.completion.chunk` SSE line; `delta=None` sends no choices (the usage chunk)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    data = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
        **extra,
    }
    return f"data: {json_text(data)}\n\n"


DONE_LINE = "data: [DONE]\n\n"
