"""Token buckets and the per-tenant limiter, driven by a fake clock (no sleeping)."""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.service.ratelimit import Admission, LimitedBy, Limits, TenantLimiter, TokenBucket


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


capacities = st.floats(min_value=0.5, max_value=1e5, allow_nan=False, allow_infinity=False)
rates = st.floats(min_value=1e-3, max_value=1e4, allow_nan=False, allow_infinity=False)
starts = st.floats(min_value=0.0, max_value=1e7, allow_nan=False, allow_infinity=False)
steps = st.lists(
    st.tuples(
        st.floats(min_value=0.0, max_value=30.0, allow_nan=False),  # seconds before the take
        st.floats(min_value=0.0, max_value=1.2, allow_nan=False),  # cost, as a share of capacity
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(capacity=capacities, rate=rates, start=starts, schedule=steps)
def test_never_grants_more_than_capacity_plus_refill_over_any_window(
    capacity: float, rate: float, start: float, schedule: list[tuple[float, float]]
) -> None:
    clock = FakeClock(start)
    bucket = TokenBucket(capacity, rate, clock=clock)
    grants: list[tuple[float, float]] = []  # (time, cost)
    for dt, share in schedule:
        clock.now += dt
        cost = share * capacity
        if bucket.try_take(cost) == 0.0:
            grants.append((clock.now, cost))
    # What the clock cannot resolve (see ratelimit.ULPS), plus float summation error.
    slack = 4 * (rate * math.ulp(max(clock.now, 1.0)) + math.ulp(capacity))
    # Every window [t_i, t_j] of the schedule, not just the whole run.
    for i, (t_i, _) in enumerate(grants):
        granted = 0.0
        for n, (t_j, cost) in enumerate(grants[i:], start=1):
            granted += cost
            allowed = capacity + rate * (t_j - t_i)
            assert granted <= allowed * (1 + 1e-12) + n * slack


@settings(max_examples=300, deadline=None)
@given(capacity=capacities, rate=rates, start=starts, schedule=steps, share=st.floats(0.0, 1.0))
def test_retry_after_is_exact(
    capacity: float, rate: float, start: float, schedule: list[tuple[float, float]], share: float
) -> None:
    clock = FakeClock(start)
    bucket = TokenBucket(capacity, rate, clock=clock)
    for dt, step_share in schedule:
        clock.now += dt
        bucket.try_take(step_share * capacity)
    cost = share * capacity
    wait = bucket.try_take(cost)
    if wait == 0.0:
        return
    assert math.isfinite(wait)
    if wait * rate > 1e-3:  # half the wait is a measurable shortfall: still refused
        before = clock.now
        clock.now = before + wait / 2
        assert bucket.try_take(cost) > 0.0
        clock.now = before
    clock.now += wait
    assert bucket.try_take(cost) == 0.0


def test_starts_full_and_refills_at_rate() -> None:
    clock = FakeClock()
    bucket = TokenBucket(10, 2, clock=clock)
    assert bucket.try_take(10) == 0.0
    assert bucket.try_take(1) == pytest.approx(0.5)
    clock.now += 0.5
    assert bucket.try_take(1) == 0.0
    clock.now += 100
    assert bucket.available() == 10  # never above capacity


def test_cost_above_capacity_is_never_granted() -> None:
    bucket = TokenBucket(5, 1, clock=FakeClock())
    assert bucket.try_take(6) == math.inf
    assert bucket.wait_for(6) == math.inf
    assert bucket.available() == 5  # nothing taken


def test_refusal_takes_nothing_and_give_back_is_capped() -> None:
    clock = FakeClock()
    bucket = TokenBucket(4, 1, clock=clock)
    bucket.try_take(3)
    assert bucket.try_take(2) == pytest.approx(1.0)
    assert bucket.available() == pytest.approx(1.0)
    bucket.give_back(100)
    assert bucket.available() == 4


@pytest.mark.parametrize(
    ("capacity", "rate"), [(0, 1), (1, 0), (-1, 1), (math.inf, 1), (1, math.nan)]
)
def test_rejects_nonsense_limits(capacity: float, rate: float) -> None:
    with pytest.raises(ValueError):
        TokenBucket(capacity, rate)


@pytest.mark.parametrize("cost", [-1.0, math.nan, math.inf])
def test_rejects_nonsense_costs(cost: float) -> None:
    with pytest.raises(ValueError, match="cost"):
        TokenBucket(1, 1).try_take(cost)


def test_concurrent_takes_never_overspend() -> None:
    bucket = TokenBucket(1000, 1, clock=FakeClock())  # the clock is frozen: no refill
    granted = [0] * 8

    def worker(slot: int) -> None:
        for _ in range(500):
            if bucket.try_take(1) == 0.0:
                granted[slot] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(granted) == 1000


# --- TenantLimiter -------------------------------------------------------------------

LIMITS = Limits(requests_per_minute=60, llm_tokens_per_minute=600)


def test_admit_charges_both_buckets() -> None:
    clock = FakeClock()
    limiter = TenantLimiter(clock=clock)
    for _ in range(60):
        assert limiter.admit("acme", LIMITS).allowed
    refused = limiter.admit("acme", LIMITS)
    assert refused == Admission(pytest.approx(1.0), LimitedBy.REQUESTS)
    assert refused.retry_after_header == "1"
    clock.now += 1.0
    assert limiter.admit("acme", LIMITS).allowed


def test_refused_on_llm_tokens_spends_no_request() -> None:
    clock = FakeClock()
    limiter = TenantLimiter(clock=clock)
    assert limiter.admit("acme", LIMITS, llm_tokens=550).allowed
    refused = limiter.admit("acme", LIMITS, llm_tokens=100)
    assert refused.limited_by is LimitedBy.LLM_TOKENS
    assert refused.retry_after == pytest.approx(5.0)  # 50 tokens short at 10 tokens/s
    # 59 requests are still left: the refusal did not take one.
    assert sum(limiter.admit("acme", LIMITS).allowed for _ in range(60)) == 59


def test_refund_returns_unused_llm_tokens() -> None:
    limiter = TenantLimiter(clock=FakeClock())
    assert limiter.admit("acme", LIMITS, llm_tokens=600).allowed
    assert not limiter.admit("acme", LIMITS, llm_tokens=200).allowed
    limiter.refund("acme", 450)  # generation used 150 of the 600 reserved
    assert limiter.admit("acme", LIMITS, llm_tokens=200).allowed
    limiter.refund("nobody", 10)  # a tenant never seen: nothing to do


def test_reservation_above_the_minute_limit_is_refused_for_good() -> None:
    admission = TenantLimiter(clock=FakeClock()).admit("acme", LIMITS, llm_tokens=601)
    assert admission.retry_after == math.inf
    assert admission.limited_by is LimitedBy.LLM_TOKENS
    assert admission.retry_after_header is None


def test_tenants_do_not_share_buckets() -> None:
    limiter = TenantLimiter(clock=FakeClock())
    one = Limits(requests_per_minute=1, llm_tokens_per_minute=10)
    assert limiter.admit("a", one).allowed
    assert not limiter.admit("a", one).allowed
    assert limiter.admit("b", one).allowed


def test_changed_limits_keep_what_was_spent() -> None:
    clock = FakeClock()
    limiter = TenantLimiter(clock=clock)
    for _ in range(60):
        limiter.admit("acme", LIMITS)
    bigger = Limits(requests_per_minute=120, llm_tokens_per_minute=600)
    refused = limiter.admit("acme", bigger)  # a second key with higher limits: still empty
    assert refused.retry_after == pytest.approx(0.5)  # but refills at 2/s now
    clock.now += 0.5
    assert limiter.admit("acme", bigger).allowed
