"""Events through Redis Streams: a consumer group feeding the one apply path, and a publisher.

Each stream entry has one field, `event`, whose value is the event's JSON. Every process
reads as one consumer of a group (`hostname-pid`), so several `worthit serve` share a
stream and each entry goes to one of them:

- XREADGROUP hands a batch over; the events go through `apply` (the service passes its
  bus's `submit`: after-commit notices, cache eviction and all), and an entry is XACKed
  only once `apply` has returned, after the store's commit. A process that dies between
  the two leaves its entries pending; they are delivered again, and the idempotent apply
  makes the second delivery a duplicate. At-least-once delivery, exactly one effect.
- XAUTOCLAIM takes over entries pending longer than `claim_idle_s` (a dead consumer's, or
  a rejected event waiting for its retry), which delivers them again and counts it.
- An entry that can never apply (no `event` field, not JSON, not a valid event) goes to
  the dead-letter stream at once, with the reason. One the store rejects (a price for a
  product not yet seen) stays pending, so it is retried when claimed, `claim_idle_s`
  later; its `max_deliveries`-th failure, or any delivery after that many (a consumer
  that died on it each time), dead-letters it instead. The dead-letter entry and the
  XACK are one MULTI, so the entry is in exactly one of the two streams.
- When the whole batch fails (the store is locked, full or gone), the same batch is
  applied again with backoff, without being delivered again: the store's outage is not
  the event's fault and does not count towards dead-lettering it.
- When Redis cannot be reached the consumer says so (`state`) and reconnects with
  exponential backoff and jitter; acknowledgements it could not send are sent first
  after reconnecting. A group that vanished (Redis restarted without persistence) is
  created again, from the start of whatever the stream holds.

A new group starts at the beginning of the stream (id 0), so events published before the
first consumer ran are not skipped; replaying them is harmless.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

from redis.asyncio import Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import RedisError, ResponseError

from worthit.market.apply import EventResult, Outcome
from worthit.market.events import Event, EventError, parse_json_event
from worthit.text.time import Clock, now_ms

log = logging.getLogger(__name__)

DEFAULT_STREAM = "worthit:events"
DEFAULT_GROUP = "worthit"
DEAD_SUFFIX = ":dead"
EVENT_FIELD = "event"
MAX_DELIVERIES = 5
DEFAULT_CLAIM_IDLE_S = 30.0
DEFAULT_BATCH = 500
BLOCK_MS = 1000
STOP_DRAIN_S = 5.0

Apply = Callable[[Sequence[Event]], Awaitable[Sequence[EventResult]]]
"""Apply a batch and return its results in order, after the commit: `EventBus.submit`."""

_UNREACHABLE = (RedisError, OSError)


def consumer_name() -> str:
    """One consumer per process: its entries are its own until it acks or dies."""
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True, slots=True)
class Backoff:
    """Waits between retries: doubling from `first_s` up to `max_s`, each drawn between
    half and all of its step, so processes that lost Redis together do not return in step."""

    first_s: float = 0.1
    max_s: float = 5.0

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        step = min(self.max_s, self.first_s * 2.0 ** min(max(attempt - 1, 0), 32))
        return step / 2 + rng() * step / 2


@dataclass(frozen=True)
class StreamConfig:
    url: str
    """redis://[[user]:password@]host[:port][/db]"""
    stream: str = DEFAULT_STREAM
    group: str = DEFAULT_GROUP
    consumer: str = field(default_factory=consumer_name)
    dead_letter: str | None = None
    """Where entries that cannot be applied go (default: the stream's key + ':dead')."""
    batch_size: int = DEFAULT_BATCH
    block_ms: int = BLOCK_MS
    claim_idle_s: float = DEFAULT_CLAIM_IDLE_S
    """Pending this long, an entry is taken over and delivered again."""
    max_deliveries: int = MAX_DELIVERIES
    backoff: Backoff = Backoff()
    connect_timeout_s: float = 2.0

    @property
    def dead_stream(self) -> str:
        return self.dead_letter or self.stream + DEAD_SUFFIX

    @property
    def where(self) -> str:
        """The URL without its credentials: what status and logs may show."""
        parts = urlsplit(self.url)
        host = parts.hostname or "localhost"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"


