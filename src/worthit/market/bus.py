"""The embedded event bus: producers publish, one consumer applies in batches.

The in-process default of design.md ("SQLite, an asyncio event bus"). Events wait in a
bounded queue; one consumer task takes whatever has gathered (up to `batch_size`),
applies it through the one apply path in a single writer thread, so the event loop keeps
answering while SQLite writes, and after each commit tells its subscribers which
products' facts changed: the fact cache forgets them, the explanation generator queues
them. An import's batches of lines (`import_batch`) take the same queue, thread and
notice, one commit each, in turn with the events, so what subscribes sees imported rows
as it sees events.

Backpressure: `publish` waits for room, so a producer faster than the store slows to the
store's pace and nothing is dropped; `submit` (an HTTP request, which must not hang)
waits at most `timeout_s` for room and then raises `BusFullError`, for the caller to
answer 503 with Retry-After. Events published by one producer are applied in the order
published; across producers the order is the queue's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from worthit.market.apply import (
    BatchReport,
    EventResult,
    ImportBatchReport,
    Outcome,
    apply_events,
    apply_import_batch,
)
from worthit.market.events import Event
from worthit.market.records import Record
from worthit.market.store import MarketStore
from worthit.text.time import Clock, now_ms

log = logging.getLogger(__name__)

DEFAULT_CAPACITY = 20_000
"""Events waiting at most: about a second of the store's sustained rate."""
DEFAULT_BATCH = 1_000
STOP_DRAIN_S = 5.0

Subscriber = Callable[[frozenset[str]], object]
"""Called on the event loop after each commit with the SKUs whose facts changed."""


class BusClosedError(RuntimeError):
    """The bus is stopping (or stopped): nothing more is accepted."""


class BusFullError(RuntimeError):
    """No room for the events within the caller's time: try again shortly."""


@dataclass
class BusStats:
    published: int = 0
    applied: int = 0
    duplicates: int = 0
    rejected: int = 0
    batches: int = 0
    failed_batches: int = 0


@dataclass(frozen=True, slots=True)
class _Item:
    event: Event
    result: asyncio.Future[EventResult] | None


@dataclass(frozen=True, slots=True)
class _ImportBatch:
    """An import's batch: applied on its own, being a commit already."""

    records: Sequence[Record]
    result: asyncio.Future[ImportBatchReport]


_Queued = _Item | _ImportBatch


