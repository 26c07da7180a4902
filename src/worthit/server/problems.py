"""Errors as RFC 9457 problem details: every 4xx names what was wrong and where."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse

PROBLEM_JSON = "application/problem+json"


class ProblemError(Exception):
    """Raise from a handler to answer with a problem object."""

    def __init__(
        self, status: int, title: str, detail: str, field: str | None = None, **extra: Any
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.field = field
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


async def handle_problem(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ProblemError)
    return problem_response(exc.status, exc.title, exc.detail, exc.field, **exc.extra)
