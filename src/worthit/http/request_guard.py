"""Before any handler runs: the Host, the API key, its scope and the tenant's request
rate; while the body is read, its size and its time; after the handler, what no route
may answer: a 500 in another shape than the API's, or a redirect naming a host.

Pure ASGI, so a streamed answer passes through untouched (BaseHTTPMiddleware would copy
every SSE chunk through an extra task and stream). A body is refused at once when its
Content-Length is too large, and otherwise counted as it arrives, so a chunked upload
stops at the limit instead of being read whole. (Starlette's own body limit, FastAPI's
`max_body_size`, answers 413 in plain text and rewrites any error response to such a
request into one, so it would break the problem+json promise.) LLM tokens are reserved
by the handlers, which know how many a request may generate (http/token_budget.py).

A body refused part-way (408, 413) leaves the rest of it unread on the socket, so those
answers close the connection (`connection: close`) instead of waiting on it. An
exception that escapes a handler before its response starts is answered 500 in the
route's error shape (and logged); after, the connection is dropped, as a stream cannot
change its status. Redirects (the router's trailing-slash one) are made relative: the
router would otherwise build an absolute URL from the client's own `Host` header.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from worthit.http.caller import TENANT_KEY, remember_tenant
from worthit.http.problems import ProblemError, error_for, internal_error
from worthit.service.ratelimit import Limiter, Limits
from worthit.service.shares import ConnectionShares
from worthit.service.tenants import AuthError, KeyScope, Tenant, TenantStore

log = logging.getLogger(__name__)

MAX_BODY_BYTES = 64 * 1024
BODY_TIMEOUT_S = 10.0
"""A body must be read whole within this of its head (a slow upload holds a task)."""
ALWAYS_OPEN = ("/healthz", "/readyz", "/static/", "/v1/webhooks/")
"""Paths anyone may reach, with or without a key: probes, the page's assets, and signed
webhooks (the signature is their key)."""
OPERATIONS_PATHS = ("/metrics", "/docs", "/openapi.json")
"""Traffic, load and the API's shape: behind a key unless `open_operations` is set."""
MARKET_WRITES = frozenset({("POST", "/v1/events")})
"""What writes the shared market (every tenant reads it): only a key of scope `events`."""
EITHER_SCOPE = frozenset({("GET", "/v1/events/schema")})
"""What both kinds of key may call: an event writer validates against the schema."""
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""The Host names a keyless demo answers to: anything else may be a DNS-rebinding page
in the shopper's browser reaching the loopback port through a name it controls."""
CLOSE = {"Connection": "close"}
"""Sent with a refusal that leaves the body unread: the server closes the connection."""
EVENT_STREAMS = frozenset({("GET", "/v1/watches/events")})
"""Responses that stay open until the client goes: a tenant's share of them is smaller."""


