"""A synchronous text streamer over the engine, for callers without an event loop.

The explanation flow and the CLI iterate text synchronously (the ``TextStreamer``
protocol of ``worthit.explain``). This adapter runs one private asyncio loop in a
daemon thread and hands each delta across; stopping the iteration early aborts the
request, which frees its KV at the engine's next step.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator

from worthit.engine.engine import Completion, Engine, RequestStream
from worthit.engine.sequence import Priority, SamplingParams


class EngineStreamer:
    def __init__(
        self,
        engine: Engine,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
    ) -> None:
        self.engine = engine
        self.priority = priority
        self.deadline_s = deadline_s
        self.last: Completion | None = None
        """The finished request of the latest ``stream`` call: finish_reason, counts."""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="worthit-streamer", daemon=True
        )
        self._thread.start()

    @property
    def model_id(self) -> str:
        return self.engine.model_id

    def stream(
        self,
        messages: list[dict[str, str]],
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        answer_prefix: str = "",
    ) -> Iterator[str]:
        """Text after ``answer_prefix``. Raises AdmissionRefusedError at once (before
        the first piece) when the deadline cannot be met: send the template instead."""
        params = SamplingParams(
            max_tokens=max_tokens, temperature=temperature, stop=tuple(stop or ())
        )

        async def submit() -> RequestStream:
            return self.engine.submit(
                messages=messages,
                params=params,
                priority=self.priority,
                deadline_s=self.deadline_s,
                answer_prefix=answer_prefix,
            )

        stream = asyncio.run_coroutine_threadsafe(submit(), self._loop).result()
        return self._pieces(stream)

    def _pieces(self, stream: RequestStream) -> Iterator[str]:
        try:
            while True:
                try:
                    delta = asyncio.run_coroutine_threadsafe(
                        stream.__anext__(), self._loop
                    ).result()
                except StopAsyncIteration:
                    break
                if delta.text:
                    yield delta.text
                if delta.finish_reason is not None:
                    break
        finally:
            stream.abort()
            self.last = stream.completion

    def close(self) -> None:
        """Stop the private loop (the engine itself is the caller's to close)."""
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()
