"""Liveness, readiness and metrics: what an orchestrator and a dashboard poll."""

from __future__ import annotations

import os
from dataclasses import asdict
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from worthit.audit import AuditLog
from worthit.facts.cache import FactsCache
from worthit.http.dependencies import StateDep
from worthit.service.build import Service

router = APIRouter(tags=["health"])


@router.get("/healthz")
async def healthz(state: StateDep) -> dict[str, Any]:
    if state.remote is not None:
        remote = state.remote.status()
        return {
            "status": "ok",
            "model": remote.model_id,
            "running": remote.running,
            "engines": [asdict(r) for r in remote.replicas],
        }
    status = state.running_engine().status()
    return {
        "status": "ok",
        "model": status.model_id,
        "running": status.running,
        "waiting": status.waiting,
        "background_running": status.background_running,
        "background_waiting": status.background_waiting,
        "kv_usage": round(status.kv_usage, 4),
    }


@router.get("/readyz")
async def readyz(state: StateDep) -> JSONResponse:
    """Ready when the model is loaded and the store answers; says what is degraded.

    An event input that is down (Redis unreachable) is degraded but still ready: the
    service answers from the store, and taking every replica out of rotation because
    the feed stopped would turn data growing old into an outage. So are remote engines
    that are all ejected: every answer still goes out, its text the template's."""
    degraded = []
    if state.remote is None and state.engine is None:
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
    if state.remote is not None and not state.remote.status().healthy:  # ready all the same
        degraded.append("no engine replica is healthy: explanations are template text")
    service = state.service
    if service is not None:
        degraded += service.events.problems()
    degraded += state.shared.problems()
    body: dict[str, Any] = {"ready": ready, "products": products, "degraded": degraded}
    if state.settings.worker is not None:
        body["worker"] = {"index": state.settings.worker, "pid": os.getpid()}
    if service is not None:
        body["facts"] = _facts(service.facts)
        body["explanations"] = _explanations(service)
        body["events"] = service.events.status()
    if state.remote is not None:
        body["engines"] = [asdict(r) for r in state.remote.status().replicas]
    if state.shared.shared:
        body["shared"] = state.shared.status()
    if service is not None and service.audit is not None:
        body["audit"] = _audit(service.audit)
    return JSONResponse(body, status_code=200 if ready else 503)


def _explanations(service: Service) -> dict[str, Any]:
    """How full the explanation store is: a cold store is slower text, not a fault."""
    info: dict[str, Any] = {"stored": len(service.explanations)}
    generator = service.generator
    if generator is not None:
        stats = generator.stats
        info |= {
            "generating": True,
            "demand_covered": round(stats.coverage, 4),
            "pairs_covered": stats.covered_pairs,
            "pairs": stats.pairs,
            "written": stats.kept,
            "failed": stats.failed,
            "passes": stats.passes,
        }
    else:
        info["generating"] = False
    return info


def _facts(cache: FactsCache) -> dict[str, Any]:
    """The fact cache: its sheets, how many start-up built (`--warm-s`) and idle time
    rebuilt (`--refresh-share`), and its reads."""
    return {
        "cached": len(cache),
        "warmed": cache.warmed,
        "refreshed": cache.refreshed,
        "refresh_pending": cache.refresh_pending,
        "hits": cache.hits,
        "misses": cache.misses,
        "early_refreshes": cache.early_refreshes,
    }


def _audit(log: AuditLog) -> dict[str, Any]:
    """How big the log is, and what the last start found lost: a crash's toll, in receipts
    handed out whose leaves never reached the disk (tombstones now hold their places)."""
    start = log.last_start
    checkpoint = log.latest_stored_checkpoint()
    return {
        "leaves": log.size,
        "checkpoint_size": None if checkpoint is None else checkpoint.size,
        "lost_at_last_start": start.lost,
        "lost_exact": start.exact,
    }


@router.get("/metrics")
async def metrics(state: StateDep) -> Response:
    engine = state.remote if state.remote is not None else state.running_engine()
    text = generate_latest(engine.metrics.registry)
    if state.service is not None:
        text += generate_latest(state.service.metrics.registry)
    return Response(text, media_type=CONTENT_TYPE_LATEST)
