"""The HTTP transport: uvicorn with limits on what a connection may hold before the app.

uvicorn bounds neither how long a client may take to send its request head nor how large
that head may be, and it counts connections only once a request has arrived: a client
that opens sockets and sends half a head, one byte at a time, or a 32 MB header, holds
memory and file descriptors for as long as it likes. `GuardedHttpProtocol` adds the
three limits a reverse proxy would (nginx's ``client_header_timeout``,
``large_client_header_buffers``, ``worker_connections``), so the service is safe to
expose without one. Bodies are bounded by the guard middleware, which sees them as ASGI
messages.

Its refusals keep the API's error shape (http/problems.py): problem details, or OpenAI's
error object when the request line already named an OpenAI route; each closes the
connection and says so (`connection: close`).

It subclasses uvicorn's httptools protocol, whose hooks are not a public API; the tests
drive each limit over a real socket, so a uvicorn release that moves them fails there.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol


@dataclass(frozen=True, slots=True)
class TransportLimits:
    header_timeout_s: float = 10.0
    """A request head (request line and headers) must arrive within this, counted from
    the connection's start or the previous response's end. The idle keep-alive limit
    (5 s) is uvicorn's own."""
    max_header_bytes: int = 16 * 1024
    """Request line plus headers; a larger head gets 431 and the connection is closed."""
    max_connections: int = 1024
    """Open connections per process; one more is answered 503 and closed at once, unless
    the reserve takes it."""
    reserved_connections: int = 32
    """Connections past `max_connections` kept for the open routes (`/healthz`, `/readyz`,
    the page and its assets): a request for any other path on one is answered 503 and
    the connection closed, so however many connections the API's clients hold, a probe
    and the page still get an answer. Each tenant's share of the API's connections is
    the app's to keep (http/shares.py)."""


DEFAULT_LIMITS = TransportLimits()
RESERVED_FOR = (b"/healthz", b"/readyz", b"/static/")
"""Path prefixes the reserve serves, besides the page itself (`/`)."""


def reserved_for(url: bytes) -> bool:
    """Whether a request line's target is one the reserve connections serve."""
    path = url.split(b"?", 1)[0]
    return path == b"/" or path.startswith(RESERVED_FOR)


OPENAI_PATHS = (b"/v1/chat/", b"/v1/models")
"""Routes whose clients (the OpenAI SDKs) parse OpenAI's error object, as http/problems.py."""


@dataclass(frozen=True, slots=True)
class Refusal:
    """A transport-level refusal, written before the app sees the request."""

    status: int
    reason: str
    title: str
    detail: str
    openai_type: str

    def response(self, path: bytes = b"") -> bytes:
        """The whole HTTP/1.1 response, in the shape the route's clients parse."""
        body: dict[str, object]
        if path.startswith(OPENAI_PATHS):
            media = b"application/json"
            body = {"error": {"message": self.detail, "type": self.openai_type,
                              "param": None, "code": None}}  # fmt: skip
        else:
            media = b"application/problem+json"
            slug = self.title.lower().replace(" ", "-")
            body = {"type": f"https://worthit.dev/problems/{slug}", "title": self.title,
                    "status": self.status, "detail": self.detail}  # fmt: skip
        data = json.dumps(body).encode()
        return (
            f"HTTP/1.1 {self.status} {self.reason}\r\n".encode()
            + b"content-type: " + media + b"\r\n"
            b"content-length: " + str(len(data)).encode() + b"\r\n"
            b"connection: close\r\n\r\n" + data
        )  # fmt: skip


