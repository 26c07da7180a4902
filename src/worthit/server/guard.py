"""Before any handler runs: the body size, then the API key and the tenant's limits.

Pure ASGI, so a streamed answer passes through untouched (BaseHTTPMiddleware would copy
every SSE chunk through an extra task and stream).
"""

from __future__ import annotations

from fastapi import Request
from fastapi.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from worthit.engine.sequence import Priority
from worthit.server.priority import CEILING_KEY
from worthit.server.problems import problem_response
from worthit.server.ratelimit import Limits, TenantLimiter
from worthit.server.tenants import AuthError, TenantStore

MAX_BODY_BYTES = 64 * 1024
OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/static/", "/docs", "/openapi.json")
LLM_TOKENS_PER_REQUEST = 64
"""Tokens reserved from a tenant's LLM budget per request, refunded when fewer are used."""


class GuardMiddleware:
    def __init__(self, app: ASGIApp, tenants: TenantStore | None, limiter: TenantLimiter) -> None:
        self.app = app
        self.tenants = tenants
        self.limiter = limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(Request(scope))
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _refusal(self, request: Request) -> Response | None:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return problem_response(
                413,
                "Body too large",
                f"request bodies are limited to {MAX_BODY_BYTES} bytes",
                "body",
            )
        path = request.url.path
        if self.tenants is None or path == "/" or path.startswith(OPEN_PATHS):
            return None
        header = request.headers.get("authorization", "")
        key = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not key:
            return problem_response(
                401,
                "Unauthorized",
                "send an API key as 'Authorization: Bearer <key>'",
                "authorization",
                headers={"WWW-Authenticate": "Bearer"},
            )
        try:
            tenant = self.tenants.authenticate(key)
        except AuthError as exc:
            title = "Unauthorized" if exc.status == 401 else "Forbidden"
            return problem_response(exc.status, title, str(exc), "authorization")
        admission = self.limiter.admit(
            tenant.name,
            Limits(tenant.requests_per_minute, tenant.llm_tokens_per_minute),
            LLM_TOKENS_PER_REQUEST if request.method == "POST" else 0,
        )
        if not admission.allowed:
            retry = admission.retry_after_header
            return problem_response(
                429,
                "Too many requests",
                f"tenant {tenant.name!r} is over its {admission.limited_by} limit",
                "authorization",
                headers={"Retry-After": retry} if retry else None,
            )
        request.state.tenant = tenant
        setattr(request.state, CEILING_KEY, Priority[tenant.priority.name])
        return None
