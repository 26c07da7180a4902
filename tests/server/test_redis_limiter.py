"""Tenant limits in Redis (service/redis_limiter.py) against the real Redis: two limiters,
as two workers, share one budget; the decisions are the in-process limiter's; and a Redis
that dies makes the limiter fail open to each worker's own buckets, then come back."""

from __future__ import annotations

import asyncio
import math
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worthit.service.ratelimit import LimitedBy, Limits, TenantLimiter
from worthit.service.redis_limiter import RedisLimiter

from redis_fixtures import PrivateRedis, private_redis, redis_prefix

__all__ = ["private_redis", "redis_prefix"]

SLOW = Limits(requests_per_minute=5, llm_tokens_per_minute=12)
"""Refilling one request takes 12 s and one token 5 s: no test below runs long enough for
either to come back, so what is admitted is what the capacity allows."""


@pytest.fixture
def workers(redis_url: str, redis_prefix: str) -> Iterator[tuple[RedisLimiter, RedisLimiter]]:
    first = RedisLimiter(redis_url, prefix=redis_prefix)
    second = RedisLimiter(redis_url, prefix=redis_prefix)
    yield first, second
    first.close()
    second.close()


def tenant() -> str:
    return "t-" + uuid.uuid4().hex[:10]


operations = st.lists(
    st.tuples(st.sampled_from([0, 1]), st.sampled_from(["request", "reserve", "refund"]),
              st.integers(0, 15)),
    min_size=1, max_size=40,
)  # fmt: skip


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=operations)
def test_two_workers_never_admit_more_requests_than_the_capacity_and_decide_as_one_process(
    workers: tuple[RedisLimiter, RedisLimiter], ops: list[tuple[int, str, int]]
) -> None:
    """Any interleaving of two workers' requests, token reservations and refunds on one
    tenant gets the decisions one in-process limiter would make (its clock stands still:
    Redis's moves, too little to matter at these rates), so the tenant's limits hold."""
    name = tenant()
    reference = TenantLimiter(clock=lambda: 0.0)
    admitted_requests = 0
    for worker, kind, amount in ops:
        limiter = workers[worker]
        if kind == "refund":
            limiter.refund(name, amount)
            reference.refund(name, amount)
            continue
        requests, tokens = (1, 0) if kind == "request" else (0, amount)
        got = limiter.admit(name, SLOW, tokens, requests=requests)
        want = reference.admit(name, SLOW, tokens, requests=requests)
        assert (got.allowed, got.limited_by) == (want.allowed, want.limited_by)
        if not got.allowed:
            assert got.retry_after > 0 and math.isclose(
                got.retry_after, want.retry_after, rel_tol=0.05, abs_tol=1.0
            )
        admitted_requests += requests if got.allowed else 0
    assert admitted_requests <= SLOW.requests_per_minute
    assert workers[0].failed_open == workers[1].failed_open == 0


def test_concurrent_workers_admit_exactly_the_capacity(
    workers: tuple[RedisLimiter, RedisLimiter],
) -> None:
    name, admitted, lock = tenant(), [], threading.Lock()
    limits = Limits(requests_per_minute=50, llm_tokens_per_minute=1000)

    def hammer(limiter: RedisLimiter) -> None:
        for _ in range(40):
            allowed = limiter.admit(name, limits).allowed
            with lock:
                admitted.append(allowed)

    threads = [threading.Thread(target=hammer, args=(workers[i % 2],)) for i in range(6)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    refilled = math.ceil((time.monotonic() - started) * 50 / 60)  # a slow host's allowance
    assert 50 <= sum(admitted) <= 50 + refilled and len(admitted) == 240


def test_the_advertised_wait_is_exact_and_a_cost_over_the_capacity_is_never_granted(
    workers: tuple[RedisLimiter, RedisLimiter],
) -> None:
    first, second = workers
    name = tenant()
    fast = Limits(requests_per_minute=1000, llm_tokens_per_minute=6000)  # 100 tokens/s
    assert first.admit(name, fast, 6000, requests=0).allowed
    refused = second.admit(name, fast, 5, requests=0)
    assert refused.limited_by is LimitedBy.LLM_TOKENS and 0 < refused.retry_after <= 0.05
    time.sleep(refused.retry_after)
    assert first.admit(name, fast, 5, requests=0).allowed  # the other worker waited for it
    never = first.admit(name, fast, 6001, requests=0)
    assert never.retry_after == math.inf and never.retry_after_header is None


def test_a_bucket_expires_once_it_would_be_full_again(
    workers: tuple[RedisLimiter, RedisLimiter], redis_url: str, redis_prefix: str
) -> None:
    name = tenant()
    assert workers[0].admit(name, SLOW, 3).allowed
    client = redis.Redis.from_url(redis_url)
    ttls = {key: client.pttl(key) for key in client.scan_iter(match=f"{redis_prefix}*{name}*")}
    client.close()
    assert sorted(ttls.values()) == [pytest.approx(61_000, abs=1_000)] * 2  # 60 s + 1 s


def test_async_admission_and_a_refund_on_the_loop_share_the_budget(
    workers: tuple[RedisLimiter, RedisLimiter],
) -> None:
    first, second = workers
    name = tenant()

    async def run() -> tuple[bool, bool, bool]:
        spent = await first.admit_async(name, SLOW, 12, requests=0)
        short = await first.admit_async(name, SLOW, 2, requests=0)
        first.refund(name, 6)  # sent without waiting, on the loop
        await first.aclose()  # waits for the refund
        return spent.allowed, short.allowed, second.admit(name, SLOW, 5, requests=0).allowed

    assert asyncio.run(run()) == (True, False, True)


def test_an_unreachable_redis_fails_open_to_the_workers_own_buckets_and_comes_back(
    private_redis: PrivateRedis,
) -> None:
    limiter = RedisLimiter(private_redis.url, retry_after_s=0.05)
    name = tenant()
    assert [limiter.admit(name, SLOW).allowed for _ in range(5)] == [True] * 5
    assert not limiter.admit(name, SLOW).allowed and limiter.problems() == []
    private_redis.kill()
    during = [limiter.admit(name, SLOW).allowed for _ in range(6)]
    assert during == [True] * 5 + [False]  # this worker's own budget, not nobody's
    assert limiter.failed_open == 6 and limiter.degraded
    assert "Redis at redis://127.0.0.1" in limiter.problems()[0]
    private_redis.start()  # an empty Redis: the shared bucket starts full again
    time.sleep(0.06)
    assert limiter.admit(name, SLOW).allowed
    assert limiter.problems() == [] and limiter.failed_open == 6
    limiter.close()
