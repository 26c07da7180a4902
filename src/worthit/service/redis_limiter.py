"""Tenant limits held in Redis, so they hold across every worker that shares it.

The same two buckets per tenant as `TenantLimiter` (requests, LLM tokens; a minute's
worth of capacity, refilled continuously), the same all-or-nothing admission and the same
exact waits, computed by one Lua script per call so that concurrent workers cannot both
spend the last token. The script reads Redis's own clock (TIME), not the caller's: the
workers' clocks need not agree, and a bucket is refilled by one clock only. A bucket is a
hash of its tokens, the microsecond it was last updated, and the limits it was filled
under (a change of limits keeps what was spent spent, as `TokenBucket.set_limits`). It
expires once it would be full again (capacity / rate), so idle tenants cost nothing and a
missing bucket means a full one.

When Redis cannot be reached the limiter fails open to this process's own in-process
buckets rather than refusing everyone: a tenant may then get up to one budget per worker
until Redis answers again, which is a smaller harm than an outage of every tenant for a
fault of the limiter's. It tries Redis again after `retry_after_s`, not on every request,
so an outage does not add a connect timeout to each one; `problems()` says so for /readyz.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from typing import Any

import redis
from redis.asyncio import Redis as AsyncRedis
from redis.backoff import NoBackoff
from redis.exceptions import RedisError
from redis.retry import Retry

from worthit.db.redis_outage import RedisOutage, ReportsOutage
from worthit.market.ingest.redis_stream import StreamConfig
from worthit.market.ingest.redis_stream import connect as connect_async
from worthit.service.ratelimit import (
    SECONDS_PER_MINUTE,
    Admission,
    LimitedBy,
    Limits,
    TenantLimiter,
    _check_cost,
    _check_limits,
)

log = logging.getLogger(__name__)

DEFAULT_PREFIX = "worthit:ratelimit:"
TIMEOUT_S = 0.25
"""A limiter that waits longer than this on Redis costs more than it protects."""
RETRY_AFTER_S = 1.0

_UNREACHABLE = (RedisError, OSError)

_BUCKET = """
local function bucket(key, cap, rate, now)
  local v = redis.call('HMGET', key, 't', 'u', 'c', 'r')
  local tokens = tonumber(v[1])
  if tokens == nil then return cap end
  local old_cap, old_rate = tonumber(v[3]), tonumber(v[4])
  local elapsed = (now - tonumber(v[2])) / 1e6
  if elapsed > 0 then tokens = math.min(old_cap, tokens + elapsed * old_rate) end
  return math.min(tokens, cap)
end
local function store(key, tokens, cap, rate, now)
  redis.call('HSET', key, 't', string.format('%.17g', tokens), 'u', string.format('%d', now),
             'c', string.format('%.17g', cap), 'r', string.format('%.17g', rate))
  redis.call('PEXPIRE', key, math.ceil(cap / rate * 1000) + 1000)
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
"""

ADMIT = (
    _BUCKET
    + """
-- KEYS: requests bucket, tokens bucket; ARGV: capacity, rate, cost of each (rates per s)
local function wait(tokens, cap, rate, cost)
  local slack = 4 * (rate * 1e-6 + cap * 2.220446049250313e-16)
  if cost > cap + slack then return -1 end
  local deficit = cost - tokens
  if deficit <= slack then return 0 end
  return deficit / rate
end
local have, waits = {}, {}
for i = 1, 2 do
  local cap, rate, cost = tonumber(ARGV[3*i-2]), tonumber(ARGV[3*i-1]), tonumber(ARGV[3*i])
  waits[i] = 0
  if cost > 0 then
    have[i] = bucket(KEYS[i], cap, rate, now)
    waits[i] = wait(have[i], cap, rate, cost)
  end
end
if waits[1] == 0 and waits[2] == 0 then
  for i = 1, 2 do
    local cap, rate, cost = tonumber(ARGV[3*i-2]), tonumber(ARGV[3*i-1]), tonumber(ARGV[3*i])
    if cost > 0 then store(KEYS[i], math.max(have[i] - cost, 0), cap, rate, now) end
  end
end
return {string.format('%.17g', waits[1]), string.format('%.17g', waits[2])}
"""
)

REFUND = (
    _BUCKET
    + """