def connect(url: str, timeout_s: float, read_timeout_s: float | None = None) -> Redis:
    """A client that fails fast: reconnecting is the caller's loop, with its backoff."""
    return Redis.from_url(
        url,
        socket_connect_timeout=timeout_s,
        socket_timeout=read_timeout_s if read_timeout_s is not None else timeout_s,
        retry=Retry(NoBackoff(), 0),
    )


class ConsumerState(StrEnum):
    STARTING = "starting"
    CONNECTED = "connected"
    DISCONNECTED = "disconnected"
    """Redis cannot be reached: nothing new arrives; the store still answers."""
    STORE_FAILING = "store_failing"
    """Batches fail to commit; the batch in hand is retried with backoff."""
    STOPPED = "stopped"


@dataclass
class ConsumerStats:
    delivered: int = 0
    """Entries handed to this consumer, claimed ones included."""
    claimed: int = 0
    applied: int = 0
    duplicates: int = 0
    retrying: int = 0
    """Rejected by the store and left pending for a later delivery."""
    dead_lettered: int = 0
    acked: int = 0
    reconnects: int = 0
    """Times Redis could not be reached and the consumer waited to try again."""


@dataclass(frozen=True, slots=True)
class _Dead:
    entry_id: bytes
    raw: bytes
    reason: str
    deliveries: int


class _StoppingError(Exception):
    """The consumer was asked to stop while a batch waited for the store."""


