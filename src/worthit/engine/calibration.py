"""Teaching the step-time model this machine's speed: once at start, and again when
idle after it can only have learnt from large steps.

At start a 64-token prefill and a 1-token decode on the real context seed the model's
overhead and per-token cost, so that the first admissions decide from measurements, not
priors. Later, a run of same-sized prefill chunks (prefix warming, or nothing but
refused traffic) cannot separate the two coefficients (latency.py): a bench run found
the model stuck with a stale overhead and every request refused at 2 requests/s. So
after large steps only, the first idle gap of ``IDLE_PROBE_S`` times two one-token
steps (~20 ms), which pulls the overhead back.

Background steps run on ``background_threads``; when that is not ``n_threads`` they
are timed into a model of their own, calibrated at start the same way on those threads.
Background work keeps the engine from ever idling, so the engine also re-measures in
gaps of live traffic (engine.py).

Both run on the spare last sequence id, unused until the id pool runs dry, and only
from the engine thread (or before it starts).
"""

from __future__ import annotations

import time

from worthit.engine.block_manager import BlockManager
from worthit.engine.config import EngineConfig
from worthit.engine.detokenizer import Detokenizer
from worthit.engine.latency import StepTimeModel
from worthit.engine.runner import Runner
from worthit.engine.scheduler import Chunk
from worthit.engine.sequence import internal_sequence

IDLE_PROBE_S = 0.25
"""Idle seconds after which a stale step-time model is re-measured: short, because
refused traffic leaves only short idle gaps."""
PROBE_TOKENS = 64


class Calibration:
    def __init__(
        self,
        config: EngineConfig,
        runner: Runner,
        model: StepTimeModel,
        blocks: BlockManager,
        background_model: StepTimeModel | None = None,
    ) -> None:
        self.config = config
        self.runner = runner
        self.model = model
        self.background_model = background_model or model
        self.blocks = blocks
        self.seq_id = config.num_seq_ids - 1

    def calibrate(self) -> None:
        text = "The quick brown fox jumps over the lazy dog. " * 16
        tokens = self.runner.tokenize(text, add_special=False)[:PROBE_TOKENS] or [1]
        end = len(tokens)
        runs = [(0, tokens), (0, tokens), (end, tokens[:1]), (end, tokens[:1])]
        if self.background_model is not self.model:
            self._time_steps("calibration", runs, self.background_model)
        self._time_steps("calibration", runs, self.model)

    def reprobe_if_stale(self) -> None:
        """Time two one-token steps if only large steps were seen since the last small
        one, and the spare sequence id and a KV block are free."""
        if self.model.large_steps_since_small == 0 or not self.blocks.is_free(self.seq_id):
            return
        if self.blocks.free_blocks == 0:
            return
        token = self.runner.tokenize("The", add_special=False)[:1] or [1]
        self._time_steps("probe", [(0, token), (0, token)], self.model)

    def _time_steps(
        self, request_id: str, runs: list[tuple[int, list[int]]], model: StepTimeModel
    ) -> None:
        """Run pairs of steps on model's threads and teach it the second of each pair:
        the first pays one-time costs (allocation, a graph of a new shape, a thread
        count set)."""
        config = self.config
        background = model is self.background_model and model is not self.model
        self.runner.set_threads(config.background_threads if background else config.n_threads)
        probe = internal_sequence(request_id, runs[0][1], Detokenizer(self.runner.piece))
        for i, (start, chunk) in enumerate(runs):
            self.runner.truncate(self.seq_id, start)
            t0 = time.perf_counter()
            self.runner.step([Chunk(probe, self.seq_id, start, list(chunk), sample=False)], {})
            if i % 2:
                model.observe(len(chunk), time.perf_counter() - t0, len(chunk) == 1)
        self.runner.truncate(self.seq_id, 0)
