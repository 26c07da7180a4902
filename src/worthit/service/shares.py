"""Each tenant's share of the server's connections: its requests in flight and its event
streams.

The transport caps connections per process (service/transport.py), first come first
served, so without shares one key could hold them all: 1,024 `GET /v1/watches/events`
streams, kept open by their keep-alive comments, left every other tenant and the open
`/healthz` at 503. So each authenticated tenant may have at most `connections` requests
in flight (a request in flight holds a connection), of which at most `streams` long-lived
event streams; the guard (http/request_guard.py) answers one more 429 with `Retry-After` and
closes the connection, so a refused client cannot keep it idle either. Streams end after
`stream_life_s` (http/watches_api.py), so a share held by streams comes free and the
client reconnects with `Last-Event-ID`, losing nothing. Requests without a tenant (the
keyless demo, the open routes) are not counted: the transport's reserve keeps room for
the open routes.

The counts are this process's: each worker of `worthit serve --workers` keeps its own.
"""

from __future__ import annotations

import collections
import math
import time
from dataclasses import dataclass

from worthit.service.settings import ServiceSettings


@dataclass(frozen=True, slots=True)
class ShareLimits:
    connections: int
    """Requests one tenant may have in flight at once (its event streams included)."""
    streams: int
    """Event streams one tenant may hold open at once."""
    stream_life_s: float
    """An event stream ends after this long; its client reconnects with Last-Event-ID."""

    def __post_init__(self) -> None:
        if self.connections < 1 or self.streams < 1 or self.stream_life_s <= 0:
            raise ValueError("share limits must be positive")

    @classmethod
    def of(cls, settings: ServiceSettings) -> ShareLimits:
        return cls(settings.tenant_connections, settings.tenant_streams, settings.stream_life_s)


@dataclass(frozen=True, slots=True)
class ShareRefusal:
    """Why a tenant's request was refused, and when to try again (whole seconds)."""

    detail: str
    retry_after_s: int


class ConnectionShares:
    """What each tenant holds now: requests in flight, and when each of its streams
    opened (which says when the first of them ends, for Retry-After)."""

    def __init__(self, limits: ShareLimits) -> None:
        self.limits = limits
        self._requests: collections.Counter[str] = collections.Counter()
        self._streams: dict[str, list[float]] = {}

    def held(self, tenant: str) -> tuple[int, int]:
        """(requests in flight, streams open) of `tenant`."""
        return self._requests[tenant], len(self._streams.get(tenant, ()))

    def enter(self, tenant: str, stream_at: float | None) -> ShareRefusal | None:
        """Count one more request (a stream opened at `stream_at`, time.monotonic()), or
        say why not: it is over the tenant's share."""
        requests, streams = self.held(tenant)
        if stream_at is not None and streams >= self.limits.streams:
            first_end = min(self._streams[tenant]) + self.limits.stream_life_s
            return _over(tenant, f"{self.limits.streams} open event streams",
                         first_end - time.monotonic())  # fmt: skip
        if requests >= self.limits.connections:
            return _over(tenant, f"{self.limits.connections} requests in flight", 1.0)
        self._requests[tenant] += 1
        if stream_at is not None:
            self._streams.setdefault(tenant, []).append(stream_at)
        return None

    def leave(self, tenant: str, stream_at: float | None) -> None:
        self._requests[tenant] -= 1
        if self._requests[tenant] <= 0:
            del self._requests[tenant]
        if stream_at is not None:
            opened = self._streams[tenant]
            opened.remove(stream_at)
            if not opened:
                del self._streams[tenant]


def _over(tenant: str, what: str, wait_s: float) -> ShareRefusal:
    return ShareRefusal(f"tenant {tenant!r} already holds {what}", max(1, math.ceil(wait_s)))
