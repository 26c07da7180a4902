"""Teaching the step-time model this machine's speed: once at start, and again when
idle after it can only have learnt from large steps.

At start a 64-token prefill and a 1-token decode on the real context set the model's
overhead and per-token cost: the line through those two steps replaces the priors, so the
first admissions decide from this machine's speed. The same 1-token step again with its
row sampled sets the per-sample cost (latency.py), which a step of several answers
decoding together pays once for each. Taught in at the model's EWMA weight
instead, the measurements would move the priors a fifth of the way, and a fresh engine on
a machine faster than the priors would price its first requests near twice their cost and
refuse most of what it can serve.

Later, the steps of traffic teach the model what they cost, and that is not always what a
lone decode step costs: a run of same-sized prefill chunks (prefix warming, or nothing but
refused traffic) cannot separate the coefficients, and a spell of several answers decoding
together left an overhead that priced a lone decode step half again too dear. An idle
engine's next request arrives alone, so after any traffic the first idle gap of
``IDLE_PROBE_S`` times a one-token decode step with its row sampled (fastest of three,
about 40 ms) and anchors the overhead to it (``StepTimeModel.anchor``).

A model measured too slow refuses every interactive request, and refused requests teach it
nothing: a start-up calibration taken while the machine was busy (the API workers of
`worthit serve --workers` importing and building their caches beside a niced engine) left
one engine process refusing every explanation for good. So when requests were refused for
time since the last measurement and no prompt chunk has taught the model since, an idle
engine calibrates again, at most once every ``RECALIBRATE_EVERY_S``, and less often while it
keeps finding the model right. Where prompts were computed since, the refusals were priced
by a per-token cost that real steps keep measuring, and the calibration would only hold up
the next arrival: its 64-token step cannot be stopped once started (about 200 ms on a slow
2-core host), and at 1 request a second 3 of 13 arrivals in a traced run met one and
expired.

Background steps run on ``background_threads``; when that is not ``n_threads`` they
are timed into a model of their own, calibrated at start the same way on those threads.
Background work keeps the engine from ever idling, so the engine also re-measures in
gaps of interactive traffic (engine.py).

Both run on the spare last sequence id, unused until the id pool runs dry, and only
from the engine thread (or before it starts).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

from worthit.engine.config import EngineConfig
from worthit.engine.detokenizer import Detokenizer
from worthit.engine.kv.block_manager import BlockManager
from worthit.engine.runner import Runner
from worthit.engine.scheduler import Chunk
from worthit.engine.sequence import SamplingParams, internal_sequence
from worthit.engine.timing.latency import StepTimeModel

log = logging.getLogger(__name__)

IDLE_PROBE_S = 0.25
"""Idle seconds after which a stale step-time model is re-measured: short, because
refused traffic leaves only short idle gaps."""
BACKGROUND_PROBE_EVERY_S = 5.0
"""Between background steps, a stale step-time model is re-measured at most this often."""
PROBE_TOKENS = 64
CALIBRATION_REPEATS = 2
"""Timed runs of each calibration step, the fastest kept: a step slowed by another process
taking a core for a moment (llama.cpp's threads then wait on each other) says nothing of
this machine's speed, and a calibration replaces the model with what it measured."""
ANCHOR_REPEATS = 3
"""Timed runs of the one-token step an idle engine anchors the overhead to."""
ONE_TOKEN_REPEATS = 8
"""Timed runs of each one-token calibration step: cheap (~10 ms), and the per-sample cost
is the difference of two of them, about 2 ms, which two runs each left anywhere from a
fifth to all of its value."""
RECALIBRATE_EVERY_S = 5.0
"""The least time between two calibrations prompted by refusals (each costs three 64-token
and eighteen 1-token steps per step-time model, each shape once more untimed)..."""
RECALIBRATE_AT_MOST_S = 300.0
"""...doubled, up to this, after each one that found the model right (a one-token step
within a quarter of its estimate: a model 60 % too dear refuses most of what fits):
deadlines too short for this machine are refused rightly, and re-measuring them every 5 s
would only spend the cores."""


class Calibration:
    def __init__(
        self,
        config: EngineConfig,
        runner: Runner,
        model: StepTimeModel,
        blocks: BlockManager,
        background_model: StepTimeModel | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`clock` times the probe steps (seconds; a test's machine may keep its own)."""
        self.config = config
        self.runner = runner
        self.model = model
        self.background_model = background_model or model
        self.blocks = blocks
        self.clock = clock
        self.seq_id = config.num_seq_ids - 1
        self.calibrations = 0
        self._calibrated_at = -float("inf")
        self._refused_at_calibration = 0
        self._taught_at_calibration = 0
        """The model's ``large_steps_seen`` when refusals were last weighed."""
        self._recalibrate_after_s = RECALIBRATE_EVERY_S

    def calibrate(self, refused: int = 0, arrived: Callable[[], bool] = lambda: False) -> bool:
        """Set the models to the line through a 64-token and a 1-token step timed on each
        model's threads: at start, where the models hold only priors, and for a model that
        refused, which blending would leave wrong for many more steps. `refused`: the
        admission's refusals for time so far. `arrived` is asked between steps: once it
        says work arrived, the calibration stops, keeps the model it has not finished
        measuring as it was, and returns False. All of it takes a second or more on a
        slow spell of a 2-core host, both models, and a request arriving meanwhile
        would wait for the rest of it."""
        text = "The quick brown fox jumps over the lazy dog. " * 16
        tokens = self.runner.tokenize(text, add_special=False)[:PROBE_TOKENS] or [1]
        end = len(tokens)
        runs = [
            (0, tokens, False, CALIBRATION_REPEATS),
            (end, tokens[:1], False, ONE_TOKEN_REPEATS),
            (end, tokens[:1], True, ONE_TOKEN_REPEATS),
        ]
        models = [self.model]
        if self.background_model is not self.model:
            models.insert(0, self.background_model)
        for model in models:
            timed = self._time_steps("calibration", runs, model, arrived)
            if len(timed) < len(runs):
                return False
            model.remeasure(timed[1], timed[0], timed[2])
        self._calibrated_at = self.clock()
        self._refused_at_calibration = refused
        self._taught_at_calibration = self.model.large_steps_seen
        self.calibrations += 1
        return True

    def recalibrate_if_refused(
        self, refused: int, arrived: Callable[[], bool] = lambda: False
    ) -> None:
        """Calibrate again, replacing the models, if requests were refused for time since
        the last calibration (`refused` counts them all so far) and no step of
        LARGE_STEP_TOKENS or more has taught the model since, it is old enough
        (`RECALIBRATE_EVERY_S`, doubling while the model proves right), and the spare
        sequence id and blocks for the probe are free. Only when the engine is idle, and
        never for an engine started without calibration (a test's fake runner keeps the
        model it was given). Work that `arrived` meanwhile stops it; the next idle gap
        tries again."""
        if self.calibrations == 0 or refused == self._refused_at_calibration:
            return
        taught = self.model.large_steps_seen
        if taught != self._taught_at_calibration:
            self._refused_at_calibration, self._taught_at_calibration = refused, taught
            return
        if self.clock() - self._calibrated_at < self._recalibrate_after_s:
            return
        needed = -(-PROBE_TOKENS // self.blocks.block_size)
        if not self.blocks.is_free(self.seq_id) or self.blocks.free_blocks < needed:
            return
        estimate = self.model.predict(1)
        if not self.calibrate(refused, arrived):
            return
        measured = self.model.predict(1)
        right = 0.8 <= measured / max(estimate, 1e-9) <= 1.25
        self._recalibrate_after_s = (
            min(2 * self._recalibrate_after_s, RECALIBRATE_AT_MOST_S)
            if right
            else RECALIBRATE_EVERY_S
        )
        log.log(
            logging.INFO if right else logging.WARNING,
            "engine re-calibrated after refusals: a one-token step %.1f ms (was %.1f ms)",
            measured * 1000, estimate * 1000,
        )  # fmt: skip

    def reprobe_if_stale(self, arrived: Callable[[], bool] = lambda: False) -> None:
        """If steps ran since the overhead was last anchored, time a one-token decode step
        with its row sampled (after an untimed one, the fastest of ANCHOR_REPEATS) and
        anchor the overhead to it (``StepTimeModel.anchor``): about 40 ms of an idle
        engine's time after each spell of traffic. Only with the spare sequence id and a
        KV block free; work that `arrived` meanwhile stops it."""
        if self.model.steps_since_anchor == 0 or not self.blocks.is_free(self.seq_id):
            return
        if self.blocks.free_blocks == 0:
            return
        token = self.runner.tokenize("The", add_special=False)[:1] or [1]
        timed = self._time_steps("probe", [(0, token, True, ANCHOR_REPEATS)], self.model, arrived)
        if timed:
            self.model.anchor(timed[0][1])

    def _time_steps(
        self,
        request_id: str,
        runs: list[tuple[int, list[int], bool, int]],
        model: StepTimeModel,
        arrived: Callable[[], bool],
    ) -> list[tuple[int, float]]:
        """Run each (start, tokens, sampled, repeats) step of `runs` on model's threads
        once untimed (it pays one-time costs: allocation, a graph of a new shape, a thread
        count set), then `repeats` times timed, and keep the fastest. A sampled step
        samples its last row, as a decode step does; the others sample none. (tokens,
        seconds) of each step timed in full before `arrived` said work arrived."""
        config = self.config
        background = model is self.background_model and model is not self.model
        self.runner.set_threads(config.background_threads if background else config.n_threads)
        probe = internal_sequence(request_id, runs[0][1], Detokenizer(self.runner.piece))
        sampler = self.runner.new_sampler(SamplingParams(max_tokens=1), 0)
        seq_id = self.seq_id
        timed: list[tuple[int, float]] = []
        try:
            for start, tokens, sampled, repeats in runs:
                step = [Chunk(probe, seq_id, start, list(tokens), sample=sampled)]
                fastest = math.inf
                for i in range(1 + repeats):
                    if arrived():
                        return timed
                    self.runner.truncate(seq_id, start)
                    t0 = self.clock()
                    self.runner.step(step, {seq_id: sampler})
                    if i:
                        fastest = min(fastest, self.clock() - t0)
                timed.append((len(tokens), fastest))
        finally:
            self.runner.free_sampler(sampler)
            self.runner.truncate(seq_id, 0)
        return timed
