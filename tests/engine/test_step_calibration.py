"""The start-up calibration: what admission prices the first requests with, before any
request has run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from worthit.engine.config import EngineConfig
from worthit.engine.kv.block_manager import BlockManager
from worthit.engine.scheduler import Chunk
from worthit.engine.sequence import Priority
from worthit.engine.timing.budget import Estimator, StepBudget
from worthit.engine.timing.latency import StepTimeModel
from worthit.engine.timing.step_calibration import (
    CALIBRATION_REPEATS,
    ONE_TOKEN_REPEATS,
    Calibration,
)

from engine_fakes import FakeRunner

OVERHEAD_S = 0.005
PER_TOKEN_S = 0.002
PER_SAMPLE_S = 0.0025
"""A machine about as fast as the project's EPYC with SmolLM2-135M on two threads: a
sampled row (the output matmul) costs more than a token through the layers."""


class TimedRunner(FakeRunner):
    """A machine whose steps take overhead + per-token + per-sampled-row cost on a clock
    of its own, so the calibration's measurements are exact."""

    def __init__(
        self,
        overhead_s: float,
        per_token_s: float,
        per_sample_s: float,
        slowed: frozenset[int] = frozenset(),
    ) -> None:
        super().__init__()
        self.now = 0.0
        self.cost = (overhead_s, per_token_s, per_sample_s)
        self.slowed = slowed
        """Steps (0-based) that another process makes 50 times slower."""

    def step(self, chunks: Sequence[Chunk], samplers: Mapping[int, object]) -> dict[int, int]:
        out = super().step(chunks, samplers)
        overhead, per_token, per_sample = self.cost
        seconds = overhead + per_token * sum(len(c.tokens) for c in chunks)
        seconds += per_sample * sum(1 for c in chunks if c.sample)
        self.now += seconds * (50 if len(self.steps) - 1 in self.slowed else 1)
        return out

    def clock(self) -> float:
        return self.now


def calibrated(
    config: EngineConfig, slowed: frozenset[int] = frozenset()
) -> tuple[StepTimeModel, StepTimeModel]:
    """The interactive and background models of a fresh engine on the TimedRunner machine."""
    runner = TimedRunner(OVERHEAD_S, PER_TOKEN_S, PER_SAMPLE_S, slowed)
    live, background = StepTimeModel(), StepTimeModel()
    blocks = BlockManager(config.num_blocks, config.block_size, config.num_seq_ids, runner)
    Calibration(config, runner, live, blocks, background, clock=runner.clock).calibrate()
    return live, background


def interactive_calibration() -> tuple[TimedRunner, StepTimeModel, Calibration]:
    """A default engine's calibration of its one step-time model on the TimedRunner
    machine, not yet run."""
    config = EngineConfig()
    runner = TimedRunner(OVERHEAD_S, PER_TOKEN_S, PER_SAMPLE_S)
    model = StepTimeModel()
    blocks = BlockManager(config.num_blocks, config.block_size, config.num_seq_ids, runner)
    return runner, model, Calibration(config, runner, model, blocks, clock=runner.clock)


def test_the_start_calibration_leaves_the_measured_line_not_the_priors() -> None:
    live, background = calibrated(EngineConfig(n_threads=2, background_threads=1))
    for model in (live, background):
        assert model.overhead_s == pytest.approx(OVERHEAD_S)
        assert model.per_token_s == pytest.approx(PER_TOKEN_S)
        assert model.per_sample_s == pytest.approx(PER_SAMPLE_S)
        assert model.per_sample_s == pytest.approx(PER_SAMPLE_S)
        assert model.decode_step_ewma_s == pytest.approx(OVERHEAD_S + PER_TOKEN_S + PER_SAMPLE_S)


def test_two_answers_decoding_together_are_priced_a_sampled_row_each() -> None:
    """A request joining a running answer decodes beside it: each step samples two rows.
    Priced with one per-token cost fitted to a prompt and a single decode, such a step
    looked 2.5 ms cheaper than it is here, 120 ms over 48 tokens: the joiner was admitted
    to miss its deadline and slowed the answer beside it."""
    config = EngineConfig()
    live, _ = calibrated(config)
    two = OVERHEAD_S + 2 * (PER_TOKEN_S + PER_SAMPLE_S)
    assert live.predict(2) == pytest.approx(two)
    assert live.tpot_s(1) == pytest.approx(two)
    beside_one = StepBudget(config.tpot_target_s, running=1, decoding=1, leaving_after=(48,))
    estimator = Estimator(config, live)
    assert estimator.decode_s(beside_one, 48) == pytest.approx(48 * two)
    prompt = OVERHEAD_S + 40 * PER_TOKEN_S + PER_SAMPLE_S  # one chunk, its last row sampled
    assert estimator.first_token_s(StepBudget(config.tpot_target_s), 40, Priority.MEDIUM) == (
        pytest.approx(prompt)
    )


