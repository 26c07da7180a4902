"""The start-up calibration: what admission prices the first requests with, before any
request has run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from worthit.engine.block_manager import BlockManager
from worthit.engine.config import EngineConfig
from worthit.engine.scheduler import Chunk
from worthit.engine.sequence import Priority
from worthit.engine.timing.budget import Estimator, StepBudget
from worthit.engine.timing.latency import StepTimeModel
from worthit.engine.timing.step_calibration import CALIBRATION_REPEATS, Calibration

from engine_fakes import FakeRunner

OVERHEAD_S = 0.005
PER_TOKEN_S = 0.002
"""A machine about as fast as the project's EPYC with SmolLM2-135M on two threads."""


class TimedRunner(FakeRunner):
    """A machine whose steps take overhead + per-token cost on a clock of its own, so the
    calibration's measurements are exact."""

    def __init__(
        self, overhead_s: float, per_token_s: float, slowed: frozenset[int] = frozenset()
    ) -> None:
        super().__init__()
        self.now = 0.0
        self.cost = (overhead_s, per_token_s)
        self.slowed = slowed
        """Steps (0-based) that another process makes 50 times slower."""

    def step(self, chunks: Sequence[Chunk], samplers: Mapping[int, object]) -> dict[int, int]:
        out = super().step(chunks, samplers)
        overhead, per_token = self.cost
        seconds = overhead + per_token * sum(len(c.tokens) for c in chunks)
        self.now += seconds * (50 if len(self.steps) - 1 in self.slowed else 1)
        return out

    def clock(self) -> float:
        return self.now


def calibrated(
    config: EngineConfig, slowed: frozenset[int] = frozenset()
) -> tuple[StepTimeModel, StepTimeModel]:
    """The interactive and background models of a fresh engine on the TimedRunner machine."""
    runner = TimedRunner(OVERHEAD_S, PER_TOKEN_S, slowed)
    live, background = StepTimeModel(), StepTimeModel()
    blocks = BlockManager(config.num_blocks, config.block_size, config.num_seq_ids, runner)
    Calibration(config, runner, live, blocks, background, clock=runner.clock).calibrate()
    return live, background


def test_the_start_calibration_leaves_the_measured_line_not_the_priors() -> None:
    live, background = calibrated(EngineConfig(n_threads=2, background_threads=1))
    for model in (live, background):
        assert model.overhead_s == pytest.approx(OVERHEAD_S)
        assert model.per_token_s == pytest.approx(PER_TOKEN_S)
        assert model.decode_step_ewma_s == pytest.approx(OVERHEAD_S + PER_TOKEN_S)


def test_a_fresh_engine_admits_what_this_machine_serves_in_time() -> None:
    """A cold 100-token prompt and 48 tokens take about 0.2 + 0.34 s here: inside an
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
    per_model = 2 * (1 + CALIBRATION_REPEATS)
    slowed = frozenset(i + offset for i in (1, 1 + per_model) for offset in (0, per_model // 2))
    live, background = calibrated(EngineConfig(n_threads=2, background_threads=1), slowed)
    for model in (live, background):
        assert model.overhead_s == pytest.approx(OVERHEAD_S)
        assert model.per_token_s == pytest.approx(PER_TOKEN_S)
