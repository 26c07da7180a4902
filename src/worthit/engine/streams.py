"""What a caller gets back: a stream of deltas, then the completion.

The engine thread computes; the callers live in asyncio event loops on other threads.
Each step's deltas cross over with one ``call_soon_threadsafe`` per loop (``send``),
not one per delta, so a step that serves 16 streams wakes each loop once.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass

from worthit.engine.sequence import FinishReason

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Delta:
    """New text of one request; the last one carries finish_reason."""

    request_id: str
    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason | None = None


@dataclass(frozen=True)
class Completion:
    """The whole answer and its accounting, available once the stream ends."""

    request_id: str
    text: str
    """For finish_reason "deadline", cut at the last sentence end ("" if none ended)."""
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    truncated_messages: int
    """Old turns dropped to fit the context (0 when the conversation fit)."""
    preemptions: int
    queue_s: float | None
    ttft_s: float | None
    prefill_s: float
    e2e_s: float


class RequestStream(AsyncIterator[Delta]):
    """Async iterator of one request's deltas. Breaking out of the loop does not stop
    the request: call ``abort()`` (the server does when a client disconnects)."""

    def __init__(self, request_id: str, abort: Callable[[str], None]) -> None:
        self.request_id = request_id
        self.completion: Completion | None = None
        self._abort = abort
        self._queue: asyncio.Queue[Delta] = asyncio.Queue()
        self._done = False

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> Delta:
        if self._done:
            raise StopAsyncIteration
        delta = await self._queue.get()
        if delta.finish_reason is not None:
            self._done = True
        return delta

    def abort(self) -> None:
        if not self._done:
            self._abort(self.request_id)

    async def collect(self) -> Completion:
        async for _ in self:
            pass
        assert self.completion is not None
        return self.completion


Outbox = Mapping[asyncio.AbstractEventLoop, list[tuple[RequestStream, Delta]]]
"""One step's deltas, grouped by the event loop of the stream each is for."""


def send(outbox: Outbox) -> None:
    """Hand each loop its deltas, in order, with one thread-safe call."""
    for loop, items in outbox.items():
        try:
            loop.call_soon_threadsafe(_push, items)
        except RuntimeError:
            log.debug("event loop closed; dropping %d deltas", len(items))


def _push(items: list[tuple[RequestStream, Delta]]) -> None:
    for stream, delta in items:
        stream._queue.put_nowait(delta)
