"""The service's state as one typed object, which handlers reach through a dependency
(http/dependencies.py).

`create_app` builds what the middleware needs before the app runs (the store, tenants,
limiter, what workers share); the lifespan adds the engine, loaded then, and the
market's parts over it, built at once by the composition root (service/build.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from worthit.engine.engine import Engine
from worthit.engine.remote.router import Router
from worthit.market.store import MarketStore
from worthit.service.build import Service
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
    shared: SharedState
    """What this process shares with the other workers through Redis (`--redis`)."""
    engine: Engine | None = None
    remote: Router | None = None
    """The engine replicas `worthit serve --engine URL` routes to (no local engine then)."""
    service: Service | None = None
    """The market's parts (None: the engine alone, or not started yet)."""

    def running_engine(self) -> Engine:
        if self.engine is None:
            raise NotStartedError("the engine is not loaded yet")
        return self.engine

    def market(self) -> Service:
        if self.service is None:
            raise NotStartedError("this service has no market")
        return self.service
