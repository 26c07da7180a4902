"""The service's state as one typed object, which handlers reach through a dependency
(http/dependencies.py).

`create_app` builds it; the lifespan fills in what exists only once the app runs (the
engine, loaded then, and the answer flow over it).
"""

from __future__ import annotations

from dataclasses import dataclass

from worthit.answer.answerer import Answerer
from worthit.answer.background import ExplanationGenerator
from worthit.audit import AuditLog
from worthit.engine.engine import Engine
from worthit.engine.remote.router import Router
from worthit.market.store import MarketStore
from worthit.service.event_service import EventService
from worthit.service.ratelimit import Limiter
from worthit.service.settings import ServiceSettings
from worthit.service.shared_state import SharedState
from worthit.service.tenants import TenantStore


class NotStartedError(RuntimeError):
    """A handler ran before the lifespan loaded the engine (a bug, not a client error)."""


@dataclass
class ServiceState:
    settings: ServiceSettings
    store: MarketStore | None
    """None when the service is the engine alone."""
    tenants: TenantStore | None
    """None when auth is off (the demo)."""
    limiter: Limiter
    engine: Engine | None = None
    answerer: Answerer | None = None
    generator: ExplanationGenerator | None = None
    """Writes explanations in the engine's idle time (None: off, or no market)."""
    audit: AuditLog | None = None
    """The log every answer is appended to (None: no market, or off in the settings)."""
    events: EventService | None = None
    """The event bus and the live simulator feeding it (None: no market)."""
    shared: SharedState | None = None
    """What this process shares with the other workers through Redis (`--redis`)."""
    remote: Router | None = None
    """The engine replicas `worthit serve --engine URL` routes to (no local engine then)."""

    def running_engine(self) -> Engine:
        if self.engine is None:
            raise NotStartedError("the engine is not loaded yet")
        return self.engine

    def market(self) -> tuple[MarketStore, Answerer]:
        if self.store is None or self.answerer is None:
            raise NotStartedError("this service has no market")
        return self.store, self.answerer
