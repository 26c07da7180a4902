"""Several engine replicas behind one `EngineBackend`: prefix affinity, health, ejection.

Routing is consistent hashing with bounded loads (Mirrokni, Thorup and Zadimoghaddam,
"Consistent Hashing with Bounded Loads", SODA 2018): a request's key (its prompt's
leading part: for an explanation, the shared instructions and the product's own first
line) hashes to a point on a ring of virtual nodes, and goes to the first replica
clockwise whose in-flight load is under ceil(c · (m + 1) / n), m requests in flight over
n replicas. So one product's prompts land on one replica, whose prefix cache holds them,
until that replica is c times busier than the mean, and a replica joining or leaving
moves only the keys it takes or held.

Health: every request's outcome and a periodic probe (GET /v1/models) count; a replica
is ejected after `eject_after` consecutive failures and readmitted by its first healthy
probe. A connect failure is retried once on the next replica of the key's order. A
replica's concurrency (client.py, slots.py) bounds what it is sent at once; the ring's
loads count the requests waiting for its slots too.
`metrics` (remote/router_metrics.py) shows each replica's health, load and pace at /metrics.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import hashlib
import logging
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence

from worthit.engine.chat import ChatMessage, ChatTemplate
from worthit.engine.remote.client import (
    EngineUnavailableError,
    RemoteEngine,
    RemoteStream,
    RemoteTimeouts,
)
from worthit.engine.remote.router_metrics import RouterMetrics
from worthit.engine.sequence import DeadlinePolicy, FinishReason, Priority, SamplingParams
from worthit.engine.status import ReplicaStatus, RouterStatus
from worthit.engine.streams import Completion, Delta

log = logging.getLogger(__name__)

VIRTUAL_NODES = 64
"""Points per replica on the ring: spreads keys evenly enough for a few replicas."""
DEFAULT_BALANCE = 1.25
"""c: a replica takes new keys until it holds 1.25 times the mean load."""


def _point(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


class BoundedLoadRing:
    """The ring of replica names; `pick` places one request given the current loads."""

    def __init__(
        self,
        nodes: Iterable[str] = (),
        balance: float = DEFAULT_BALANCE,
        vnodes: int = VIRTUAL_NODES,
    ) -> None:
        if balance <= 1:
            raise ValueError("balance must be > 1 (1 would leave no slack to keep affinity)")
        self.balance = balance
        self.vnodes = vnodes
        self._points: list[int] = []
        self._owners: list[str] = []
        for node in nodes:
            self.add(node)

    @property
    def nodes(self) -> set[str]:
        return set(self._owners)

    def add(self, node: str) -> None:
        if node in self._owners:
            return
        for i in range(self.vnodes):
            point = _point(f"{node}#{i}")
            at = bisect.bisect(self._points, point)
            self._points.insert(at, point)
            self._owners.insert(at, node)

    def remove(self, node: str) -> None:
        keep = [(p, o) for p, o in zip(self._points, self._owners, strict=True) if o != node]
        self._points = [p for p, _ in keep]
        self._owners = [o for _, o in keep]

    def order(self, key: str) -> Iterator[str]:
        """Every node once, clockwise from the key's point: its preference order."""
        if not self._points:
            return
        start = bisect.bisect(self._points, _point(key))
        seen: set[str] = set()
        n = len(self._points)
        for i in range(n):
            owner = self._owners[(start + i) % n]
            if owner not in seen:
                seen.add(owner)
                yield owner

    def capacity(self, loads: Mapping[str, int]) -> int:
        """The load a node may reach by taking one more request: ceil(c·(m+1)/n)."""
        return math.ceil(self.balance * (sum(loads.values()) + 1) / len(loads))

    def pick(self, key: str, loads: Mapping[str, int]) -> str:
        """The first node in the key's order, among those in `loads`, with room."""
        if not loads:
            raise ValueError("no node to pick from")
        cap = self.capacity(loads)
        for node in self.order(key):
            if node in loads and loads[node] + 1 <= cap:
                return node
        raise AssertionError("c > 1 leaves room on some node")  # sum < n·cap always


def affinity_key(messages: Sequence[ChatMessage]) -> str:
    """The prompt's leading part: its system messages and the first line after them.
    worthit's explanation prompt puts the product there (prompt.py); another caller's
    prompts group by their opening line."""
    parts: list[str] = []
    for message in messages:
        if message.get("role") == "system":
            parts.append(message.get("content", ""))
            continue
        parts.append(message.get("content", "").split("\n", 1)[0])
        break
    return "\x1f".join(parts)