def test_a_fresh_engine_admits_what_this_machine_serves_in_time() -> None:
    """A cold 100-token prompt and 48 tokens take about 0.21 + 0.46 s here: inside an
    800 ms deadline from the first request on, as the priors alone would not say."""
    config = EngineConfig()
    live, _ = calibrated(config)
    idle = StepBudget(config.tpot_target_s)

    def needed_s(model: StepTimeModel) -> float:
        return Estimator(config, model).needed_s(idle, 48, 100, Priority.MEDIUM)

    assert needed_s(live) < 0.8
    assert needed_s(StepTimeModel()) > 0.8


def test_a_probe_step_slowed_for_a_moment_does_not_set_the_model() -> None:
    """Another process taking a core during one calibration step (llama.cpp's threads then
    wait on each other) must not leave a fresh engine pricing every request at that step's
    cost: of each step's timed runs, the fastest counts. Here every step shape of both
    models has one of its timed runs slowed fifty times."""
    # of each shape, one untimed run, then the timed ones: a prompt, a decode step, a
    # decode step sampling its row
    runs = (1 + CALIBRATION_REPEATS, 1 + ONE_TOKEN_REPEATS, 1 + ONE_TOKEN_REPEATS)
    starts = [sum(runs[:shape]) for shape in range(len(runs))]
    slowed = frozenset(first + start + 1 for first in (0, sum(runs)) for start in starts)
    live, background = calibrated(EngineConfig(n_threads=2, background_threads=1), slowed)
    for model in (live, background):
        assert model.overhead_s == pytest.approx(OVERHEAD_S)
        assert model.per_token_s == pytest.approx(PER_TOKEN_S)
        assert model.per_sample_s == pytest.approx(PER_SAMPLE_S)


def test_work_arriving_stops_a_calibration_which_leaves_the_model_as_it_was() -> None:
    """A re-calibration runs in an idle gap, and all of it (three step shapes, each timed
    several times, for each model) takes a second or more on a slow spell of a 2-core
    host: a request arriving meanwhile must not wait for the rest. Stopped, it leaves the
    model it had not finished as it was and frees the probe's KV; run again in full, it
    measures the machine as it is now."""
    runner, model, calibration = interactive_calibration()
    assert calibration.calibrate()
    before = model.predict(1)
    runner.cost = (2 * OVERHEAD_S, 2 * PER_TOKEN_S, 2 * PER_SAMPLE_S)  # a slow spell
    started = len(runner.steps)
    assert not calibration.calibrate(refused=3, arrived=lambda: len(runner.steps) >= started + 3)
    assert len(runner.steps) == started + 3
    assert model.predict(1) == before
    assert calibration.seq_id not in runner.kv
    assert calibration.calibrate(refused=3)
    assert model.predict(1) == pytest.approx(2 * before)


def test_an_idle_engine_prices_a_lone_decode_step_at_what_it_takes() -> None:
    """After a spell of several answers decoding together the overhead the EWMAs learnt
    can price a lone decode step half again too dear (11 ms where 4.7 was true after a
    burst at 2 requests a second): the next arrival, alone, would be refused. Idle after
    traffic, the engine times such a step and anchors the overhead to it; with nothing
    run since, it times nothing."""
    runner, model, calibration = interactive_calibration()
    calibration.calibrate()
    for _ in range(20):  # three answers decoding together, each step 6 ms dearer
        model.observe(3, OVERHEAD_S + 3 * (PER_TOKEN_S + PER_SAMPLE_S) + 0.006, 3, True)
    lone = OVERHEAD_S + PER_TOKEN_S + PER_SAMPLE_S
    assert model.predict(1) > 1.5 * lone
    calibration.reprobe_if_stale()
    assert model.predict(1) == pytest.approx(lone)
    assert calibration.seq_id not in runner.kv
    steps = len(runner.steps)
    calibration.reprobe_if_stale()
    assert len(runner.steps) == steps


def test_refusals_while_prompts_teach_the_model_start_no_calibration() -> None:
    """Its 64-token step cannot be stopped once started, and an arrival waits for it: at
    1 request a second on a slow 2-core host requests admitted at 0.70 s of an 800 ms
    deadline expired 200 ms later, waiting for one. Refusals priced by a per-token cost
    that computed prompts keep measuring start none; refusals after nothing was computed
    since (the model refusing everything) still do."""
    runner, model, calibration = interactive_calibration()
    assert calibration.calibrate()
    runner.now += 60.0  # old enough to calibrate again
    for _ in range(3):  # prompt chunks of the traffic, each timed into the model
        model.observe(64, OVERHEAD_S + 64 * PER_TOKEN_S + PER_SAMPLE_S, sampled=1)
    steps = len(runner.steps)
    calibration.recalibrate_if_refused(refused=3)
    assert len(runner.steps) == steps
    runner.cost = (2 * OVERHEAD_S, 2 * PER_TOKEN_S, 2 * PER_SAMPLE_S)  # a slow spell
    before = model.predict(1)
    calibration.recalibrate_if_refused(refused=5)  # refused again, nothing computed since
    assert len(runner.steps) > steps
    assert model.predict(1) == pytest.approx(2 * before, rel=0.05)
