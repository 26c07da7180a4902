"""Prefix warming: prefilling a prompt's full blocks into the prefix cache ahead of the
questions expected to start with it.

A prompt whose prefill cannot fit a deadline can still be served in time once its shared
part is in the KV. A caller names the prompts it expects (``warm``); a prompt prefix
refused for its deadline (``warm_after_refusals`` times, once by default) is warmed too
(``after_refusal``), but only into idle time. Warming the long tail once evicted the best
sellers' prompts from the KV cells; now idle prefixes leave the cells for host RAM
anyway (``EngineConfig.resident_cells``), so a warmed one displaces nothing there.
Refusals come when the engine is busy, so a prefix refused then is remembered and warmed
when the engine is next idle (``warm_deferred``, most recently refused first, one at a time):
warmed only if idle at the refusal itself, the product asked about in a burst stayed cold
for the questions after it.
Refusals are counted per block-aligned prefix, not per whole prompt: two questions about
one product share its facts (the system message) and differ in their last blocks, so
counted whole, a product asked two ways was never warmed, and every later question about
it was refused again for the same uncached facts (bench/engine.py on a 2-core host: about
90 of 100 prompt tokens uncached on an idle engine, 0.2 requests/s within the objective at
1 a second where llama-server, which keeps every prompt it served, had 0.47).
Warming requests are the engine's own: low priority, no deadline, one token. They are
interactive work, not background: a prompt warmed ahead of its askers must be in the cache
before they come, not whenever background work allows, so background work pauses.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from worthit.engine.config import EngineConfig
from worthit.engine.timing.budget import PublishedBudget
from worthit.text.lru import LRU

REFUSALS_REMEMBERED = 16_384
"""Prefixes whose refusals are counted (a 100-token prompt has a dozen 8-token blocks)."""
DEFERRED_WARMS = 32
"""Prefixes refused often enough while the engine was busy, kept to warm when it is
idle; the oldest is forgotten first (a few seconds of idle prefill at most)."""


class PrefixWarmer:
    def __init__(
        self,
        config: EngineConfig,
        published: PublishedBudget,
        inbox_size: Callable[[], int],
        queue: Callable[[str, list[int]], None],
    ) -> None:
        self.config = config
        self._published = published
        self._inbox_size = inbox_size
        self._queue = queue
        """Hands the engine a warming request: (request id, prompt tokens)."""
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}
        """Request id -> prefix key of each warming request queued or running."""
        self._refused: LRU[int, int] = LRU(REFUSALS_REMEMBERED)
        """Refusal counts of recent prompt prefixes (bounded)."""
        self._deferred: LRU[int, list[int]] = LRU(DEFERRED_WARMS)
        """Prefix key -> its tokens, refused often enough while the engine was busy."""

    def warm(self, tokens: list[int], cached: int) -> bool:
        """Warm tokens' full blocks unless they are cached (cached = tokens already in
        the prefix cache), being warmed, or the queue already holds a batch's worth."""
        budget = self._published.read()
        busy = budget.waiting + self._inbox_size() >= self.config.max_sequences
        return not busy and self._start(tokens, cached, self._key(tokens))

    def after_refusal(self, tokens: list[int], cached: int) -> bool:
        """A deadline refusal of tokens: warm the longest of its block-aligned prefixes
        that has been refused often enough, and only into idle time (a refused prompt is a
        guess about the next asker, not work)."""
        if not self.config.warm_prefix_on_refusal:
            return False
        size = self.config.block_size
        wanted, key, chain = 0, 0, 0
        for end in range(size, self._full_blocks(tokens) + 1, size):
            chain = hash((chain, tuple(tokens[end - size : end])))
            if self._count_refusal(chain) >= self.config.warm_after_refusals:
                wanted, key = end, chain
        if wanted <= cached:
            return False
        budget = self._published.read()
        if budget.running or budget.waiting or self._inbox_size():
            with self._lock:
                self._deferred.put(key, tokens[:wanted])
            return False
        return self._start(tokens, cached, key, wanted)

    def warm_deferred(self, cached_len: Callable[[list[int]], int]) -> bool:
        """On the engine thread, when it is idle: warm the most recently refused prefix
        that waits for idle time, unless a warming request is in flight or it is cached
        meanwhile (cached_len: tokens of a prompt in the prefix cache)."""
        while True:
            with self._lock:
                if self._in_flight or not self._deferred:
                    return False
                key = list(self._deferred)[-1]
                tokens = self._deferred.pop(key)
            assert tokens is not None
            ahead = [*tokens, 0]  # cached_len leaves a prompt's last token out
            if self._start(ahead, cached_len(ahead), key, len(tokens)):
                return True

    def finished(self, request_id: str) -> None:
        with self._lock:
            self._in_flight.pop(request_id, None)

    def _key(self, tokens: list[int]) -> int:
        return hash(tuple(tokens[: self._full_blocks(tokens)]))

    def _full_blocks(self, tokens: list[int]) -> int:
        """Tokens in tokens' full blocks, the last token left out: only full blocks are
        cached, and a request always computes its last prompt token."""
        size = self.config.block_size
        return (len(tokens) - 1) // size * size

    def _start(self, tokens: list[int], cached: int, key: int, n: int | None = None) -> bool:
        """Queue a warming request for tokens' first `n` (block-aligned; default: all
        their full blocks) unless those are cached or being warmed."""
        n = self._full_blocks(tokens) if n is None else n
        with self._lock:
            if n <= cached or key in self._in_flight.values():
                return False
            request_id = f"warm-{uuid.uuid4().hex}"
            self._in_flight[request_id] = key
            self._queue(request_id, tokens[:n])
        return True

    def _count_refusal(self, key: int) -> int:
        with self._lock:
            count = (self._refused.pop(key) or 0) + 1
            self._refused.put(key, count)
            return count
