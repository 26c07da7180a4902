"""The composition root: every part of the market's service built once, in order, from
the settings, each handed what it needs when it is made; nothing is patched afterwards.

`open_service` builds them on the running loop (the bus, the feeds and the idle-time tasks
start there) and closes them in the reverse order; handlers read the parts from the
`Service` it yields. `build_answerer` is its answer-flow stage, which the CLI's `ask` and
`explain` run on their own, without a bus.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import time
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ProcessPoolExecutor
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from worthit.answer.answerer import Answerer
from worthit.answer.background import ExplanationGenerator
from worthit.answer.facts_refresh import refresh_facts
from worthit.answer.metrics import AnswerMetrics
from worthit.audit import AuditLog, AuditPaths
from worthit.decide.calibration import Calibration
from worthit.decide.decider import Decider
from worthit.decide.forecast_advice import ForecastSnapshot
from worthit.engine.backend import EngineBackend
from worthit.explain.store import ExplanationStore, SqliteExplanationStore
from worthit.explain.store_key import model_identity
from worthit.facts.builder import DEFAULT_STALE_PRICE_DAYS
from worthit.facts.cache import FactsCache, SheetTier
from worthit.market.store import MarketStore
from worthit.service.settings import ServiceSettings
from worthit.service.shared_state import SharedState
from worthit.text.time import Clock, now_ms
from worthit.watches.deliver import WatchService

if TYPE_CHECKING:  # feeds, Redis Streams, the live feed: a server's, not `ask`'s, imports
    from worthit.decide.forecast_refit import StoreForecasts
    from worthit.service.event_service import EventService

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Service:
    """The market's parts of a running service, as `open_service` built them."""

    store: MarketStore
    explanations: ExplanationStore
    calibration: Calibration
    audit: AuditLog | None
    """The log every answer is appended to (None: off in the settings)."""
    decider: Decider
    answerer: Answerer
    events: EventService
    """The event bus and what feeds it: the live simulator, Redis, feeds, webhooks."""
    generator: ExplanationGenerator | None
    """Writes explanations in the engine's idle time (None: off in the settings)."""
    forecasts: StoreForecasts | None = None
    """The store's forecaster, refitted in the background (None: off in the settings)."""

    @property
    def facts(self) -> FactsCache:
        return self.decider.facts

    @property
    def metrics(self) -> AnswerMetrics:
        return self.answerer.metrics

    @property
    def watches(self) -> WatchService | None:
        return self.events.watches


def build_answerer(
    store: MarketStore,
    engine: EngineBackend | None,
    *,
    clock: Clock = now_ms,
    explanations: ExplanationStore | None = None,
    model: str | None = None,
    audit: AuditLog | None = None,
    calibration: Calibration | None = None,
    live: bool = False,
    tier: SheetTier | None = None,
    stale_price_days: float = DEFAULT_STALE_PRICE_DAYS,
    forecasts: Callable[[], ForecastSnapshot | None] | None = None,
) -> Answerer:
    """The answer flow over `store`: its decider (fact cache, resolver, calibration, the
    store's latest forecasts), then the answerer handed it."""
    decider = Decider.for_store(
        store,
        clock,
        calibration=calibration,
        live=live,
        tier=tier,
        stale_price_days=stale_price_days,
        forecasts=forecasts,
    )
    return Answerer(decider, engine, explanations=explanations, model=model, audit=audit)


@asynccontextmanager
async def open_service(
    settings: ServiceSettings,
    store: MarketStore,
    engine: EngineBackend,
    shared: SharedState,
    *,
    remote: bool,
) -> AsyncIterator[Service]:
    """Build the market's parts over a started `engine` (`remote`: replicas, whose model id
    comes from their /v1/models), start what runs beside the answers, and stop and close
    it all, `shared` included, when the block ends."""
    assert settings.db_path is not None
    explanations = shared.explanation_store(
        SqliteExplanationStore(settings.db_path, settings.explanation_capacity, settings.clock),
        settings.explanation_capacity,
    )
    model = (
        model_identity(settings.model_path, settings.lora_path)
        if settings.model_path and not remote
        else None
    )
    audit = None
    if settings.audit:
        audit = await asyncio.to_thread(
            AuditLog,
            settings.audit_db or AuditPaths.beside(Path(settings.db_path)).db,
            policy=settings.audit_policy,
            origin=settings.audit_origin,
        )
    calibration = Calibration.open(settings.db_path)
    forecasts = None
    if settings.forecast_refit_s > 0:
        from worthit.decide.forecast_refit import StoreForecasts

        forecasts = StoreForecasts(
            store.path,
            # spawned: a forked child of a threaded server can inherit a held lock
            ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")),
            clock=settings.clock,
            every_s=settings.forecast_refit_s,
        )
    answerer = build_answerer(
        store,
        engine,
        clock=settings.clock,
        explanations=explanations,
        model=model,
        audit=audit,
        calibration=calibration,
        live=settings.freshness,
        tier=shared.fact_tier(),
        stale_price_days=settings.stale_price_days,
        forecasts=None if forecasts is None else forecasts.latest,
    )
    from worthit.service.event_service import start_events

    events = start_events(store, answerer, settings, fanout=shared.watch_fanout())
    shared.attach(answerer.facts, events.watches)
    shared.start()
    if settings.warm_s > 0:
        started = time.monotonic()
        built = await asyncio.to_thread(answerer.warm, settings.warm_s)
        log.info("%d fact sheets built in %.1f s", built, time.monotonic() - started)
    refresher = None
    if settings.refresh_share > 0:
        refresher = asyncio.create_task(refresh_facts(answerer, settings.refresh_share))
    refitter = None if forecasts is None else asyncio.create_task(forecasts.run())
    generator = None
    background: asyncio.Task[object] | None = None
    if settings.background:
        generator = ExplanationGenerator(answerer)
        background = asyncio.create_task(generator.run())
    try:
        yield Service(
            store,
            explanations,
            calibration,
            audit,
            answerer.decider,
            answerer,
            events,
            generator,
            forecasts,
        )
    finally:
        await events.stop()
        await shared.stop()
        for task in (background, refresher, refitter):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if forecasts is not None:
            forecasts.close()
        explanations.close()
        calibration.close()
        if audit is not None:
            await asyncio.to_thread(audit.close)
