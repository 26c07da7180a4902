"""`create_app`: the whole service, assembled from explicit parts.

Routes, middleware, exception handlers and the lifespan are all given to the
constructor; the state handlers share is one typed `ServiceState` (service/state.py),
and the market's parts in it are built by the composition root (service/build.py) when
the app starts. With a market (`settings.db_path`) the app serves the shopper's API,
the page and the `worthit` chat model beside the engine's OpenAI-compatible API; without
one, only the latter.
"""

from __future__ import annotations

import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.routing import BaseRoute

from worthit.engine.backend import EngineBackend
from worthit.engine.engine import Engine
from worthit.engine.remote.router import Router
from worthit.http import (
    audit_api,
    decide_api,
    events_api,
    feedback_api,
    health_api,
    page,
    products_api,
    watches_api,
    webhooks_api,
)
from worthit.http.headers import SecurityHeadersMiddleware
from worthit.http.json_body import not_json
from worthit.http.openai import chat_api
from worthit.http.openai.wire import openai_validation_error
from worthit.http.problems import (
    ProblemError,
    error_for,
    handle_http_error,
    handle_problem,
    problem_response,
)
from worthit.http.request_guard import (
    ALWAYS_OPEN,
    LOOPBACK_HOSTS,
    OPERATIONS_PATHS,
    GuardMiddleware,
)
from worthit.http.timing import ServerTimingMiddleware
from worthit.market.store import MarketStore
from worthit.service.build import open_service
from worthit.service.settings import ServiceSettings
from worthit.service.shared_state import SharedState
from worthit.service.shares import ConnectionShares, ShareLimits
from worthit.service.state import ServiceState
from worthit.service.tenants import TenantStore

log = logging.getLogger(__name__)

GC_THRESHOLDS = (20_000, 50, 100)
"""The collector's thresholds once the app runs (Python's: 700, 10, 10). At those, a
worker under load ran a full collection every few seconds, 11–60 ms each and finding
nothing (a gc-callback probe, 160 bursts of 50 questions); at these it ran none, and a
young collection scans at most 20,000 objects."""


def create_app(
    settings: ServiceSettings, *, engine: Engine | None = None, remote: Router | None = None
) -> FastAPI:
    """The service. It loads `settings.model_path` at start-up and closes that engine at
    shutdown; or pass `engine` to serve one you built (the CLI claims it for the main
    thread, tests pass a fake runner): the app starts it but leaves closing it to you.
    Or pass `remote`, engine replicas over HTTP: the app starts and closes the router."""
    if engine is None and remote is None and settings.model_path is None:
        raise ValueError("give settings.model_path, an engine or remote engines")
    store = MarketStore(settings.db_path) if settings.db_path is not None else None
    tenants = TenantStore(settings.db_path) if settings.auth and settings.db_path else None
    shared = SharedState(settings)
    state = ServiceState(settings, store, tenants, shared.limiter, shared)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        backend: EngineBackend
        if remote is not None:
            await remote.start()
            state.remote = backend = remote
        elif engine is None:
            assert settings.model_path is not None
            state.engine = backend = Engine.from_gguf(
                settings.model_path, settings.engine_config, settings.lora_path
            )
        else:
            engine.start()
            state.engine = backend = engine
        market = (
            open_service(settings, store, backend, shared, remote=remote is not None)
            if store is not None
            else contextlib.nullcontext()
        )
        async with market as service:
            state.service = service
            gc.freeze()  # what start-up built lives as long as the app: no collection scans it
            thresholds = gc.get_threshold()
            gc.set_threshold(*GC_THRESHOLDS)
            try:
                yield
            finally:
                gc.set_threshold(*thresholds)
        if service is None:
            await shared.stop()
        if remote is not None:
            await remote.aclose()
        elif engine is None and state.engine is not None:
            state.engine.close()

    open_paths = (
        ALWAYS_OPEN
        + audit_api.PUBLIC_PATHS
        + (OPERATIONS_PATHS if settings.open_operations else ())
    )
    app = FastAPI(
        title="worthit",
        routes=_routes(with_market=store is not None),
        middleware=[
            Middleware(SecurityHeadersMiddleware),
            Middleware(ServerTimingMiddleware),
            Middleware(
                GuardMiddleware,
                tenants=tenants,
                limiter=state.limiter,
                open_paths=open_paths,
                allowed_hosts=None if settings.auth else LOOPBACK_HOSTS,
                shares=ConnectionShares(ShareLimits.of(settings)),
            ),
        ],
        exception_handlers={
            ProblemError: handle_problem,
            RequestValidationError: _invalid_request,
            HTTPException: handle_http_error,
        },
        lifespan=lifespan,
    )
    app.state.service = state
    return app


def _routes(with_market: bool) -> list[BaseRoute]:
    """The shopper's question first: a request is matched against the routes in order."""
    engine_api = [*chat_api.router.routes, *health_api.router.routes]
    if not with_market:
        return engine_api
    return [
        *decide_api.router.routes,
        *engine_api,
        *audit_api.router.routes,
        *events_api.router.routes,
        *feedback_api.router.routes,
        *webhooks_api.router.routes,
        *watches_api.router.routes,
        *products_api.router.routes,
        *page.router.routes,
        page.static_mount(),
    ]


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """OpenAI's error shape on the OpenAI-compatible routes, problem details elsewhere."""
    assert isinstance(exc, RequestValidationError)
    wrong_type = not_json(exc, request.headers.get("content-type"))
    if wrong_type is not None:
        return error_for(
            request.url.path,
            ProblemError(415, "Unsupported Media Type", wrong_type, "content-type"),
        )
    if request.url.path.startswith("/v1/chat/"):
        return openai_validation_error(exc)
    errors = [
        {
            "field": ".".join(str(part) for part in error.get("loc", ())),
            "message": str(error.get("msg", "invalid value")),
        }
        for error in exc.errors()
    ]
    first_error = errors[0] if errors else {"field": "body", "message": "invalid request"}
    return problem_response(
        422,
        "Invalid request",
        f"{first_error['field']}: {first_error['message']}",
        first_error["field"],
        errors=errors,
    )
