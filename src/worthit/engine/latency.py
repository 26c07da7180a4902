"""What a step costs, learned online, and the batch window it implies.

A llama_decode step on a CPU costs about ``overhead + per_token * n_tokens``, whether
the tokens are decode tokens or prefill tokens (both are one row through every matmul).
The two coefficients are fitted by least squares over exponentially weighted moments of
the observed (tokens, seconds) pairs, so the model follows load changes within tens of
steps. Admission, the token budget and the adaptive batch window all read this model.
"""

from __future__ import annotations

import math
import threading

SENTENCE_TOKENS_PRIOR = 18.0


class StepTimeModel:
    def __init__(
        self,
        overhead_s: float = 0.008,
        per_token_s: float = 0.004,
        forget: float = 0.95,
    ) -> None:
        self._forget = forget
        self._lock = threading.Lock()
        # Prior: two pseudo-observations on the prior line, at 1 and 32 tokens.
        self._w = 0.0
        self._n = self._t = self._nn = self._nt = 0.0
        self.overhead_s = overhead_s
        self.per_token_s = per_token_s
        for n in (1.0, 32.0):
            self._add(n, overhead_s + per_token_s * n, 1.0)
        self.step_ewma_s = overhead_s + per_token_s
        self.decode_step_ewma_s = self.step_ewma_s
        self.sentence_tokens = SENTENCE_TOKENS_PRIOR

    def observe(self, n_tokens: int, seconds: float, decode_only: bool = False) -> None:
        with self._lock:
            self._add(float(n_tokens), seconds, 1.0)
            self.step_ewma_s = 0.8 * self.step_ewma_s + 0.2 * seconds
            if decode_only:
                self.decode_step_ewma_s = 0.8 * self.decode_step_ewma_s + 0.2 * seconds
            self._fit()

    def observe_sentence(self, n_tokens: int) -> None:
        """Tokens one sentence took; the deadline stop needs the next one's length."""
        self.sentence_tokens = 0.8 * self.sentence_tokens + 0.2 * n_tokens

    def tpot_s(self, n_running: int) -> float:
        """Expected time per output token for a sequence joining n_running others, from
        the fit. (Not from an EWMA of decode-only steps: when admission refuses
        everything, no decode step runs, and a stale slow EWMA would keep refusing
        forever; the fit keeps learning from every step, prefix-warming ones included.)"""
        return self.predict(n_running + 1)

    def predict(self, n_tokens: int) -> float:
        return self.overhead_s + self.per_token_s * max(n_tokens, 0)

    def tokens_within(self, seconds: float) -> int:
        """Most tokens one step can carry and still take at most ``seconds``."""
        return max(0, math.floor((seconds - self.overhead_s) / self.per_token_s))

    def _add(self, n: float, t: float, weight: float) -> None:
        f = self._forget
        self._w = f * self._w + weight
        a = weight / self._w
        self._n += a * (n - self._n)
        self._t += a * (t - self._t)
        self._nn += a * (n * n - self._nn)
        self._nt += a * (n * t - self._nt)

    def _fit(self) -> None:
        var = self._nn - self._n * self._n
        if var > 1.0:
            slope = (self._nt - self._n * self._t) / var
            if slope > 1e-5:
                self.per_token_s = slope
        self.overhead_s = max(0.0, self._t - self.per_token_s * self._n)


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
