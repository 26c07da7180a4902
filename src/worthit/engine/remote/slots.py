"""A replica's request slots: how many requests it is sent at once, and in which order
the others wait for one.

A server that cannot batch runs one request at a time, and llama_cpp.server (by default,
its `interrupt_requests`) ends the running stream as soon as any other request arrives,
even a GET /v1/models, with `[DONE]` and no finish_reason. Sent at once, a shopper's
explanation, the background generator's and the router's health probe cut each other
off. So a replica whose concurrency is known gets at most that many requests; the rest
wait here in class order (interactive before background, then arrival), and an interactive request
that finds every slot held while background work holds one preempts it: the background
request ends "abort" (the generator tries it again later), as the engine in process
puts its lowest class last. A replica of unknown concurrency (vLLM, SGLang, worthit's
own: they batch and queue) has no limit here.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass, field

from worthit.engine.sequence import Priority


class Slot:
    """One request's hold on a replica; `release()` may be called any number of times."""

    def __init__(self, slots: Slots, priority: Priority) -> None:
        self.priority = priority
        self.preempted = asyncio.Event()
        """Set when an interactive request needs this background request's slot."""
        self._slots = slots
        self._released = False

    @property
    def preemptible(self) -> bool:
        """Background work on a replica with a limit: an interactive request may take its slot."""
        return self.priority.is_background and self._slots.limit is not None

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._slots._release(self)


@dataclass(order=True)
class _Waiter:
    rank: int
    arrival: int
    future: asyncio.Future[None] = field(compare=False)
    slot: Slot = field(compare=False)


class Slots:
    """At most `limit` slots held at once (None: no limit, every request goes at once)."""

    def __init__(self, limit: int | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError("a replica's concurrency is at least 1")
        self.limit = limit
        self._held: list[Slot] = []
        self._waiting: list[_Waiter] = []
        self._arrivals = itertools.count()

    @property
    def held(self) -> int:
        return len(self._held)

    @property
    def waiting(self) -> int:
        return sum(not w.future.done() for w in self._waiting)

    def try_acquire(self, priority: Priority = Priority.BACKGROUND) -> Slot | None:
        """A slot now, or None when all are held or someone waits for one."""
        if self._has_room() and not self.waiting:
            return self._hold(Slot(self, priority))
        return None

    async def acquire(self, priority: Priority) -> Slot:
        """A slot, once one is free and every waiter ahead has had one. Cancelled while
        waiting (a deadline), it takes nothing."""
        slot = Slot(self, priority)
        if self._has_room() and not self.waiting:
            return self._hold(slot)
        waiter = _Waiter(priority.value, next(self._arrivals),
                         asyncio.get_running_loop().create_future(), slot)  # fmt: skip
        heapq.heappush(self._waiting, waiter)
        if not priority.is_background:
            self._preempt_one()
        try:
            await waiter.future
        except BaseException:
            if waiter.future.done() and not waiter.future.cancelled():
                slot.release()  # handed over as the wait was cancelled
            else:
                waiter.future.cancel()
            raise
        return slot

    def _has_room(self) -> bool:
        return self.limit is None or len(self._held) < self.limit

    def _hold(self, slot: Slot) -> Slot:
        self._held.append(slot)
        return slot

    def _preempt_one(self) -> None:
        """Free a slot for an interactive waiter: the latest background holder not already told."""
        if self._has_room():
            return
        for slot in reversed(self._held):
            if slot.priority.is_background and not slot.preempted.is_set():
                slot.preempted.set()
                return

    def _release(self, slot: Slot) -> None:
        if slot in self._held:
            self._held.remove(slot)
        while self._waiting and self._has_room():
            waiter = heapq.heappop(self._waiting)
            if not waiter.future.done():
                self._hold(waiter.slot)
                waiter.future.set_result(None)
