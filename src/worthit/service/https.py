"""HTTPS: TLS 1.3 at least, HTTP/2 by ALPN (HTTP/1.1 for clients that lack it), on Hypercorn.

uvicorn speaks no HTTP/2, so `worthit serve --tls-cert … --tls-key …` runs Hypercorn
instead; plain HTTP stays on uvicorn. `HttpsServer` has the four members of
`uvicorn.Server` that `runtime.run` drives, so the engine keeps the main thread either way.
Hypercorn rather than Granian (bench/tls.py, docs/benchmarks.md): SSE over Hypercorn's h2
kept up with uvicorn's h1 here; Granian's was faster, but it can share a process with the
engine only through its embedded server, which it calls experimental, and its sockets live
in Rust, where nothing could cap connections. Hypercorn is asyncio, in our thread.

The transport limits map onto Hypercorn's settings, and one it lacks onto the listening
socket:

- ``header_timeout_s``: the TLS handshake must finish within it, and then Hypercorn's idle
  timer (``keep_alive_timeout``) closes a connection whose request head has not arrived
  within it of the connection's start or the previous response's end. It closes without
  a 408, and an idle keep-alive connection lives as long (uvicorn's: 5 s).
- ``max_header_bytes``: a head past it gets 431 from `HeadCap` in front of the app,
  counted as the uvicorn path counts. Hypercorn's own caps bound the memory before it:
  h11 buffers at most this much of an incomplete head (one read, 64 KiB, may land past
  it), and h2 decodes at most 64 KiB of header list (hpack adds 32 bytes a field): a
  header block past that ends the connection.
- ``max_connections``: Hypercorn has no such limit, so `CappedListener` counts the
  connections it accepted that are still open and closes one more at once, before its
  handshake (no HTTP has been spoken yet, so no 503). An HTTP/2 connection carries up to
  100 concurrent streams. The count is the process's: with `--workers N` each worker caps
  its own, as uvicorn's ``limit_concurrency`` does.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal, cast

from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization
from fastapi import FastAPI
from hypercorn.asyncio.run import worker_serve
from hypercorn.config import Config, Sockets
from hypercorn.typing import (
    ASGIFramework,
    ASGIReceiveCallable,
    ASGISendCallable,
    HTTPScope,
    Scope,
)
from hypercorn.utils import wrap_app

from worthit.service.transport import DEFAULT_LIMITS, TransportLimits

logger = logging.getLogger(__name__)

ALPN = ("h2", "http/1.1")
BACKLOG = 2048
"""As uvicorn's."""
UNLIMITED = 2**62
"""Requests on one connection, as uvicorn's: Hypercorn's default (1,000) sends HTTP/2's
GOAWAY after that many, and httpx fails the streams it had in flight then."""


@dataclass(frozen=True, slots=True)
class TlsFiles:
    cert: Path
    """PEM: the server's certificate, then any intermediates."""
    key: Path
    """PEM, unencrypted: the certificate's private key."""


class TlsFileError(ValueError):
    """A certificate or key the server could not use; `which` says which of the two."""

    def __init__(self, which: Literal["cert", "key"], message: str) -> None:
        super().__init__(message)
        self.which = which


def _read(path: Path, which: Literal["cert", "key"]) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise TlsFileError(which, f"cannot read {path}: {exc.strerror or exc}") from None


def check_tls_files(tls: TlsFiles) -> ssl.SSLContext:
    """The server's TLS context, or a TlsFileError naming the file at fault: checked
    before the model loads, so a typo costs no wait. ssl's own errors ("PEM lib") name
    neither file, hence the reading with `cryptography` first."""
    cert_pem, key_pem = _read(tls.cert, "cert"), _read(tls.key, "key")
    try:
        cert = x509.load_pem_x509_certificates(cert_pem)[0]
    except ValueError:
        raise TlsFileError("cert", f"{tls.cert} holds no PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise TlsFileError(
            "key", f"{tls.key} holds no unencrypted PEM private key that worthit can use"
        ) from None
    spki = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*spki) != cert.public_key().public_bytes(*spki):
        raise TlsFileError("key", f"{tls.key} is not the private key of {tls.cert}")
    try:
        return server_context(tls)
    except ssl.SSLError as exc:
        raise TlsFileError("cert", f"{tls.cert}: {exc.reason or exc}") from None