class StreamConsumer:
    """One consumer of `config.group`, applying what it reads through `apply`."""

    def __init__(self, config: StreamConfig, apply: Apply, *, clock: Clock = now_ms) -> None:
        self.config = config
        self.apply = apply
        self.clock = clock
        self.stats = ConsumerStats()
        self.state = ConsumerState.STARTING
        self.last_error: str | None = None
        self._redis = connect(
            config.url, config.connect_timeout_s, config.block_ms / 1000 + config.connect_timeout_s
        )
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._busy = False
        self._unacked: list[bytes] = []
        self._claim_cursor: bytes | str = "0-0"
        self._next_claim = 0.0

    @property
    def connected(self) -> bool:
        return self.state is ConsumerState.CONNECTED

    def start(self) -> None:
        """Start consuming on the running loop; returns at once, even while Redis is down."""
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self, drain_s: float = STOP_DRAIN_S) -> None:
        """Finish the batch in hand (for at most `drain_s`), leave the group if nothing of
        ours is pending, and close the connection."""
        self._stopping = True
        task, self._task = self._task, None
        if task is not None:
            if not self._busy:
                task.cancel()
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(task), drain_s)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        with contextlib.suppress(*_UNREACHABLE, TimeoutError):
            await asyncio.wait_for(self._leave(), self.config.connect_timeout_s)
        with contextlib.suppress(*_UNREACHABLE):
            await self._redis.aclose()
        self.state = ConsumerState.STOPPED

    def status(self) -> dict[str, Any]:
        """What /readyz shows: where, who, how it is going and what went wrong last."""
        config = self.config
        return {
            "state": self.state.value,
            "redis": config.where,
            "stream": config.stream,
            "group": config.group,
            "consumer": config.consumer,
            "dead_letter": config.dead_stream,
            "last_error": self.last_error,
            **vars(self.stats),
        }

    async def _run(self) -> None:
        attempt = 0
        while not self._stopping:
            try:
                await self._join_group()
                self._set(ConsumerState.CONNECTED)
                attempt = 0
                while not self._stopping:
                    await self._cycle()
            except _StoppingError:
                return
            except _UNREACHABLE as exc:
                if self._stopping:
                    return
                attempt += 1
                if _no_group(exc) and attempt == 1:
                    log.warning("%s: %s; joining the group again", self.name, exc)
                    continue
                self.stats.reconnects += 1
                self._set(ConsumerState.DISCONNECTED, exc)
                delay = self.config.backoff.delay(attempt)
                log.warning("%s: %s; retrying in %.2f s", self.name, exc, delay)
                await asyncio.sleep(delay)
            except Exception as exc:  # a fault of ours must not end consuming for good
                attempt += 1
                self._set(ConsumerState.DISCONNECTED, exc)
                log.exception("%s: the consumer failed; starting again", self.name)
                await asyncio.sleep(self.config.backoff.delay(attempt))

    @property
    def name(self) -> str:
        return f"stream {self.config.stream} at {self.config.where}"

    def _set(self, state: ConsumerState, error: BaseException | None = None) -> None:
        self.state = state
        if error is not None:
            self.last_error = f"{type(error).__name__}: {error}"

    async def _join_group(self) -> None:
        try:
            await self._redis.xgroup_create(
                self.config.stream, self.config.group, id="0", mkstream=True
            )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def _cycle(self) -> None:
        await self._flush_acks()
        loop = asyncio.get_running_loop()
        if loop.time() >= self._next_claim:
            finished = await self._claim()
            self._next_claim = loop.time() + (
                min(self.config.claim_idle_s / 2, 5.0) if finished else 0.0
            )
        if self._stopping:
            return
        reply = await self._redis.xreadgroup(
            self.config.group,
            self.config.consumer,
            {self.config.stream: ">"},
            count=self.config.batch_size,
            block=self.config.block_ms,
        )
        for _stream, entries in reply or ():
            await self._handle(entries, {})

    async def _claim(self) -> bool:
        """Take over entries pending past `claim_idle_s`; True when the scan is through."""
        config = self.config
        reply = await self._redis.xautoclaim(
            config.stream,
            config.group,
            config.consumer,
            min_idle_time=int(config.claim_idle_s * 1000),
            start_id=self._claim_cursor,
            count=config.batch_size,
        )
        cursor, entries = reply[0], reply[1]
        self._claim_cursor = cursor
        entries = [(entry_id, fields) for entry_id, fields in entries if fields is not None]
        if entries:
            self.stats.claimed += len(entries)
            await self._handle(entries, await self._deliveries([e for e, _ in entries]))
        return cursor in (b"0-0", "0-0")

    async def _deliveries(self, entry_ids: list[bytes]) -> dict[bytes, int]:
        """How many times each entry has been delivered, this delivery included."""
        async with self._redis.pipeline(transaction=False) as pipe:
            for entry_id in entry_ids:
                pipe.xpending_range(
                    self.config.stream, self.config.group, min=entry_id, max=entry_id, count=1
                )
            replies = await pipe.execute()
        counts = {}
        for reply in replies:
            for row in reply:
                counts[row["message_id"]] = int(row["times_delivered"])
        return counts

    async def _handle(
        self, entries: list[tuple[bytes, dict[bytes, bytes]]], deliveries: dict[bytes, int]
    ) -> None:
        self._busy = True
        try:
            await self._handle_batch(entries, deliveries)
        finally:
            self._busy = False

    async def _handle_batch(
        self, entries: list[tuple[bytes, dict[bytes, bytes]]], deliveries: dict[bytes, int]
    ) -> None:
        limit = self.config.max_deliveries
        self.stats.delivered += len(entries)
        dead: list[_Dead] = []
        batch: list[tuple[bytes, bytes, Event, int]] = []
        for entry_id, fields in entries:
            count = deliveries.get(entry_id, 1)
            raw = fields.get(EVENT_FIELD.encode())
            if raw is None:
                dead.append(_Dead(entry_id, b"", f"no {EVENT_FIELD!r} field", count))
            elif count > limit:
                reason = f"delivered {count - 1} times without being applied"
                dead.append(_Dead(entry_id, raw, reason, count))
            else:
                parsed = parse_json_event(raw)
                if isinstance(parsed, EventError):
                    dead.append(_Dead(entry_id, raw, f"{parsed.field}: {parsed.message}", count))
                else:
                    batch.append((entry_id, raw, parsed, count))
        if dead:
            await self._dead_letter(dead)
        if not batch:
            return
        results = await self._apply_until_done([event for _, _, event, _ in batch])
        finals: list[_Dead] = []
        for (entry_id, raw, _event, count), result in zip(batch, results, strict=True):
            if result.outcome is Outcome.REJECTED:
                reason = result.error.message if result.error else "rejected by the store"
                if count >= limit:
                    finals.append(_Dead(entry_id, raw, f"rejected {count} times: {reason}", count))
                else:
                    self.stats.retrying += 1
                continue
            if result.outcome is Outcome.APPLIED:
                self.stats.applied += 1
            else:
                self.stats.duplicates += 1
            self._unacked.append(entry_id)
        await self._flush_acks()
        if finals:
            await self._dead_letter(finals)

    async def _apply_until_done(self, events: list[Event]) -> Sequence[EventResult]:
        attempt = 0
        while True:
            try:
                results = await self.apply(events)
            except Exception as exc:  # the whole batch failed; nothing of it was applied
                if self._stopping:
                    raise _StoppingError from exc
                attempt += 1
                self._set(ConsumerState.STORE_FAILING, exc)
                delay = self.config.backoff.delay(attempt)
                log.exception("%s: a batch of %d events failed", self.name, len(events))
                await asyncio.sleep(delay)
                continue
            if self.state is ConsumerState.STORE_FAILING:
                self._set(ConsumerState.CONNECTED)
            return results

    async def _flush_acks(self) -> None:
        if not self._unacked:
            return
        entry_ids = self._unacked
        await self._redis.xack(self.config.stream, self.config.group, *entry_ids)
        self._unacked = []
        self.stats.acked += len(entry_ids)

    async def _dead_letter(self, dead: list[_Dead]) -> None:
        config = self.config
        at = str(self.clock())
        async with self._redis.pipeline(transaction=True) as pipe:
            for entry in dead:
                pipe.xadd(
                    config.dead_stream,
                    {
                        EVENT_FIELD: entry.raw,
                        "reason": entry.reason,
                        "stream": config.stream,
                        "id": entry.entry_id,
                        "deliveries": str(entry.deliveries),
                        "consumer": config.consumer,
                        "at_ms": at,
                    },
                )
            pipe.xack(config.stream, config.group, *(entry.entry_id for entry in dead))
            await pipe.execute()
        self.stats.dead_lettered += len(dead)
        for entry in dead:
            log.warning(
                "%s: entry %s to %s: %s",
                self.name,
                entry.entry_id.decode(),
                config.dead_stream,
                entry.reason,
            )

    async def _leave(self) -> None:
        """Remove this consumer from the group when nothing is pending under its name."""
        if self.state is not ConsumerState.CONNECTED:
            return
        config = self.config
        mine = await self._redis.xpending_range(
            config.stream, config.group, min="-", max="+", count=1, consumername=config.consumer
        )
        if not mine:
            await self._redis.xgroup_delconsumer(config.stream, config.group, config.consumer)