TOO_MANY_CONNECTIONS = Refusal(
    503, "Service Unavailable", "Too many connections", "too many open connections",
    "server_error",
)  # fmt: skip
HEADERS_TOO_LARGE = Refusal(
    431, "Request Header Fields Too Large", "Request head too large",
    "the request head is too large", "invalid_request_error",
)  # fmt: skip
HEADER_TIMEOUT = Refusal(
    408, "Request Timeout", "Request timeout", "the request head took too long", "timeout"
)
NOT_HTTP = Refusal(
    400, "Bad Request", "Invalid request", "the request is not valid HTTP/1.1",
    "invalid_request_error",
)  # fmt: skip
NON_ASCII_TARGET = Refusal(
    400, "Bad Request", "Request target not encoded",
    "the request target must be ASCII: percent-encode other characters as UTF-8 "
    "(q=%E6%9E%81%E5%85%89 for q=极光; curl -G --data-urlencode 'q=极光' URL does it)",
    "invalid_request_error",
)  # fmt: skip
"""What a raw UTF-8 query (`curl 'http://…/v1/products?q=极光'`) gets: the parser refuses
the byte, as RFC 9112 has it, and the client is told how to send it."""


class GuardedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a head timeout, a head size cap and a
    connection cap (`limits` is set by :func:`protocol_with`)."""

    limits: TransportLimits = DEFAULT_LIMITS

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        self._head_bytes = 0
        self._head_timer: asyncio.TimerHandle | None = None
        limit = self.limits.max_connections + self.limits.reserved_connections
        if len(self.server_state.connections) >= limit:
            transport.write(TOO_MANY_CONNECTIONS.response())
            transport.close()
            return
        super().connection_made(transport)
        self._await_head()

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_head_timer()
        if self.transport is None:  # refused in connection_made: uvicorn never saw it
            return
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        self._received = data  # what send_400_response reads when the parser refuses it
        if self._head_timer is not None:
            self._head_bytes += len(data)
        super().data_received(data)
        if self._head_timer is not None and self._head_bytes > self.limits.max_header_bytes:
            self._refuse(HEADERS_TOO_LARGE)

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes the parser refuses is plain text; this is the API's
        error shape, and for a request line with non-ASCII bytes, says to encode them."""
        line = getattr(self, "_received", b"").split(b"\n", 1)[0]
        self._refuse(NON_ASCII_TARGET if not line.isascii() else NOT_HTTP)

    def on_headers_complete(self) -> None:
        self._stop_head_timer()
        size = len(self.url) + sum(len(name) + len(value) + 4 for name, value in self.headers)
        if size > self.limits.max_header_bytes:
            self._refuse(HEADERS_TOO_LARGE)
            return
        over = len(self.server_state.connections) > self.limits.max_connections
        if over and not reserved_for(self.url):  # this connection is one of the reserve
            self._refuse(TOO_MANY_CONNECTIONS)
            return
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and not self.pipeline:
            self._await_head()

    def _await_head(self) -> None:
        self._stop_head_timer()
        self._head_bytes = 0
        self._head_timer = self.loop.call_later(
            self.limits.header_timeout_s, self._refuse, HEADER_TIMEOUT
        )

    def _stop_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _refuse(self, refusal: Refusal) -> None:
        self._stop_head_timer()
        if not self.transport.is_closing():
            self.transport.write(refusal.response(self._head_path()))
            self.transport.close()

    def _head_path(self) -> bytes:
        """The path of the head being read, as far as it came: uvicorn keeps the previous
        request's until the next one begins, so none until this head sent a byte."""
        return bytes(getattr(self, "url", None) or b"") if self._head_bytes else b""


def protocol_with(limits: TransportLimits) -> type[GuardedHttpProtocol]:
    """The protocol class uvicorn instantiates per connection, carrying `limits`."""
    if limits == DEFAULT_LIMITS:
        return GuardedHttpProtocol
    return type("GuardedHttpProtocol", (GuardedHttpProtocol,), {"limits": limits})


def uvicorn_config(
    app: FastAPI, host: str, port: int, limits: TransportLimits = DEFAULT_LIMITS
) -> uvicorn.Config:
    """How every worthit server runs uvicorn: the CLI's (`worthit serve`, `worthit engine
    serve`) and the tests' live server."""
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=protocol_with(limits),
        log_level="warning",
        access_log=False,
    )
