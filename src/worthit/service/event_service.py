"""The service's event inputs, for one app's lifetime: the bus and what feeds it.

The lifespan starts them: the bus's consumer applies events in batches, and its
after-commit notice reaches the answer flow (fact sheets evicted, explanations queued for
regeneration); with `ticker_rate` the demo ticker (demo/ticker.py) runs inside the
process, so the demo's prices move while it serves; with `redis_url` a consumer of the
Redis stream feeds the same bus, acknowledging each entry after its commit; each of
`feeds` is polled into it (conditional GETs, market/ingest/feed.py). The webhook sources
(their secrets and the delivery ids taken) are opened here too, for POST
/v1/webhooks/{source}, and the price watches, evaluated after each commit
(watches/deliver.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any

from worthit.answer.answerer import Answerer
from worthit.demo.ticker import MarketTicker, run_ticker
from worthit.market.bus import EventBus
from worthit.market.ingest.feed import FeedPoller
from worthit.market.ingest.redis_stream import StreamConfig, StreamConsumer
from worthit.market.ingest.webhook_sources import SourceStore
from worthit.market.store import MarketStore
from worthit.service.settings import ServiceSettings
from worthit.watches.deliver import RetryPolicy, WatchService
from worthit.watches.store import WatchStore

log = logging.getLogger(__name__)


class EventService:
    """The bus and, when asked, the demo ticker, the Redis consumer and the feed pollers
    feeding it."""

    def __init__(
        self,
        bus: EventBus,
        ticker: asyncio.Task[int] | None,
        stream: StreamConsumer | None = None,
        sources: SourceStore | None = None,
        watches: WatchService | None = None,
        feeds: Sequence[FeedPoller] = (),
    ) -> None:
        self.bus = bus
        self.ticker = ticker
        self.stream = stream
        self.sources = sources
        self.watches = watches
        self.feeds = tuple(feeds)

    async def stop(self) -> None:
        """Inputs first, then the bus: the Redis consumer's batch in hand is applied and
        acknowledged before the bus stops taking events."""
        if self.ticker is not None:
            self.ticker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.ticker
        if self.stream is not None:
            await self.stream.stop()
        for poller in self.feeds:
            await poller.stop()
        await self.bus.stop()
        if self.watches is not None:
            await self.watches.stop()
        if self.sources is not None:
            self.sources.close()

    def status(self) -> dict[str, Any]:
        """The `events` entry of /readyz."""
        stats = self.bus.stats
        return {
            "bus": {"pending": self.bus.pending, **vars(stats)},
            "live_feed": self.ticker is not None and not self.ticker.done(),
            "redis": self.stream.status() if self.stream is not None else None,
            "feeds": [poller.status() for poller in self.feeds],
        }

    def problems(self) -> list[str]:
        """What is degraded: answers go on from the store, but its data may be getting old."""
        found = [
            f"events: the feed {poller.config.where} is {poller.state.value}: "
            f"{poller.last_error}; answering from the store"
            for poller in self.feeds
            if not poller.healthy
        ]
        stream = self.stream
        if stream is None or stream.connected:
            return found
        cause = f": {stream.last_error}" if stream.last_error else ""
        return [
            f"events: the Redis stream {stream.config.stream} at {stream.config.where} is "
            f"{stream.state.value}{cause}; answering from the store",
            *found,
        ]


def start_events(
    store: MarketStore,
    answerer: Answerer,
    settings: ServiceSettings,
    *,
    fanout: Callable[[str, dict[str, Any]], None] | None = None,
) -> EventService:
    """Start the bus (on the running loop), the demo ticker, the Redis consumer and the
    feed pollers when the settings ask for them; the ticker stamps its events with
    `settings.clock`, and the bus takes an event's arrival by it (when a promotion that
    does not say so was announced), so the facts' "now" and the arrivals agree.
    `fanout` also hands fired watches to the other workers."""
    bus = EventBus(store, clock=settings.clock)
    bus.subscribe(answerer.facts_changed)
    bus.subscribe(answerer.facts_restated, restated_only=True)
    watches = WatchService(
        WatchStore(store.path),
        answerer.decider,
        RetryPolicy(settings.watch_attempts, settings.watch_retry_s),
        allow_private=settings.watch_hooks_private or not settings.auth,
        poll_s=settings.watch_poll_s,
        fanout=fanout,
    )
    bus.subscribe(watches.evaluator.changed)
    if settings.deliver_watches:
        watches.start()
    bus.start()
    ticker = None
    if settings.ticker_rate > 0:
        market = MarketTicker(store, seed=settings.ticker_seed, clock=settings.clock)
        ticker = asyncio.get_running_loop().create_task(
            run_ticker(market, bus.publish, settings.ticker_rate)
        )
        ticker.add_done_callback(_log_failure)
    stream = None
    if settings.redis_url is not None:
        config = StreamConfig(
            url=settings.redis_url,
            stream=settings.redis_stream,
            group=settings.redis_group,
            claim_idle_s=settings.redis_claim_idle_s,
        )
        stream = StreamConsumer(config, bus.submit)
        stream.start()
    feeds = [FeedPoller(feed_config, bus.submit) for feed_config in settings.feeds]
    for poller in feeds:
        poller.start()
    return EventService(bus, ticker, stream, SourceStore(store.path), watches, feeds)


def _log_failure(task: asyncio.Task[int]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.error("the live simulator stopped", exc_info=task.exception())