def server_context(tls: TlsFiles) -> ssl.SSLContext:
    """TLS 1.3 or nothing: its handshake takes one round trip, and it has no weak
    cipher suites to rule out. No compression (RFC 9113 §9.2.1 forbids it for h2)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    context.options |= ssl.OP_NO_COMPRESSION
    context.set_alpn_protocols(list(ALPN))
    context.load_cert_chain(tls.cert, tls.key)
    return context


class _HypercornConfig(Config):
    def __init__(self, tls: TlsFiles) -> None:
        self.tls = tls
        self.certfile, self.keyfile = str(tls.cert), str(tls.key)  # turns ssl_enabled on

    def create_ssl_context(self) -> ssl.SSLContext:
        return server_context(self.tls)


def hypercorn_config(tls: TlsFiles, limits: TransportLimits = DEFAULT_LIMITS) -> Config:
    config = _HypercornConfig(tls)
    config.alpn_protocols = list(ALPN)
    config.ssl_handshake_timeout = limits.header_timeout_s
    config.keep_alive_timeout = limits.header_timeout_s
    config.h11_max_incomplete_size = limits.max_header_bytes
    config.keep_alive_max_requests = UNLIMITED
    config.backlog = BACKLOG
    config.loglevel = "WARNING"
    config.accesslog = None
    return config


class HeadCap:
    """431 for a request whose head (target and headers) is larger than `limit`."""

    def __init__(self, app: ASGIFramework, limit: int) -> None:
        self.app, self.limit = app, limit

    async def __call__(
        self, scope: Scope, receive: ASGIReceiveCallable, send: ASGISendCallable
    ) -> None:
        if scope["type"] == "http" and _head_size(scope) > self.limit:
            body = b"the request head is too large"
            await send(
                {
                    "type": "http.response.start",
                    "status": 431,
                    "headers": [
                        (b"content-type", b"text/plain; charset=utf-8"),
                        (b"content-length", str(len(body)).encode()),
                        (b"connection", b"close"),
                    ],
                    "trailers": False,
                }
            )
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        await self.app(scope, receive, send)


def _head_size(scope: HTTPScope) -> int:
    target = len(scope["raw_path"]) + len(scope["query_string"]) + 1
    return target + sum(len(name) + len(value) + 4 for name, value in scope["headers"])


class _Connection(socket.socket):
    """An accepted socket that gives its place back to its listener once closed."""

    def __init__(self, listener: CappedListener, fd: int) -> None:
        super().__init__(listener.family, listener.type, listener.proto, fileno=fd)
        self._listener: CappedListener | None = listener

    def close(self) -> None:
        if self._listener is not None:
            self._listener.open_connections -= 1
            self._listener = None
        super().close()


class CappedListener(socket.socket):
    """A listening socket that keeps at most `cap` accepted connections open.

    asyncio's selector loop accepts through ``sock.accept()`` and closes through the
    accepted socket's ``close()``; both run on the loop's thread, so the count needs no
    lock. Past the cap the connection is closed and ConnectionAbortedError raised, which
    asyncio reads as "nothing more to accept this turn": a flood of connections cannot
    keep the loop in here."""

    def __init__(
        self, family: socket.AddressFamily, proto: int, cap: int, fileno: int | None = None
    ) -> None:
        super().__init__(family, socket.SOCK_STREAM, proto, fileno)
        self.cap = cap
        self.open_connections = 0

    def accept(self) -> tuple[socket.socket, Any]:
        fd, address = self._accept()  # type: ignore[attr-defined]
        if self.open_connections >= self.cap:
            socket.close(fd)
            raise ConnectionAbortedError("too many open connections")
        self.open_connections += 1
        return _Connection(self, fd), address


def listen(host: str, port: int, cap: int) -> CappedListener:
    """The proto must be IPPROTO_TCP, as getaddrinfo gives it: asyncio sets TCP_NODELAY
    only on sockets that say so, and without it Nagle's algorithm holds each SSE event
    back until the client's delayed ACK (~40 ms)."""
    family, _, proto, _, _ = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )[0]
    sock = CappedListener(family, proto, cap)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(BACKLOG)
    except OSError:
        sock.close()
        raise
    return sock


def adopt(sock: socket.socket, cap: int) -> CappedListener:
    """`sock`, bound and listening already (a `--workers` worker's, inherited from the
    parent), as a CappedListener that takes over its descriptor. IPPROTO_TCP whatever
    `sock` says (`socket.create_server` leaves it 0), for TCP_NODELAY (`listen`)."""
    return CappedListener(sock.family, socket.IPPROTO_TCP, cap, fileno=sock.detach())


def _quiet_tls_errors(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """Hypercorn lets a TLS error in closing a connection (a client still sending when the
    server refused it) reach the loop, which would log a traceback for each."""
    if isinstance(context.get("exception"), ssl.SSLError):
        logger.debug("TLS error on a connection: %s", context["exception"])
        return
    loop.default_exception_handler(context)


class HttpsServer:
    """Hypercorn serving `app` over TLS on its own event loop, in the thread that calls
    `run` (asyncio's selector loop: uvloop accepts without ``sock.accept()``, which the
    connection cap counts on).

    `sock`: a listening socket to serve on instead of binding `host`:`port` (a
    `--workers` worker's, which all the workers share); the server takes it over, and its
    connection cap counts this process's connections only."""

    def __init__(
        self,
        app: FastAPI,
        host: str,
        port: int,
        tls: TlsFiles,
        limits: TransportLimits = DEFAULT_LIMITS,
        sock: socket.socket | None = None,
    ) -> None:
        self.app, self.host, self.port, self.limits = app, host, port, limits
        self.sock = sock
        self.config = hypercorn_config(tls, limits)
        self.started = False
        """True once it listens (after the app's startup), as uvicorn.Server's."""
        self.should_exit = False
        """Set it (from any thread) to stop: open streams get Hypercorn's graceful 3 s."""

    def run(self) -> None:
        with asyncio.Runner(loop_factory=asyncio.SelectorEventLoop) as runner:
            runner.run(self.serve())

    async def serve(self) -> None:
        cap = self.limits.max_connections
        try:
            listener = (
                listen(self.host, self.port, cap) if self.sock is None else adopt(self.sock, cap)
            )
        except OSError as exc:
            logger.error("cannot listen on %s port %d: %s", self.host, self.port, exc)
            return
        asyncio.get_running_loop().set_exception_handler(_quiet_tls_errors)
        with listener:
            await worker_serve(
                wrap_app(
                    HeadCap(cast(ASGIFramework, self.app), self.limits.max_header_bytes),
                    self.config.wsgi_max_body_size,
                    "asgi",
                ),
                self.config,
                sockets=Sockets(secure_sockets=[listener], insecure_sockets=[], quic_sockets=[]),
                shutdown_trigger=self._exit_requested,
            )

    def handle_exit(self, signum: int, frame: FrameType | None) -> None:
        self.should_exit = True

    async def _exit_requested(self) -> None:
        self.started = True  # Hypercorn awaits this once every listener is serving
        while not self.should_exit:
            await asyncio.sleep(0.1)
