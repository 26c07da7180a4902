"""Verdicts before explanations: an answer's explanation waits while other shoppers'
verdicts are still being decided.

A verdict is the part a shopper waits for (tens of milliseconds); the explanation after it
has the rest of the 800 ms. In one event loop every answer's steps interleave, so in a
burst (a flash sale's opening second) the template text, the audit leaf and the `done`
event of the first answers would run between the later answers' decisions and push the
last verdicts of the burst back by as much again.

So once its verdict is out an answer yields the loop once (answers already queued start
deciding), and if another answer started after it, waits until none is deciding and none
has started or been decided for `quiet_s` (a burst's requests reach the loop over a few
milliseconds, not in one turn), or until it has waited `max_wait_s`: under a load that
never pauses every explanation still goes on, `max_wait_s` late at most. An answer alone
is not held.

One event loop at a time: an answer asked from another loop while answers wait on the
first one's is not held (the CLI and the server each run one loop).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque

QUIET_S = 0.002
"""No answer started for this long: the burst is over (a new connection's request reaches
the answer flow within a turn or two of the loop, well under this)."""
MAX_WAIT_S = 0.025
"""The most an explanation is held: a few percent of the 800 ms an answer may take."""


class VerdictFirst:
    def __init__(self, quiet_s: float = QUIET_S, max_wait_s: float = MAX_WAIT_S) -> None:
        self.quiet_s = quiet_s
        self.max_wait_s = max_wait_s
        self.deciding = 0
        """Answers started whose verdict is not out yet."""
        self.held = 0
        """Answers held so far (a counter for metrics and tests)."""
        self.starts = 0
        """Answers started so far: an answer's ticket is the count at its start."""
        self._last_activity = -1.0
        """When an answer last started or had its verdict decided."""
        self._waiting: deque[tuple[float, asyncio.Future[None]]] = deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None

    def started(self) -> int:
        """Count an answer in; its ticket for `turn`."""
        self.deciding += 1
        self.starts += 1
        self._last_activity = time.monotonic()
        return self.starts

    def decided(self) -> None:
        self.deciding -= 1
        self._last_activity = time.monotonic()
        if self.deciding == 0 and self._waiting and _running_loop() is self._loop:
            self._arm(time.monotonic())

    def _quiet(self, now: float) -> bool:
        return self.deciding == 0 and now - self._last_activity >= self.quiet_s

    async def turn(self, ticket: int) -> None:
        """Return once the answer with this ticket may go on to its explanation."""
        await asyncio.sleep(0)
        now = time.monotonic()
        if self.deciding == 0 and (self.starts == ticket or self._quiet(now)):
            return
        loop = asyncio.get_running_loop()
        if self._loop is not None and self._loop.is_closed():
            self._waiting.clear()
            self._loop = self._timer = None
        if self._waiting and loop is not self._loop:
            return
        self._loop = loop
        waiter: asyncio.Future[None] = loop.create_future()
        self._waiting.append((now + self.max_wait_s, waiter))
        self.held += 1
        self._arm(now)
        await waiter

    def _arm(self, now: float) -> None:
        """The timer for the next release: the oldest waiter's deadline, or sooner the
        end of the quiet time once nothing is being decided (`decided` re-arms then)."""
        if self._loop is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        due = self._waiting[0][0]
        if self.deciding == 0:
            due = min(due, self._last_activity + self.quiet_s)
        self._timer = self._loop.call_later(max(0.0, due - now), self._tick)

    def _tick(self) -> None:
        self._timer = None
        now = time.monotonic()
        quiet = self._quiet(now)
        while self._waiting and (quiet or self._waiting[0][0] <= now):
            _, waiter = self._waiting.popleft()
            if not waiter.done():
                waiter.set_result(None)
        if self._waiting:
            self._arm(now)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