class StreamPublisher:
    """XADD events, one entry each (field `event`, the event's JSON).

    An outage is waited out, retrying with backoff, so the publisher never drops an
    event; an XADD that reached Redis before its reply was lost is then sent twice, and
    the apply path makes the copy a duplicate."""

    def __init__(
        self, url: str, stream: str = DEFAULT_STREAM, *, backoff: Backoff = Backoff()
    ) -> None:
        self.stream = stream
        self.backoff = backoff
        self.published = 0
        self.retries = 0
        self._redis = connect(url, 2.0)

    async def publish(self, event: Event) -> None:
        attempt = 0
        while True:
            try:
                await self._redis.xadd(self.stream, {EVENT_FIELD: event.model_dump_json()})
            except _UNREACHABLE as exc:
                attempt += 1
                self.retries += 1
                delay = self.backoff.delay(attempt)
                log.warning("XADD to %s failed (%s); retrying in %.2f s", self.stream, exc, delay)
                await asyncio.sleep(delay)
                continue
            self.published += 1
            return

    async def close(self) -> None:
        with contextlib.suppress(*_UNREACHABLE):
            await self._redis.aclose()


def _no_group(exc: BaseException) -> bool:
    return isinstance(exc, ResponseError) and str(exc).startswith("NOGROUP")
