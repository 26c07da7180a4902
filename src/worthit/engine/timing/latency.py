"""What a step costs, learned online, and the batch window it implies.

A llama_decode step on a CPU costs about ``overhead + per_token * n_tokens + per_sample *
n_sampled``. Every token is one row through the layers' matmuls, decode and prompt tokens
alike; a sampled row (a decoding sequence's token, a prompt's last) also goes through the
output matmul, 576 x 49,152 weights for SmolLM2-135M. On a 2-core EPYC, 2 threads, that
is 2.1-3.1 ms a row beside 2.7 ms a token, so two sequences decoding take 15.5-17 ms a
step where one coefficient fitted to prompts and single decodes says 11.3: a request
joining a running answer would be priced under its cost by a quarter of its decode
time. The per-sample cost is measured at calibration as a share of the per-token cost
and kept at that share, both being weights streamed through the same cores, which a
slow spell of the machine slows alike. The other two coefficients are learned as two
coupled EWMAs rather than by regression: small steps (decode) say what a step costs
beyond its tokens, large steps (prefill chunks) what each token costs beyond the
overhead, and nothing about the overhead: a large step's residual is the per-token error
times its size, so a 512-token chunk after 32-token ones fed the overhead's error back
into it, amplified (a mix of one decode step to nine prefill chunks settled at five
times the true overhead). A least-squares fit with forgetting went wrong in the way that
mattered: after a run of same-sized prefill chunks (prefix warming, 80 tokens each) the
tokens' spread vanished, the slope became noise, and the fitted overhead rose to 125 ms,
so admission refused every request. Steps of one size cannot separate the two
coefficients, so after any traffic the engine times a lone decode step when it is next
idle and anchors the overhead to it (``anchor``, ``steps_since_anchor``). Admission, the
token budget and the adaptive batch window all read this model.
"""

from __future__ import annotations

import math
import threading

SENTENCE_TOKENS_PRIOR = 18.0
LARGE_STEP_TOKENS = 32
"""Steps with at least this many tokens teach the per-token cost; smaller ones the
overhead."""
PAUSED_FACTOR = 10.0
PAUSED_FLOOR_S = 0.5
"""A step that took more than PAUSED_FACTOR times its price, and more than PAUSED_FLOOR_S,
was paused, not slow: the process was stopped (SIGSTOP, `docker pause`, a VM migrated) in
the middle of it, and it teaches nothing. `bench/engine.py` stops the targets it is not
running; steps caught by that stop taught models 5.7-7.8 s of overhead or 107-188 ms a
token, and each one refused every request for the first seconds of the next rate."""


