"""Token buckets: per-tenant limits on requests and on LLM tokens.

A bucket holds up to ``capacity`` tokens and refills continuously at ``rate`` tokens per
second, so a tenant may burst up to ``capacity`` and sustain ``rate``. Refusals return
the exact wait instead of a bare "no", because the server owes the client a
``Retry-After`` and a client that waits that long must then succeed.

State is two floats per bucket updated lazily on each call (no timer thread), under a
lock because the server takes tokens from worker threads as well as the event loop.
The clock is injected so tests drive time instead of sleeping.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

Clock = Callable[[], float]
"""Seconds from an arbitrary origin that never go backwards (``time.monotonic``)."""

ULPS = 4
"""How many units in the last place of the clock and of the capacity a take may fall short.

``tokens + rate * ((now + wait) - now)`` can round to a hair below ``cost``; without this
slack a client that waited exactly the advertised time could be refused again. The
over-grant it allows is what the clock itself cannot resolve (``rate`` times a few ulps
of ``now``, nanoseconds' worth on a monotonic clock), far below one request or token.
"""

SECONDS_PER_MINUTE = 60.0


class TokenBucket:
    """One bucket; starts full."""

    def __init__(self, capacity: float, rate: float, clock: Clock = time.monotonic) -> None:
        _check_limits(capacity, rate)
        self._capacity = float(capacity)
        self._rate = float(rate)
        self._clock = clock
        self._tokens = self._capacity
        self._updated = clock()
        self._lock = threading.Lock()

    @property
    def capacity(self) -> float:
        return self._capacity

    @property
    def rate(self) -> float:
        return self._rate

    def available(self) -> float:
        """Tokens that could be taken right now."""
        with self._lock:
            self._refill()
            return self._tokens

    def wait_for(self, cost: float) -> float:
        """Seconds until ``cost`` tokens will be there (0.0 if now); takes nothing.

        ``math.inf`` when ``cost`` exceeds the capacity: waiting can never help.
        """
        _check_cost(cost)
        with self._lock:
            return self._wait(cost, self._refill())

    def try_take(self, cost: float = 1.0) -> float:
        """Take ``cost`` tokens and return 0.0, or take nothing and return the wait.

        The wait is exact for this bucket alone: calling again after that many seconds
        succeeds unless someone else took tokens in between. ``math.inf`` means the cost
        exceeds the capacity and will never be granted.
        """
        _check_cost(cost)
        with self._lock:
            wait = self._wait(cost, self._refill())
            if wait == 0.0:
                self._tokens = max(self._tokens - cost, 0.0)
            return wait

    def give_back(self, amount: float) -> None:
        """Return tokens reserved but not used (never above the capacity)."""
        _check_cost(amount)
        with self._lock:
            self._refill()
            self._tokens = min(self._tokens + amount, self._capacity)

    def set_limits(self, capacity: float, rate: float) -> None:
        """Change the limits in place, keeping what was already spent spent.

        Rebuilding a full bucket instead would let a tenant reset its limit by
        switching between keys that carry different limits.
        """
        _check_limits(capacity, rate)
        with self._lock:
            self._refill()
            self._capacity = float(capacity)
            self._rate = float(rate)
            self._tokens = min(self._tokens, self._capacity)

    def _refill(self) -> float:
        now = self._clock()
        elapsed = now - self._updated
        if elapsed > 0:
            self._tokens = min(self._capacity, self._tokens + elapsed * self._rate)
            self._updated = now
        return now

    def _wait(self, cost: float, now: float) -> float:
        slack = ULPS * (self._rate * math.ulp(max(abs(now), 1.0)) + math.ulp(self._capacity))
        if cost > self._capacity + slack:
            return math.inf
        deficit = cost - self._tokens
        if deficit <= slack:
            return 0.0
        return deficit / self._rate


class LimitedBy(StrEnum):
    """Which limit refused a request, for the 429's ``detail``."""

    REQUESTS = "requests"
    LLM_TOKENS = "llm_tokens"


@dataclass(frozen=True, slots=True)
class Admission:
    """The limiter's answer: allowed, or how long to wait and why."""

    retry_after: float
    """0.0 when allowed; seconds to wait otherwise (``math.inf``: never, cost too big)."""
    limited_by: LimitedBy | None = None

    @property
    def allowed(self) -> bool:
        return self.retry_after == 0.0

    @property
    def retry_after_header(self) -> str | None:
        """``Retry-After`` in whole seconds, rounded up; None when allowed or never."""
        if self.allowed or math.isinf(self.retry_after):
            return None
        return str(max(1, math.ceil(self.retry_after)))


@dataclass(frozen=True, slots=True)
class Limits:
    """Per-minute limits; a minute's worth is also the burst a tenant may spend at once."""

    requests_per_minute: int
    llm_tokens_per_minute: int


class Limiter(Protocol):
    """What the guard and the token budget charge: `TenantLimiter` in one process,
    `RedisLimiter` (service/redis_limiter.py) across the workers sharing one Redis."""

    def admit(
        self, tenant: str, limits: Limits, llm_tokens: int = 0, *, requests: int = 1
    ) -> Admission: ...

    async def admit_async(
        self, tenant: str, limits: Limits, llm_tokens: int = 0, *, requests: int = 1
    ) -> Admission: ...

    def refund(self, tenant: str, llm_tokens: int) -> None: ...


class _TenantBuckets:
    def __init__(self, limits: Limits, clock: Clock) -> None:
        self.limits = limits
        self.requests = TokenBucket(*_bucket_shape(limits.requests_per_minute), clock=clock)
        self.llm_tokens = TokenBucket(*_bucket_shape(limits.llm_tokens_per_minute), clock=clock)
        self.lock = threading.Lock()

    def apply(self, limits: Limits) -> None:
        if limits != self.limits:
            self.requests.set_limits(*_bucket_shape(limits.requests_per_minute))
            self.llm_tokens.set_limits(*_bucket_shape(limits.llm_tokens_per_minute))
            self.limits = limits


class TenantLimiter:
    """One request bucket and one LLM-token bucket per tenant.

    A request is admitted only if both buckets can pay, and then both pay: taking a
    request token and then refusing on LLM tokens would burn the tenant's requests on
    refusals. The LLM cost is a reservation (prompt plus ``max_tokens``); hand back what
    generation did not use with :meth:`refund`.
    """

    def __init__(self, clock: Clock = time.monotonic) -> None:
        self._clock = clock
        self._tenants: dict[str, _TenantBuckets] = {}
        self._lock = threading.Lock()

    def admit(
        self, tenant: str, limits: Limits, llm_tokens: int = 0, *, requests: int = 1
    ) -> Admission:
        """Charge ``requests`` requests and ``llm_tokens`` tokens, or nothing and say how
        long to wait (the guard charges a request, a handler reserves its tokens)."""
        buckets = self._buckets(tenant, limits)
        with buckets.lock:
            buckets.apply(limits)
            request_wait = buckets.requests.wait_for(requests) if requests else 0.0
            token_wait = buckets.llm_tokens.wait_for(llm_tokens) if llm_tokens else 0.0
            if request_wait == 0.0 and token_wait == 0.0:
                # Both buckets only gain tokens while this lock is held, so both takes succeed.
                if requests:
                    buckets.requests.try_take(requests)
                if llm_tokens:
                    buckets.llm_tokens.try_take(llm_tokens)
                return Admission(0.0)
        if token_wait > request_wait:
            return Admission(token_wait, LimitedBy.LLM_TOKENS)
        return Admission(request_wait, LimitedBy.REQUESTS)

    async def admit_async(
        self, tenant: str, limits: Limits, llm_tokens: int = 0, *, requests: int = 1
    ) -> Admission:
        """:meth:`admit`, for callers on the event loop (in process it never waits)."""
        return self.admit(tenant, limits, llm_tokens, requests=requests)

    def refund(self, tenant: str, llm_tokens: int) -> None:
        """Give back LLM tokens reserved by :meth:`admit` but not generated."""
        if llm_tokens <= 0:
            return
        with self._lock:
            buckets = self._tenants.get(tenant)
        if buckets is not None:
            buckets.llm_tokens.give_back(llm_tokens)

    def _buckets(self, tenant: str, limits: Limits) -> _TenantBuckets:
        with self._lock:
            buckets = self._tenants.get(tenant)
            if buckets is None:
                buckets = self._tenants[tenant] = _TenantBuckets(limits, self._clock)
            return buckets


def _bucket_shape(per_minute: int) -> tuple[float, float]:
    return float(per_minute), per_minute / SECONDS_PER_MINUTE


def _check_limits(capacity: float, rate: float) -> None:
    if not (capacity > 0 and math.isfinite(capacity)):
        raise ValueError(f"capacity must be a positive finite number, got {capacity!r}")
    if not (rate > 0 and math.isfinite(rate)):
        raise ValueError(f"rate must be a positive finite number, got {rate!r}")


def _check_cost(cost: float) -> None:
    if not (cost >= 0 and math.isfinite(cost)):
        raise ValueError(f"cost must be a non-negative finite number, got {cost!r}")