class GuardMiddleware:
    def __init__(
        self,
        app: ASGIApp,
        tenants: TenantStore | None,
        limiter: Limiter,
        open_paths: Iterable[str] = ALWAYS_OPEN,
        allowed_hosts: frozenset[str] | None = None,
        body_timeout_s: float = BODY_TIMEOUT_S,
        shares: ConnectionShares | None = None,
    ) -> None:
        self.app = app
        self.shares = shares
        self.tenants = tenants
        self.limiter = limiter
        self.open_paths = tuple(open_paths)
        self.allowed_hosts = allowed_hosts
        self.body_timeout_s = body_timeout_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            await self._admit(scope)
        except ProblemError as refusal:
            await error_for(scope["path"], refusal)(scope, receive, send)
            return
        started = False

        async def checked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if 300 <= message["status"] < 400:
                    message = {**message, "headers": _relative_location(message["headers"])}
            await send(message)

        try:
            await self._within_share(scope, self._bounded(receive), checked_send)
        except ClientDisconnect:
            return  # nobody to answer
        except Exception:
            if started:
                raise
            log.exception("%s %s failed", scope["method"], scope["path"])
            await internal_error(scope["path"])(scope, receive, send)
            return
        if not started:
            log.error("%s %s: the handler returned no response", scope["method"], scope["path"])
            await internal_error(scope["path"])(scope, receive, send)

    async def _within_share(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The handler, counted in its tenant's share of the connections until its
        response ends (service/shares.py); over the share, 429 with Retry-After and the
        connection closed, so a refused client cannot keep it idle either."""
        tenant = scope.get("state", {}).get(TENANT_KEY)
        if self.shares is None or not isinstance(tenant, Tenant):
            await self.app(scope, receive, send)
            return
        stream = (scope["method"], scope["path"]) in EVENT_STREAMS
        stream_at = time.monotonic() if stream else None
        refused = self.shares.enter(tenant.name, stream_at)
        if refused is not None:
            retry = {"Retry-After": str(refused.retry_after_s)}
            problem = ProblemError(429, "Too many connections", refused.detail,
                                   "authorization", headers=retry | CLOSE)  # fmt: skip
            await error_for(scope["path"], problem)(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        finally:
            self.shares.leave(tenant.name, stream_at)

    async def _admit(self, scope: Scope) -> None:
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
            raise ProblemError(
                413, "Body too large", f"request bodies are limited to {MAX_BODY_BYTES} bytes",
                "body", headers=dict(CLOSE),
            )  # fmt: skip
        if self.allowed_hosts is not None:
            host = _hostname(headers.get("host", ""))
            if host not in self.allowed_hosts:
                raise ProblemError(
                    421, "Misdirected request",
                    f"this server answers only to {', '.join(sorted(self.allowed_hosts))}",
                    "host",
                )  # fmt: skip
        path = scope["path"]
        if self.tenants is None or path == "/" or path.startswith(self.open_paths):
            return
        header = headers.get("authorization", "")
        key = header[7:].strip() if header.lower().startswith("bearer ") else ""
        if not key:
            raise ProblemError(
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
            raise ProblemError(exc.status, title, str(exc), "authorization") from exc
        _check_scope(tenant, scope["method"], path)
        admission = await self.limiter.admit_async(
            tenant.name, Limits(tenant.requests_per_minute, tenant.llm_tokens_per_minute)
        )
        if not admission.allowed:
            retry = admission.retry_after_header
            raise ProblemError(
                429,
                "Too many requests",
                f"tenant {tenant.name!r} is over its {admission.limited_by} limit",
                "authorization",
                headers={"Retry-After": retry} if retry else None,
            )
        remember_tenant(scope, tenant)

    def _bounded(self, receive: Receive) -> Receive:
        """`receive`, refusing with 413 past the size limit and 408 past the time limit.
        The handler's body parsing re-raises an HTTPException as it is."""
        deadline = asyncio.get_running_loop().time() + self.body_timeout_s
        size = 0
        body_done = False

        async def bounded() -> Message:
            nonlocal body_done, size
            if body_done:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                raise HTTPException(
                    408,
                    f"the request body was not sent within {self.body_timeout_s:g} s",
                    headers=dict(CLOSE),
                ) from None
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > MAX_BODY_BYTES:
                    raise HTTPException(
                        413,
                        f"request bodies are limited to {MAX_BODY_BYTES} bytes",
                        headers=dict(CLOSE),
                    )
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        return bounded


def _check_scope(tenant: Tenant, method: str, path: str) -> None:
    """403 naming the scope a route needs when the key has the other one. A key that
    writes events does nothing else, so one kept on a point-of-sale machine neither asks
    nor reads."""
    route = (method, path.rstrip("/") or "/")
    if route in EITHER_SCOPE:
        return
    needed = KeyScope.EVENTS if route in MARKET_WRITES else KeyScope.ASK
    if tenant.scope is needed:
        return
    if needed is KeyScope.EVENTS:
        detail = (
            "writing market events needs a key of scope 'events', bound to its source "
            "(worthit keys create --scope events --source NAME); this key's scope is 'ask'"
        )
    else:
        detail = (
            f"this key's scope is 'events' (it writes market events as source "
            f"{tenant.source!r}); asking, reading and watching need a key of scope 'ask'"
        )
    raise ProblemError(403, "Forbidden", detail, "authorization", scope=needed.value)


def _relative_location(headers: Iterable[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`location: http://HOST/path?q` → `location: /path?q`. The service redirects only
    within itself, and the host in an absolute URL would be whatever the client sent."""
    rewritten = []
    for name, value in headers:
        if name.lower() == b"location":
            parts = urlsplit(value.decode("latin-1"))
            if parts.scheme or parts.netloc:
                path = "/" + parts.path.lstrip("/")  # never `//host`: that names a host too
                value = (path + (f"?{parts.query}" if parts.query else "")).encode("latin-1")
        rewritten.append((name, value))
    return rewritten


def _hostname(host: str) -> str | None:
    try:
        return urlsplit(f"//{host}").hostname
    except ValueError:
        return None