class EventBus:
    def __init__(
        self,
        store: MarketStore,
        *,
        capacity: int = DEFAULT_CAPACITY,
        batch_size: int = DEFAULT_BATCH,
        clock: Clock = now_ms,
    ) -> None:
        self.store = store
        self.batch_size = batch_size
        self.clock = clock
        self.stats = BusStats()
        self._queue: asyncio.Queue[_Queued] = asyncio.Queue(capacity)
        self._subscribers: list[Subscriber] = []
        self._restated: list[Subscriber] = []
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="worthit-events")
        self._consumer: asyncio.Task[None] | None = None
        self._closed = False

    @property
    def pending(self) -> int:
        """Events published and not yet applied."""
        return self._queue.qsize()

    def subscribe(self, callback: Subscriber, *, restated_only: bool = False) -> None:
        """Call `callback` after each commit with the products it changed; with
        `restated_only`, only those changed by more than stock or sales readings."""
        (self._restated if restated_only else self._subscribers).append(callback)

    def start(self) -> None:
        """Start the consumer task on the running loop."""
        if self._consumer is None:
            self._consumer = asyncio.get_running_loop().create_task(self._consume())

    async def stop(self, drain_s: float = STOP_DRAIN_S) -> None:
        """Refuse new events, apply what is queued (for at most `drain_s`), then stop."""
        self._closed = True
        if self._consumer is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._queue.join(), drain_s)
            self._consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._consumer
            self._consumer = None
        while not self._queue.empty():
            self._abandon([self._queue.get_nowait()])
            self._queue.task_done()
        self._writer.shutdown(wait=True)

    async def publish(self, event: Event) -> None:
        """Queue one event, waiting while the queue is full."""
        self._check_open()
        await self._queue.put(_Item(event, None))
        self.stats.published += 1

    async def submit(
        self, events: Sequence[Event], timeout_s: float | None = None
    ) -> list[EventResult]:
        """Queue `events` and wait until they are applied; their results, in order.

        Raises BusFullError when there was no room for all of them within `timeout_s`
        (those already queued are still applied)."""
        self._check_open()
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[EventResult]] = []
        try:
            async with asyncio.timeout(timeout_s):
                for event in events:
                    future: asyncio.Future[EventResult] = loop.create_future()
                    await self._queue.put(_Item(event, future))
                    self.stats.published += 1
                    futures.append(future)
        except TimeoutError:
            raise BusFullError(
                f"the event queue stayed full for {timeout_s:g} s; "
                f"{len(futures)} of {len(events)} events were queued"
            ) from None
        return list(await asyncio.gather(*futures))

    async def import_batch(self, records: Sequence[Record]) -> ImportBatchReport:
        """Apply an import's batch of records (no event ids: upserts) after what is queued
        before it, in one commit, and tell the subscribers what it changed; waits for room
        like `publish`. Raises what `apply_import_batch` raises when the whole batch failed."""
        self._check_open()
        future: asyncio.Future[ImportBatchReport] = asyncio.get_running_loop().create_future()
        await self._queue.put(_ImportBatch(records, future))
        return await future

    async def join(self) -> None:
        """Wait until every event published so far is applied."""
        await self._queue.join()

    def _check_open(self) -> None:
        if self._closed:
            raise BusClosedError("the event bus is stopping")

    async def _consume(self) -> None:
        loop = asyncio.get_running_loop()
        held: _ImportBatch | None = None
        """An import's batch taken off the queue while gathering events: applied next."""
        while True:
            first = held if held is not None else await self._queue.get()
            held = None
            batch: list[_Queued] = [first]
            if isinstance(first, _Item):
                while len(batch) < self.batch_size and not self._queue.empty():
                    item = self._queue.get_nowait()
                    if isinstance(item, _ImportBatch):
                        held = item
                        break
                    batch.append(item)
            try:
                if isinstance(first, _ImportBatch):
                    await self._import(loop, first)
                else:
                    await self._apply(loop, [item for item in batch if isinstance(item, _Item)])
            except asyncio.CancelledError:
                self._abandon([*batch, *([held] if held is not None else [])])
                if held is not None:
                    self._queue.task_done()
                raise
            finally:
                for _ in batch:
                    self._queue.task_done()

    async def _import(self, loop: asyncio.AbstractEventLoop, item: _ImportBatch) -> None:
        try:
            report = await loop.run_in_executor(
                self._writer, apply_import_batch, self.store, item.records
            )
        except Exception as exc:  # the whole batch failed: none of it was written
            self.stats.failed_batches += 1
            if not item.result.done():
                item.result.set_exception(exc)
            return
        self.stats.batches += 1
        if not item.result.done():
            item.result.set_result(report)
        self._notify_changes(report)

    async def _apply(self, loop: asyncio.AbstractEventLoop, batch: list[_Item]) -> None:
        events = [item.event for item in batch]
        try:
            report = await loop.run_in_executor(
                self._writer, apply_events, self.store, events, self.clock
            )
        except Exception as exc:  # the whole batch failed: its events were not applied
            self.stats.failed_batches += 1
            log.exception("could not apply a batch of %d events", len(batch))
            for item in batch:
                if item.result is not None and not item.result.done():
                    item.result.set_exception(exc)
            return
        self._count(report)
        for item, result in zip(batch, report.results, strict=True):
            if item.result is not None and not item.result.done():
                item.result.set_result(result)
        self._notify_changes(report)

    def _notify_changes(self, report: BatchReport | ImportBatchReport) -> None:
        if report.changed_skus:
            self._notify(self._subscribers, frozenset(report.changed_skus))
        if report.restated_skus:
            self._notify(self._restated, frozenset(report.restated_skus))

    @staticmethod
    def _abandon(batch: Sequence[_Queued]) -> None:
        """The bus stopped before these events' results were known: say so to who waits."""
        for item in batch:
            if item.result is not None and not item.result.done():
                item.result.set_exception(BusClosedError("the event bus stopped"))

    def _count(self, report: BatchReport) -> None:
        self.stats.batches += 1
        self.stats.applied += report.count(Outcome.APPLIED)
        self.stats.duplicates += report.count(Outcome.DUPLICATE)
        self.stats.rejected += report.count(Outcome.REJECTED)

    @staticmethod
    def _notify(subscribers: list[Subscriber], skus: frozenset[str]) -> None:
        for callback in subscribers:
            try:
                callback(skus)
            except Exception:  # one subscriber's fault must not stop the others or the bus
                log.exception("event subscriber %r failed", callback)
