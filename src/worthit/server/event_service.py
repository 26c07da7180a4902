"""The service's event bus, and the live simulator feeding it, for one app's lifetime.

The lifespan starts them: the bus's consumer applies events in batches, and its
after-commit notice reaches the answer flow (fact sheets evicted, explanations queued for
regeneration); with `live_rate` the live simulator runs inside the process, so the demo's
prices move while it serves.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from worthit.answer.answerer import Answerer
from worthit.market.bus import EventBus
from worthit.market.live import LiveMarket, run_live
from worthit.market.store import MarketStore
from worthit.server.settings import ServiceSettings

log = logging.getLogger(__name__)


class EventService:
    """The bus and, when asked, the live simulator feeding it, for one app's lifetime."""

    def __init__(self, bus: EventBus, feed: asyncio.Task[int] | None) -> None:
        self.bus = bus
        self.feed = feed

    async def stop(self) -> None:
        if self.feed is not None:
            self.feed.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.feed
        await self.bus.stop()


def start_events(store: MarketStore, answerer: Answerer, settings: ServiceSettings) -> EventService:
    """Start the bus (on the running loop) and the live simulator when the settings ask
    for it; the simulator stamps its events with `settings.clock`."""
    answerer.facts.live = settings.freshness
    bus = EventBus(store)
    bus.subscribe(answerer.facts_changed)
    bus.start()
    feed = None
    if settings.live_rate > 0:
        market = LiveMarket(store, seed=settings.live_seed, clock=settings.clock)
        feed = asyncio.get_running_loop().create_task(
            run_live(market, bus.publish, settings.live_rate)
        )
        feed.add_done_callback(_log_failure)
    return EventService(bus, feed)


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the live simulator stopped", exc_info=task.exception())
