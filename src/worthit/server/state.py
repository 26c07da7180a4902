"""The service's state as one typed object, reached by handlers through a dependency.

`create_app` builds it; the lifespan fills in what exists only once the app runs (the
engine, loaded then, and the answer flow over it). Handlers declare `state: StateDep`
instead of reading untyped `app.state` attributes; `/v1/decide`, which reads its body
itself (server/json_body.py), calls `state_of` instead of solving a dependency.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from worthit.answer.answerer import Answerer
from worthit.answer.background import ExplanationGenerator
from worthit.audit import AuditLog
from worthit.engine.engine import Engine
from worthit.engine.remote.router import Router
from worthit.market.store import MarketStore
from worthit.server.event_service import EventService
from worthit.server.ratelimit import Limiter
from worthit.server.settings import ServiceSettings
from worthit.server.shared_state import SharedState
from worthit.server.tenants import TenantStore


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


def state_of(request: Request) -> ServiceState:
    """The state, for a handler on the answer path that reads it without a dependency."""
    state = request.app.state.service
    assert isinstance(state, ServiceState)
    return state


async def service_state(request: Request) -> ServiceState:
    """Async, so FastAPI resolves it on the loop: a sync dependency costs every request a
    trip through the thread pool."""
    return state_of(request)


StateDep = Annotated[ServiceState, Depends(service_state)]
