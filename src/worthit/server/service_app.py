"""The whole service: the engine's OpenAI-compatible API plus the shopper-facing API,
the web page, auth and rate limits, on one app.

`create_app` (server/app.py) brings the engine and `/v1/chat/completions`; this module
adds what shoppers and retailers use on top of it, sharing that one engine.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from worthit.answer.warm import warm_best_sellers
from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.sequence import Priority
from worthit.market.store import MarketStore
from worthit.server.app import create_app, openai_validation_error
from worthit.server.decide_api import router as decide_router
from worthit.server.problems import ProblemError, handle_problem, problem_response
from worthit.server.products_api import router as products_router
from worthit.server.ratelimit import Limits, TenantLimiter
from worthit.server.services import Services
from worthit.server.tenants import AuthError, TenantStore
from worthit.server.timing import ServerTimingMiddleware
from worthit.server.worthit_chat import MODEL_ID, worthit_chat

STATIC = files("worthit.server") / "static"
MAX_BODY_BYTES = 64 * 1024
log = logging.getLogger(__name__)

OPEN_PATHS = ("/healthz", "/readyz", "/metrics", "/static/", "/docs", "/openapi.json")
LLM_TOKENS_PER_REQUEST = 64
"""Tokens reserved from a tenant's LLM budget per request, refunded when fewer are used."""


@dataclass(frozen=True)
class ServiceSettings:
    db_path: Path
    model_path: Path | None = None
    engine_config: EngineConfig | None = None
    auth: bool = True
    default_deadline_ms: int = 800
    warm_best_sellers: int = 0
    """Explanation prompts of this many best sellers go into the prefix cache at start."""


def create_service_app(settings: ServiceSettings, *, engine: Engine | None = None) -> FastAPI:
    app = create_app(settings.engine_config, settings.model_path, engine=engine)
    services = Services.over(MarketStore(settings.db_path))
    services.default_deadline_ms = settings.default_deadline_ms
    app.state.services = services
    app.state.tenants = TenantStore(settings.db_path) if settings.auth else None
    app.state.limiter = TenantLimiter()
    app.state.model_routes[MODEL_ID] = worthit_chat
    if settings.warm_best_sellers:
        app.state.on_engine_ready.append(
            lambda app: _warm(app, services, settings.warm_best_sellers)
        )
    app.include_router(decide_router)
    app.include_router(products_router)
    app.add_exception_handler(ProblemError, handle_problem)
    app.add_exception_handler(RequestValidationError, _invalid_request)
    app.mount("/static", StaticFiles(directory=str(STATIC)), name="static")

    @app.get("/", include_in_schema=False)
    async def index() -> FileResponse:
        return FileResponse(str(STATIC / "index.html"), media_type="text/html")

    @app.get("/readyz", tags=["health"])
    async def readyz(request: Request) -> JSONResponse:
        """Ready when the model is loaded and the store answers; says what is degraded."""
        degraded = []
        if getattr(request.app.state, "engine", None) is None:
            degraded.append("model not loaded: explanations fall back to template text")
        try:
            products = services.store.count_products()
        except Exception as exc:  # readiness must report, not raise
            degraded.append(f"store unavailable: {exc}")
            products = 0
        if products == 0:
            degraded.append("store has no products")
        ready = not degraded
        return JSONResponse(
            {"ready": ready, "products": products, "degraded": degraded},
            status_code=200 if ready else 503,
        )

    app.add_middleware(GuardMiddleware)
    app.add_middleware(ServerTimingMiddleware)
    return app


def _warm(app: FastAPI, services: Services, n: int) -> None:
    engine: Engine | None = getattr(app.state, "engine", None)
    if engine is None:
        return
    try:
        queued = warm_best_sellers(engine, services.decider, services.store, n)
    except Exception:  # a cold cache is slower, not broken: serve anyway
        log.exception("could not warm the prefix cache")
        return
    log.info("warming the prefix cache for %d best sellers", len(queued))


class GuardMiddleware:
    """Body size, then the API key and the tenant's limits, before any handler runs.

    Pure ASGI, so a streamed answer passes through untouched (BaseHTTPMiddleware would
    copy every SSE chunk through an extra task and stream).
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        refusal = self._refusal(request)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _refusal(request: Request) -> Response | None:
        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > MAX_BODY_BYTES:
            return problem_response(
                413,
                "Body too large",
                f"request bodies are limited to {MAX_BODY_BYTES} bytes",
                "body",
            )
        path = request.url.path
        tenants: TenantStore | None = request.app.state.tenants
        if tenants is None or path == "/" or path.startswith(OPEN_PATHS):
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
            tenant = tenants.authenticate(key)
        except AuthError as exc:
            title = "Unauthorized" if exc.status == 401 else "Forbidden"
            return problem_response(exc.status, title, str(exc), "authorization")
        limiter: TenantLimiter = request.app.state.limiter
        admission = limiter.admit(
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
        request.state.priority = Priority[tenant.priority.name]
        return None


async def _invalid_request(request: Request, exc: Exception) -> JSONResponse:
    """OpenAI's error shape on the OpenAI-compatible routes, problem details elsewhere."""
    assert isinstance(exc, RequestValidationError)
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
