"""Redis pub/sub between the `worthit serve` processes that share one Redis.

Each process keeps one subscriber connection for all its channels and sends what it
publishes through a queue, so neither an answer nor the event bus ever waits on Redis:
`send` returns at once from any thread. Pub/sub delivers to whoever is subscribed at
that moment and keeps nothing, which is what its users want: a fact-cache eviction or a
watch notification for an SSE stream is only worth having now (the store and the revision
check stay the truth). So a lost Redis loses messages, never state; the subscriber
reconnects with the stream consumer's backoff; `connected` says whether it is up.

Every message carries its sender's `origin`, so a process skips its own: it has already
acted on it locally, before publishing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Any

import orjson
from redis.asyncio import Redis
from redis.asyncio.client import PubSub
from redis.exceptions import RedisError

from worthit.market.ingest.redis_stream import Backoff, StreamConfig, connect, consumer_name

log = logging.getLogger(__name__)

Handler = Callable[[dict[str, Any]], None]
"""Called on the event loop with a message another process published."""

MAX_QUEUED = 10_000
"""Messages waiting to be sent; past that they are dropped (and counted)."""
HEALTH_CHECK_S = 5
"""The subscriber pings this often, so a Redis that vanished without closing is noticed."""

_UNREACHABLE = (RedisError, OSError)


class Channels:
    """Publish and subscribe on named channels; payloads are JSON objects."""

    def __init__(
        self,
        url: str,
        *,
        backoff: Backoff | None = None,
        connect_timeout_s: float = 2.0,
        origin: str | None = None,
    ) -> None:
        self.url = url
        self.where = StreamConfig(url).where
        self.origin = origin or f"{consumer_name()}-{uuid.uuid4().hex[:8]}"
        """This app's name on the channels: unique even for two apps in one process."""
        self.backoff = backoff or Backoff()
        self.connect_timeout_s = connect_timeout_s
        self.connected = False
        self.last_error: str | None = None
        self.sent = 0
        self.received = 0
        self.dropped = 0
        self.reconnects = 0
        self._handlers: dict[str, Handler] = {}
        self.on_reconnect: Callable[[], None] | None = None
        """Called when the subscriber is back after losing Redis: Redis answers again."""
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[tuple[str, bytes]] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._subscribed = asyncio.Event()

    def subscribe(self, channel: str, handler: Handler) -> None:
        """Call `handler` with each message another process publishes on `channel`
        (before `start`)."""
        self._handlers[channel] = handler

    def send(self, channel: str, message: dict[str, Any]) -> None:
        """Publish `message` soon, without waiting; safe from any thread. Dropped when
        the channels are not running or too far behind."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self.dropped += 1
            return
        data = orjson.dumps({"origin": self.origin, "message": message})
        try:
            loop.call_soon_threadsafe(self._enqueue, channel, data)
        except RuntimeError:  # the loop closed meanwhile
            self.dropped += 1

    def start(self) -> None:
        """Start the subscriber and the sender on the running loop."""
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._queue = asyncio.Queue(MAX_QUEUED)
        self._client = connect(self.url, self.connect_timeout_s)
        self._tasks = [loop.create_task(self._listen()), loop.create_task(self._send())]

    async def subscribed(self) -> None:
        """Wait until the subscriber is listening (tests: a message sent before would be
        missed)."""
        await self._subscribed.wait()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._loop is not None:
            await self._client.aclose()
        self._loop = None
        self.connected = False

    def status(self) -> dict[str, Any]:
        return {
            "redis": self.where,
            "connected": self.connected,
            "last_error": self.last_error,
            "sent": self.sent,
            "received": self.received,
            "dropped": self.dropped,
            "reconnects": self.reconnects,
        }

    def _enqueue(self, channel: str, data: bytes) -> None:
        assert self._queue is not None
        try:
            self._queue.put_nowait((channel, data))
        except asyncio.QueueFull:
            self.dropped += 1

    async def _send(self) -> None:
        assert self._queue is not None
        while True:
            channel, data = await self._queue.get()
            try:
                await self._client.publish(channel, data)
                self.sent += 1
            except _UNREACHABLE as exc:  # pub/sub keeps nothing: a message not sent now is moot
                self.dropped += 1
                self._down(exc)

    async def _listen(self) -> None:
        attempt = 0
        while True:
            client = Redis.from_url(
                self.url,
                socket_connect_timeout=self.connect_timeout_s,
                health_check_interval=HEALTH_CHECK_S,
            )
            pubsub: PubSub = client.pubsub(ignore_subscribe_messages=True)
            try:
                await pubsub.subscribe(*self._handlers)
                if attempt or self.last_error is not None:
                    self.reconnects += 1
                    if self.on_reconnect is not None:
                        self.on_reconnect()
                self.connected = True
                self.last_error = None
                attempt = 0
                self._subscribed.set()
                while True:
                    message = await pubsub.get_message(timeout=HEALTH_CHECK_S)
                    if message is not None and message.get("type") == "message":
                        self._dispatch(message["channel"], message["data"])
            except _UNREACHABLE as exc:
                self._down(exc)
            finally:
                with contextlib.suppress(*_UNREACHABLE):
                    await pubsub.aclose()  # type: ignore[no-untyped-call]
                with contextlib.suppress(*_UNREACHABLE):
                    await client.aclose()
            attempt += 1
            await asyncio.sleep(self.backoff.delay(attempt))

    def _dispatch(self, channel: bytes | str, data: bytes) -> None:
        name = channel.decode() if isinstance(channel, bytes) else channel
        handler = self._handlers.get(name)
        try:
            envelope = orjson.loads(data)
            if handler is None or envelope.get("origin") == self.origin:
                return
            self.received += 1
            handler(envelope["message"])
        except Exception:  # one bad message must not end the subscription
            log.exception("could not handle a message on %s", name)

    def _down(self, exc: BaseException) -> None:
        if self.connected:
            log.warning("Redis pub/sub at %s lost: %s", self.where, exc)
        self.connected = False
        self.last_error = f"{type(exc).__name__}: {exc}"
