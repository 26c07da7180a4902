"""What a step costs, learned online, and the batch window it implies.

A llama_decode step on a CPU costs about ``overhead + per_token * n_tokens``, whether
the tokens are decode tokens or prefill tokens (both are one row through every matmul).
The two coefficients are learned as two coupled EWMAs rather than by regression:
small steps (decode) say what a step costs beyond its tokens, large steps (prefill
chunks) what each token costs beyond the overhead. A least-squares fit with forgetting
went wrong in the way that mattered: after a run of same-sized prefill chunks (prefix
warming, 80 tokens each) the tokens' spread vanished, the slope became noise, and the
fitted overhead rose to 125 ms, so admission refused every request. Large steps still
move the overhead a little, but steps of one size cannot separate the two coefficients,
so after a run of large steps the engine re-measures a small and a large step when it
is next idle (``large_steps_since_small``). Admission, the token budget and the
adaptive batch window all read this model.
"""

from __future__ import annotations

import math
import threading

SENTENCE_TOKENS_PRIOR = 18.0
LARGE_STEP_TOKENS = 32
"""Steps with at least this many tokens teach the per-token cost; smaller ones the
overhead."""


class StepTimeModel:
    def __init__(self, overhead_s: float = 0.008, per_token_s: float = 0.004) -> None:
        self._lock = threading.Lock()
        self.overhead_s = overhead_s
        self.per_token_s = per_token_s
        self.step_ewma_s = overhead_s + per_token_s
        self.decode_step_ewma_s = self.step_ewma_s
        self.sentence_tokens = SENTENCE_TOKENS_PRIOR
        self.large_steps_since_small = 0
        """Large steps since one last taught the overhead directly: when idle and this is
        not 0 the engine re-probes (prefill-only traffic cannot tell overhead from
        per-token cost)."""

    def observe(self, n_tokens: int, seconds: float, decode_only: bool = False) -> None:
        with self._lock:
            n = max(1, n_tokens)
            if n >= LARGE_STEP_TOKENS:
                per_token = max(1e-5, (seconds - self.overhead_s) / n)
                self.per_token_s += 0.2 * (per_token - self.per_token_s)
                overhead_weight = 0.01
                self.large_steps_since_small += 1
            else:
                overhead_weight = 0.2
                self.large_steps_since_small = 0
            overhead = max(0.0, seconds - self.per_token_s * n)
            self.overhead_s += overhead_weight * (overhead - self.overhead_s)
            self.step_ewma_s = 0.8 * self.step_ewma_s + 0.2 * seconds
            if decode_only:
                self.decode_step_ewma_s = 0.8 * self.decode_step_ewma_s + 0.2 * seconds

    def remeasure(self, small: tuple[int, float], large: tuple[int, float]) -> None:
        """Replace both coefficients with the line through two steps just timed, (tokens,
        seconds) each: for a model known to be wrong, which blending would leave wrong
        for many more steps."""
        (n_small, small_s), (n_large, large_s) = small, large
        with self._lock:
            per_token = max(1e-5, (large_s - small_s) / max(1, n_large - n_small))
            self.per_token_s = per_token
            self.overhead_s = max(0.0, small_s - per_token * n_small)
            self.step_ewma_s = self.decode_step_ewma_s = small_s
            self.large_steps_since_small = 0

    def observe_sentence(self, n_tokens: int) -> None:
        """Tokens one sentence took; the deadline stop needs the next one's length."""
        self.sentence_tokens = 0.8 * self.sentence_tokens + 0.2 * n_tokens

    def tpot_s(self, n_running: int) -> float:
        """Expected time per output token for a sequence joining n_running others."""
        return self.predict(n_running + 1)

    def predict(self, n_tokens: int) -> float:
        return self.overhead_s + self.per_token_s * max(n_tokens, 0)

    def tokens_within(self, seconds: float) -> int:
        """Most tokens one step can carry and still take at most ``seconds``."""
        return max(0, math.floor((seconds - self.overhead_s) / self.per_token_s))


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
        fitted = self._model.tokens_within(target)
        goal = min(self.hi, max(self.lo, fitted))
        if self.size < goal:
            self.size += 1
        elif self.size > goal or self._model.decode_step_ewma_s > target * 1.25:
            self.size = max(self.lo, self.size - 1)
        return self.size
