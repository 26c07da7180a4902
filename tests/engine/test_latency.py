"""The step-time model: what admission, the prefill budget and the batch window read."""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from worthit.engine.timing.latency import StepTimeModel


def line(a: float, b: float, n: int) -> float:
    return a + b * n


def test_a_run_of_same_sized_prefill_chunks_keeps_the_decode_cost():
    """The regression that refused every request: after prefix warming (many 80-token
    chunks) a least-squares fit put the overhead at 125 ms; a decode step costs ~10."""
    model = StepTimeModel()
    rnd = random.Random(3)
    a, b = 0.008, 0.003
    for _ in range(50):
        model.observe(1, line(a, b, 1) * rnd.uniform(0.9, 1.1), decode_only=True)
    for _ in range(300):
        model.observe(80, line(a, b, 80) * rnd.uniform(0.95, 1.05))
    assert abs(model.predict(1) - line(a, b, 1)) / line(a, b, 1) < 0.25
    assert abs(model.predict(80) - line(a, b, 80)) / line(a, b, 80) < 0.1


@settings(max_examples=200, deadline=None)
@example(a=0.0078125, b=0.0078125, sizes=[512, 512, 32, 512, 512, 32])
@example(a=0.015625, b=0.0078125, sizes=[32, 32, 32, 512, 32, 512, 512, 512])
@given(
    a=st.floats(0.001, 0.05),
    b=st.floats(0.0005, 0.01),
    sizes=st.lists(st.sampled_from([1, 2, 4, 8, 16, 32, 64, 128, 512]), min_size=1, max_size=8),
)
def test_mixed_steps_from_a_line_converge_to_it(a: float, b: float, sizes: list[int]) -> None:
    model = StepTimeModel()
    sizes = [1, *sizes, 64]  # at least one small and one large step size
    for i in range(3000):  # one small step in eight converges slowly: 1,000 were short
        n = sizes[i % len(sizes)]
        model.observe(n, line(a, b, n), decode_only=n < 16)
    for n in (1, 8, 100, 400):
        assert abs(model.predict(n) - line(a, b, n)) <= 0.05 * line(a, b, n) + 1e-4


def test_same_sized_prefill_steps_cannot_correct_a_stale_overhead_a_probe_can():
    """Why the engine re-probes when idle: with only prefill chunks, overhead and
    per-token cost are not separable, so a stale overhead stays; small steps fix it."""
    model = StepTimeModel(overhead_s=0.2, per_token_s=0.003)  # a slow spell's overhead
    for _ in range(100):
        model.observe(64, line(0.01, 0.003, 64))
    assert model.predict(64) == pytest.approx(line(0.01, 0.003, 64), rel=0.05)
    assert model.predict(1) > 0.1
    for _ in range(20):  # what the idle probe adds: one small and one large step
        model.observe(1, line(0.01, 0.003, 1), decode_only=True)
        model.observe(64, line(0.01, 0.003, 64))
    assert model.predict(1) < 0.02  # from 0.2, within 20 probes


def three(a: float, b: float, c: float, n: int, sampled: int) -> float:
    return a + b * n + c * sampled


@settings(max_examples=100, deadline=None)
@given(
    a=st.floats(0.001, 0.02),
    b=st.floats(0.0005, 0.005),
    share=st.floats(0.0, 1.5),
    slower=st.floats(0.6, 2.0),
)
def test_decode_steps_pay_a_sampled_row_each_and_follow_a_slower_machine(
    a: float, b: float, share: float, slower: float
) -> None:
    """Calibrated once, the model prices a step of n decoding sequences at n sampled rows
    and a prompt chunk at one; when the machine then runs `slower` times as fast, the
    steps it observes carry all three coefficients along (the per-sample cost as its
    share of the per-token cost)."""
    c = share * b
    model = StepTimeModel()
    model.remeasure(
        (1, three(a, b, c, 1, 0)), (64, three(a, b, c, 64, 0)), (1, three(a, b, c, 1, 1))
    )
    assert model.predict(4) == pytest.approx(three(a, b, c, 4, 4))
    assert model.predict(64, sampled=1) == pytest.approx(three(a, b, c, 64, 1))
    assert model.decoders_within(three(a, b, c, 3, 3) + 1e-9) == 3
    k = slower
    for i in range(400):
        n = (1, 2, 3, 64, 96)[i % 5]
        rows = n if n < 8 else 1
        model.observe(n, k * three(a, b, c, n, rows), rows, decode_only=n < 8)
    for n, rows in ((1, 1), (2, 2), (6, 6), (100, 1), (100, 3)):
        expected = k * three(a, b, c, n, rows)
        assert model.predict(n, sampled=rows) == pytest.approx(expected, rel=0.05)


def test_a_step_the_process_was_paused_in_teaches_nothing():
    """bench/engine.py stops the targets it is not running (SIGSTOP), as `docker pause` or
    a migrated VM would: a step caught by it took 30 s, and learnt, it priced every
    request for seconds after at minutes and refused them all. A slower machine is still
    followed."""
    model = StepTimeModel(overhead_s=0.008, per_token_s=0.003)
    for tokens, sampled in ((1, None), (64, 1)):
        before = (model.predict(1), model.predict(64, 1))
        model.observe(tokens, 30.0, sampled)
        assert (model.predict(1), model.predict(64, 1)) == before
    model.observe(1, 3 * model.predict(1), decode_only=True)
    assert model.predict(1) > before[0]