-- KEYS: tokens bucket; ARGV: amount. A bucket that expired is full: nothing to give back.
local v = redis.call('HMGET', KEYS[1], 'c', 'r')
if v[1] == false then return 0 end
local cap, rate = tonumber(v[1]), tonumber(v[2])
store(KEYS[1], math.min(bucket(KEYS[1], cap, rate, now) + tonumber(ARGV[1]), cap), cap, rate, now)
return 1
"""
)


class RedisLimiter(ReportsOutage):
    """`TenantLimiter`'s interface and semantics, with the buckets in Redis."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = DEFAULT_PREFIX,
        fallback: TenantLimiter | None = None,
        timeout_s: float = TIMEOUT_S,
        retry_after_s: float = RETRY_AFTER_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.prefix = prefix
        self.where = StreamConfig(url).where
        self.fallback = fallback or TenantLimiter()
        """The in-process buckets used while Redis cannot be reached."""
        self.outage = RedisOutage(
            f"rate limits fall back to this worker's own: Redis at {self.where}",
            retry_after_s,
            clock,
        )
        self._sync = redis.Redis.from_url(
            url,
            socket_connect_timeout=timeout_s,
            socket_timeout=timeout_s,
            retry=Retry(NoBackoff(), 0),
        )
        self._async: AsyncRedis = connect_async(url, timeout_s)
        self._admit = self._sync.register_script(ADMIT)
        self._admit_async = self._async.register_script(ADMIT)
        self._refund = self._sync.register_script(REFUND)
        self._refund_async = self._async.register_script(REFUND)
        self._refunds: set[asyncio.Task[Any]] = set()
        self.failed_open = 0
        """Decisions taken by the in-process buckets because Redis could not be reached."""

    def admit(
        self, tenant: str, limits: Limits, llm_tokens: int = 0, *, requests: int = 1
    ) -> Admission:
        if self.outage.waiting:
            return self._open(tenant, limits, llm_tokens, requests)
        try:
            waits = self._admit(keys=self._keys(tenant), args=_args(limits, requests, llm_tokens))
        except _UNREACHABLE as exc:
            self.outage.failed(exc)
            return self._open(tenant, limits, llm_tokens, requests)
        self._up()
        return _admission(waits)

    async def admit_async(
        self, tenant: str, limits: Limits, llm_tokens: int = 0, *, requests: int = 1
    ) -> Admission:
        if self.outage.waiting:
            return self._open(tenant, limits, llm_tokens, requests)
        try:
            waits = await self._admit_async(
                keys=self._keys(tenant), args=_args(limits, requests, llm_tokens)
            )
        except _UNREACHABLE as exc:
            self.outage.failed(exc)
            return self._open(tenant, limits, llm_tokens, requests)
        self._up()
        return _admission(waits)

    def refund(self, tenant: str, llm_tokens: int) -> None:
        """Give back unused LLM tokens; on the event loop it is sent without waiting."""
        if llm_tokens <= 0:
            return
        self.fallback.refund(tenant, llm_tokens)
        if self.outage.waiting:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            try:
                self._refund(keys=[self._keys(tenant)[1]], args=[llm_tokens])
            except _UNREACHABLE as exc:
                self.outage.failed(exc)
            return
        task = loop.create_task(self._refund_later(tenant, llm_tokens))
        self._refunds.add(task)
        task.add_done_callback(self._refunds.discard)

    @property
    def degraded(self) -> bool:
        return self.last_error is not None

    def problems(self) -> list[str]:
        """The /readyz line while the limits are only per worker."""
        if self.last_error is None:
            return []
        return [
            f"rate limits: Redis at {self.where} is unreachable ({self.last_error}); each "
            "worker enforces the limits on its own until it answers"
        ]

    async def aclose(self) -> None:
        if self._refunds:
            await asyncio.gather(*self._refunds, return_exceptions=True)
        await self._async.aclose()
        self._sync.close()

    def close(self) -> None:
        self._sync.close()

    def _keys(self, tenant: str) -> list[str]:
        base = f"{self.prefix}{{{tenant}}}"
        return [base + ":requests", base + ":llm_tokens"]

    def _open(self, tenant: str, limits: Limits, llm_tokens: int, requests: int) -> Admission:
        self.failed_open += 1
        return self.fallback.admit(tenant, limits, llm_tokens, requests=requests)

    async def _refund_later(self, tenant: str, llm_tokens: int) -> None:
        try:
            await self._refund_async(keys=[self._keys(tenant)[1]], args=[llm_tokens])
        except _UNREACHABLE as exc:
            self.outage.failed(exc)

    def _up(self) -> None:
        if self.outage.up():
            log.info("rate limits are shared through Redis at %s again", self.where)


def _args(limits: Limits, requests: int, llm_tokens: int) -> list[float]:
    rpm, tpm = limits.requests_per_minute, limits.llm_tokens_per_minute
    for per_minute, cost in ((rpm, requests), (tpm, llm_tokens)):
        _check_limits(per_minute, per_minute / SECONDS_PER_MINUTE)
        _check_cost(cost)
    return [
        float(rpm), rpm / SECONDS_PER_MINUTE, float(requests),
        float(tpm), tpm / SECONDS_PER_MINUTE, float(llm_tokens),
    ]  # fmt: skip


def _admission(waits: list[bytes]) -> Admission:
    request_wait, token_wait = (_wait(raw) for raw in waits)
    if request_wait == 0.0 and token_wait == 0.0:
        return Admission(0.0)
    if token_wait > request_wait:
        return Admission(token_wait, LimitedBy.LLM_TOKENS)
    return Admission(request_wait, LimitedBy.REQUESTS)


def _wait(raw: bytes) -> float:
    value = float(raw)
    return math.inf if value < 0 else value
