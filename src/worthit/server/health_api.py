"""Liveness, readiness and metrics: what an orchestrator and a dashboard poll."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from worthit.server.state import StateDep

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(state: StateDep) -> dict[str, Any]:
    status = state.running_engine().status()
    return {
        "status": "ok",
        "model": status.model_id,
        "running": status.running,
        "waiting": status.waiting,
        "kv_usage": round(status.kv_usage, 4),
    }


@router.get("/readyz")
async def readyz(state: StateDep) -> JSONResponse:
    """Ready when the model is loaded and the store answers; says what is degraded."""
    degraded = []
    if state.engine is None:
        degraded.append("model not loaded: explanations fall back to template text")
    products = 0
    if state.store is not None:
        try:
            products = state.store.count_products()
        except Exception as exc:  # readiness must report, not raise
            degraded.append(f"store unavailable: {exc}")
        if products == 0:
            degraded.append("store has no products")
    ready = not degraded
    return JSONResponse(
        {"ready": ready, "products": products, "degraded": degraded},
        status_code=200 if ready else 503,
    )


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    engine = state.running_engine()
    return Response(generate_latest(engine.metrics.registry), media_type=CONTENT_TYPE_LATEST)