class StepTimeModel:
    def __init__(
        self, overhead_s: float = 0.008, per_token_s: float = 0.004, sample_share: float = 0.0
    ) -> None:
        """`sample_share`: a sampled row's extra cost as a share of a token's (0 until a
        calibration measures it)."""
        self._lock = threading.Lock()
        self.overhead_s = overhead_s
        self.per_token_s = per_token_s
        self.sample_share = sample_share
        self.step_ewma_s = self.predict(1)
        self.decode_step_ewma_s = self.step_ewma_s
        self.sentence_tokens = SENTENCE_TOKENS_PRIOR
        self.large_steps_since_small = 0
        """Large steps since one last taught the overhead directly (prefill-only traffic
        cannot tell overhead from per-token cost)."""
        self.steps_since_anchor = 0
        """Steps taught since the overhead was last anchored to a one-token decode timed
        alone (``anchor``): when idle and this is not 0 the engine times one."""
        self.large_steps_seen = 0
        """Steps of at least LARGE_STEP_TOKENS taught so far, ever: while this grows, real
        steps keep measuring the per-token cost (timing/step_calibration.py)."""

    @property
    def per_sample_s(self) -> float:
        """What a sampled row costs on top of its token: the output matmul and the draw."""
        return self.sample_share * self.per_token_s

    def observe(
        self, n_tokens: int, seconds: float, sampled: int | None = None, decode_only: bool = False
    ) -> None:
        """A step of `n_tokens` took `seconds`; `sampled` of its rows were sampled (None:
        all of them, a decode step). A paused step (PAUSED_FACTOR) is not learnt."""
        n = max(1, n_tokens)
        rows = n if sampled is None else sampled
        with self._lock:
            self.steps_since_anchor += 1
            if seconds > max(PAUSED_FACTOR * self.predict(n, rows), PAUSED_FLOOR_S):
                return
            if n >= LARGE_STEP_TOKENS:
                per_token = (seconds - self.overhead_s) / (n + self.sample_share * rows)
                per_token = max(1e-5, per_token)
                self.per_token_s += 0.2 * (per_token - self.per_token_s)
                self.large_steps_since_small += 1
                self.large_steps_seen += 1
            else:
                overhead = max(0.0, seconds - self.per_token_s * n - self.per_sample_s * rows)
                self.overhead_s += 0.2 * (overhead - self.overhead_s)
                self.large_steps_since_small = 0
            self.step_ewma_s = 0.8 * self.step_ewma_s + 0.2 * seconds
            if decode_only:
                self.decode_step_ewma_s = 0.8 * self.decode_step_ewma_s + 0.2 * seconds

    def remeasure(
        self,
        small: tuple[int, float],
        large: tuple[int, float],
        sampled: tuple[int, float] | None = None,
    ) -> None:
        """Replace the coefficients with the line through two steps just timed, (tokens,
        seconds) each, neither sampling a row: for a model known to be wrong, which
        blending would leave wrong for many more steps. `sampled`: a third step of
        (tokens, seconds) with every row sampled, for the per-sample cost (kept as it is
        without one)."""
        (n_small, small_s), (n_large, large_s) = small, large
        with self._lock:
            per_token = max(1e-5, (large_s - small_s) / max(1, n_large - n_small))
            self.per_token_s = per_token
            self.overhead_s = max(0.0, small_s - per_token * n_small)
            if sampled is not None:
                n_rows, rows_s = sampled
                unsampled = self.overhead_s + per_token * n_rows
                self.sample_share = max(0.0, (rows_s - unsampled) / (per_token * max(1, n_rows)))
            self.step_ewma_s = self.decode_step_ewma_s = self.predict(1)
            self.large_steps_since_small = 0
            self.steps_since_anchor = 0

    def anchor(self, seconds: float) -> None:
        """A one-token decode step, its row sampled, timed alone on an idle engine: set the
        overhead so that such a step is priced at what it took. What an idle engine
        prices next is a request arriving alone, at this step time; the EWMAs learn the
        overhead from the steps of the traffic just served, several answers decoding
        together and prompt chunks beside them, and a model that fits those well may
        price a lone decode step half again too dear (11 ms of overhead where 4.7 was
        true, after a burst at 2 requests a second on the 2-core EPYC) and refuse the
        next arrivals, which then teach it nothing."""
        with self._lock:
            self.overhead_s = max(0.0, seconds - self.per_token_s - self.per_sample_s)
            self.decode_step_ewma_s = seconds
            self.large_steps_since_small = 0
            self.steps_since_anchor = 0

    def observe_sentence(self, n_tokens: int) -> None:
        """Tokens one sentence took; the deadline stop needs the next one's length."""
        self.sentence_tokens = 0.8 * self.sentence_tokens + 0.2 * n_tokens

    def tpot_s(self, n_running: int) -> float:
        """Expected time per output token for a sequence joining n_running others."""
        return self.predict(n_running + 1)

    def predict(self, n_tokens: int, sampled: int | None = None) -> float:
        """Seconds of a step of `n_tokens` of which `sampled` rows are sampled (None: all
        of them, a decode step)."""
        n = max(n_tokens, 0)
        rows = n if sampled is None else max(sampled, 0)
        return self.overhead_s + self.per_token_s * n + self.per_sample_s * rows

    def tokens_within(self, seconds: float, sampled: int = 1) -> int:
        """Most tokens one step with `sampled` sampled rows can carry and still take at
        most ``seconds``."""
        spare = seconds - self.overhead_s - self.per_sample_s * sampled
        return max(0, math.floor(spare / self.per_token_s))

    def decoders_within(self, seconds: float) -> int:
        """Most sequences one decode step can carry (a sampled token each) and still take
        at most ``seconds``."""
        per_decoder = self.per_token_s + self.per_sample_s
        return max(0, math.floor((seconds - self.overhead_s) / per_decoder))


class BatchWindow:
    """Adaptive number of sequences decoding together.

    Control law, each step: ``target = clamp(floor((T - a) / b), lo, hi)`` with ``T``
    the TPOT target and ``a``/``b`` the fitted overhead and per-token cost; the window
    then moves one sequence toward ``target`` per step (slew limit, so one noisy step
    cannot swing it). If the EWMA of decode-only step times exceeds ``1.25 T`` the
    window steps down regardless: the fit lags a sudden slowdown, the EWMA does not.
    """

    def __init__(self, model: StepTimeModel, target_s: float, lo: int, hi: int) -> None:
        self._model = model
        self.target_s = target_s
        self.lo = lo
        self.hi = hi
        self.size = hi

    def update(self, target_s: float | None = None) -> int:
        """One step of the control law; target_s overrides the TPOT target for this
        step (the scheduler passes its deadline-derived step budget)."""
        target = self.target_s if target_s is None else target_s
        fitted = self._model.decoders_within(target)
        goal = min(self.hi, max(self.lo, fitted))
        if self.size < goal:
            self.size += 1
        elif self.size > goal or self._model.decode_step_ewma_s > target * 1.25:
            self.size = max(self.lo, self.size - 1)
        return self.size
