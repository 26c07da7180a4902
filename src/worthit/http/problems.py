"""Errors: RFC 9457 problem details, or OpenAI's error object on the OpenAI routes.

Every refusal, whoever makes it (the guard middleware, validation, a handler, the body
parser), goes through `error_for`, so a client sees one shape per route family: the
OpenAI SDKs parse ``{"error": {...}}`` into their typed exceptions, every other client
gets ``application/problem+json`` naming the field at fault.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from worthit.http.openai.wire import error_response

PROBLEM_JSON = "application/problem+json"
OPENAI_PREFIX = ("/v1/chat/", "/v1/models")
"""Paths that answer in OpenAI's error shape: the routes the OpenAI SDKs call."""

_OPENAI_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout",
    429: "rate_limit_exceeded",
}


class ProblemError(Exception):
    """Raise from a handler to answer with a problem object."""

    def __init__(
        self,
        status: int,
        title: str,
        detail: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field
        self.headers = headers
        self.extra = extra


def problem_body(
    status: int, title: str, detail: str, field: str | None = None, **extra: Any
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "type": f"https://worthit.dev/problems/{title.lower().replace(' ', '-')}",
        "title": title,
        "status": status,
        "detail": detail,
    }
    if field is not None:
        body["field"] = field
    body.update(extra)
    return body


def problem_response(
    status: int,
    title: str,
    detail: str,
    field: str | None = None,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    return JSONResponse(
        problem_body(status, title, detail, field, **extra),
        status_code=status,
        media_type=PROBLEM_JSON,
        headers=headers,
    )


def error_for(path: str, error: ProblemError) -> JSONResponse:
    """The error in the shape the route's clients parse."""
    if path.startswith(OPENAI_PREFIX):
        kind = _OPENAI_TYPES.get(error.status)
        if kind is None:
            kind = "server_error" if error.status >= 500 else "invalid_request_error"
        response = error_response(
            error.status, error.detail, kind, error.field, error.extra.get("code")
        )
        if error.headers:
            response.headers.update(error.headers)
        return response
    return problem_response(
        error.status, error.title, error.detail, error.field, error.headers, **error.extra
    )


def internal_error(path: str) -> JSONResponse:
    """A 500 in the route's shape, closing the connection: what failed is in the log, not
    in the answer (a traceback would tell a caller about the code and the data)."""
    detail = "the server failed to answer this request; the failure is logged"
    return error_for(
        path, ProblemError(500, "Internal error", detail, headers={"Connection": "close"})
    )


PARSE_ERROR = "There was an error parsing the body"
"""FastAPI's detail for a body it cannot decode (the cause says why), worded better here."""


async def handle_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return error_for(request.url.path, exc)


async def handle_http_error(request: Request, exc: Exception) -> JSONResponse:
    """Starlette's own refusals (no such route, wrong method, a body that is not JSON)
    in the same shape as ours instead of ``{"detail": ...}``."""
    assert isinstance(exc, HTTPException)
    title = _HTTP_TITLES.get(exc.status_code, "Invalid request")
    detail = str(exc.detail)
    field = "body" if exc.status_code in (400, 408, 413) else None
    if exc.status_code == 400 and detail == PARSE_ERROR:
        cause = exc.__cause__
        if isinstance(cause, RecursionError):
            detail = "the body's JSON is nested too deeply"
        elif isinstance(cause, UnicodeDecodeError):
            detail = "the body is not valid UTF-8"
        else:
            detail = "the body is not valid JSON"
        title = "Malformed body"
    headers = dict(exc.headers) if exc.headers else None
    return error_for(request.url.path, ProblemError(exc.status_code, title, detail, field, headers))


_HTTP_TITLES = {
    400: "Invalid request",
    404: "Not found",
    405: "Method not allowed",
    408: "Request timeout",
    413: "Body too large",
    406: "Not acceptable",
    415: "Unsupported media type",
}