class Router:
    """The replicas at `urls` as one engine. `start()` (in the serving loop) reads their
    model ids, which must agree, and starts the probes; `aclose()` stops them."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        balance: float = DEFAULT_BALANCE,
        probe_interval_s: float = 1.0,
        eject_after: int = 2,
        timeouts: RemoteTimeouts | None = None,
        template: ChatTemplate | None = None,
    ) -> None:
        if not urls:
            raise ValueError("give at least one engine URL")
        engines = (RemoteEngine(url, timeouts=timeouts, template=template) for url in urls)
        self.replicas = {engine.base_url: engine for engine in engines}
        self.metrics = RouterMetrics(self.status)
        for replica in self.replicas.values():
            replica.health.threshold = eject_after
            replica.on_end = self.metrics.ended
        self.ring = BoundedLoadRing(self.replicas, balance)
        self.probe_interval_s = probe_interval_s
        self.model_id = ""
        self._probes: asyncio.Task[None] | None = None

    async def start(self, wait_s: float = 30.0) -> None:
        """Connect; wait up to `wait_s` for a first replica (they may start beside us).
        Raises EngineUnavailableError when none answers, or two serve different models."""
        give_up = time.monotonic() + wait_s
        while True:
            ids = await asyncio.gather(
                *(r.connect() for r in self.replicas.values()), return_exceptions=True
            )
            models = {i for i in ids if isinstance(i, str)}
            if models or time.monotonic() >= give_up:
                break
            await asyncio.sleep(0.2)
        if not models:
            raise EngineUnavailableError(f"no engine answered at {', '.join(self.replicas)}")
        if len(models) > 1:
            raise EngineUnavailableError(f"the engines serve different models: {sorted(models)}")
        self.model_id = models.pop()
        for replica, outcome in zip(self.replicas.values(), ids, strict=True):
            if not isinstance(outcome, str):
                replica.health.failures = replica.health.threshold
                replica.health.ejected = True
                log.warning("engine %s is down at start: %s", replica.base_url, outcome)
        self._probes = asyncio.create_task(self._probe_forever())

    async def aclose(self) -> None:
        if self._probes is not None:
            self._probes.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probes
        await asyncio.gather(*(r.aclose() for r in self.replicas.values()))

    def healthy(self) -> list[RemoteEngine]:
        return [r for r in self.replicas.values() if not r.health.ejected]

    def route(self, messages: Sequence[ChatMessage]) -> list[RemoteEngine]:
        """The replica for these messages, then the one to retry on if it cannot connect."""
        up = {r.base_url: r.in_flight for r in self.healthy()}
        if not up:
            return []
        key = affinity_key(messages)
        first = self.ring.pick(key, up)
        second = next((n for n in self.ring.order(key) if n in up and n != first), first)
        return [self.replicas[first], self.replicas[second]]

    def submit(
        self,
        *,
        messages: Sequence[ChatMessage] | None = None,
        params: SamplingParams | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
        answer_prefix: str = "",
        tenant: str | None = None,
    ) -> RemoteStream | NoReplicaStream:
        if messages is None:
            raise ValueError("a remote engine takes chat messages")
        targets = self.route(messages)
        if not targets:
            return NoReplicaStream()
        return targets[0].submit_to(
            targets, messages=messages, params=params, priority=priority,
            deadline_s=deadline_s, answer_prefix=answer_prefix, tenant=tenant,
        )  # fmt: skip

    async def submit_async(
        self,
        *,
        messages: Sequence[ChatMessage] | None = None,
        params: SamplingParams | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
        answer_prefix: str = "",
        deadline_policy: DeadlinePolicy = DeadlinePolicy.SENTENCE,
        tenant: str | None = None,
    ) -> RemoteStream | NoReplicaStream:
        """Plain chat for the OpenAI-compatible API: the replica's own deadline policy
        applies ("sentence" for worthit's), not the caller's."""
        return self.submit(
            messages=messages, params=params, priority=priority, deadline_s=deadline_s,
            answer_prefix=answer_prefix, tenant=tenant,
        )  # fmt: skip

    def status(self) -> RouterStatus:
        return RouterStatus(
            self.model_id,
            tuple(
                ReplicaStatus(
                    url=r.base_url,
                    model_id=r.model_id,
                    wire=r.wire.value,
                    healthy=not r.health.ejected,
                    in_flight=r.in_flight,
                    failures=r.health.failures,
                    ejections=r.health.ejections,
                    ttft_s=r.pace.ttft_s,
                    token_s=r.pace.token_s,
                    concurrency=r.slots.limit,
                    waiting=r.slots.waiting,
                )
                for r in self.replicas.values()
            ),
        )

    async def _probe_forever(self) -> None:
        while True:
            await asyncio.sleep(self.probe_interval_s)
            before = {r.base_url: r.health.ejected for r in self.replicas.values()}
            probed = await asyncio.gather(
                *(self._probe(r) for r in self.replicas.values()), return_exceptions=True
            )
            for failure in (p for p in probed if isinstance(p, Exception)):
                log.error("engine probe failed: %r", failure)  # the probes go on
            for replica in self.replicas.values():
                if before[replica.base_url] != replica.health.ejected:
                    state = "ejected" if replica.health.ejected else "readmitted"
                    log.warning("engine %s %s", replica.base_url, state)

    async def _probe(self, replica: RemoteEngine) -> None:
        if not replica.connected:
            try:
                model = await replica.connect()
            except EngineUnavailableError:
                replica.health.record(False)
                return
            if model != self.model_id:
                log.error("engine %s serves %s, not %s", replica.base_url, model, self.model_id)
                replica.connected = False
                replica.health.record(False)
                return
        await replica.probe()


class NoReplicaStream:
    """What a request gets when every replica is ejected: an engine error at once (the
    answer flow's template), not a connect attempt on a replica known to be down."""

    def __init__(self) -> None:
        self.request_id = "no-replica"
        self.completion: Completion | None = Completion(
            self.request_id, "", (), FinishReason.ERROR, 0, 0, 0, 0, 0, None, None, 0.0, 0.0
        )
        self._done = False

    def __aiter__(self) -> NoReplicaStream:
        return self

    async def __anext__(self) -> Delta:
        if self._done:
            raise StopAsyncIteration
        self._done = True
        return Delta(self.request_id, "", (), FinishReason.ERROR)

    def abort(self) -> None:
        self._done = True
