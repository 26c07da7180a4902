"""A step's time budget, the queue it leaves, and the time estimates made from them.

The scheduler computes a ``StepBudget`` for every step and hands it on in the plan.
Its counts and queue are interactive work only: background work pauses whenever interactive work
arrives, so it neither slows nor delays an interactive request (beyond the one short step that
may be running when it arrives).
Admission runs in the callers' threads, so it never reads the scheduler's lists: it
reads the last budget the scheduler published, an immutable value swapped under a
lock (``PublishedBudget``), and estimates from it with the same ``Estimator`` the
scheduler uses to expire waiting requests, so a request is refused at submission by
exactly the test that would expire it later.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass

from worthit.engine.config import EngineConfig
from worthit.engine.sequence import Priority
from worthit.engine.timing.latency import StepTimeModel


@dataclass(frozen=True)
class StepBudget:
    """What one step plans with, and the state of the queue around it."""

    tpot_s: float
    """The step budget B = min(TPOT target, deadline_s): the batch window and the
    prefill share obey it."""
    deadline_s: float = math.inf
    """The step time every running deadline can still afford (infinite if none)."""
    queued_prefill: tuple[int, int, int] = (0, 0, 0)
    """Prefill tokens pending per interactive class (high, medium, low); background work is
    never counted: it pauses when interactive work arrives."""
    running: int = 0
    """Interactive requests holding KV (the counts below are interactive too, unless named)."""
    decoding: int = 0
    """Running sequences with one pending token: the streams a step must not stall."""
    waiting: int = 0
    background_running: int = 0
    """Background requests holding KV: generating in steps free of interactive work,
    paused otherwise."""
    background_waiting: int = 0
    leaving_after: tuple[int, ...] = ()
    """For each running interactive sequence that is decoding, the most steps it can still
    take (to its max_tokens, or to its deadline at the current step time), ascending: a
    request joining now decodes beside fewer of them as they end. A running sequence still
    prefilling is not here: it is counted as staying (``running``)."""


class PublishedBudget:
    """The latest budget, written by the engine thread, read by any thread."""

    def __init__(self, budget: StepBudget) -> None:
        self._lock = threading.Lock()
        self._budget = budget

    def publish(self, budget: StepBudget) -> None:
        with self._lock:
            self._budget = budget

    def read(self) -> StepBudget:
        with self._lock:
            return self._budget


class Estimator:
    """Time estimates from the fitted step-time model and a step budget."""

    def __init__(self, config: EngineConfig, model: StepTimeModel) -> None:
        self.config = config
        self.model = model

    def prefill_per_step(self, tpot_s: float, decoding: int) -> int:
        """Prefill tokens a step may carry. With nobody decoding there is no stream to
        protect and prompts go in large chunks, but no step may outlast max_step_s: a
        request arriving meanwhile waits for the step to end."""
        config = self.config
        if decoding == 0:
            fit_idle = self.model.tokens_within(config.max_step_s)
            return min(config.max_batch_tokens, max(config.min_prefill_chunk, fit_idle))
        fit = self.model.tokens_within(tpot_s, sampled=decoding + 1) - decoding
        return max(config.min_prefill_chunk, min(fit, config.max_batch_tokens - decoding))

    def first_token_s(
        self, budget: StepBudget, uncached: int, priority: Priority, already_queued: int = 0
    ) -> float:
        """Seconds until a request's first token, from the queue ahead of it (same or
        higher class, less its own already_queued tokens) and the fitted step cost."""
        ahead = max(0, sum(budget.queued_prefill[: priority.value + 1]) - already_queued)
        work = ahead + max(uncached, 1)
        per_step = self.prefill_per_step(budget.tpot_s, budget.decoding)
        steps = math.ceil(work / per_step)
        step_tokens = min(self.config.max_batch_tokens, budget.running + min(work, per_step))
        chunk_s = self.model.predict(step_tokens, sampled=budget.decoding)
        return steps * chunk_s + self.model.per_sample_s  # the prompt's last row is sampled

    def needed_s(
        self,
        budget: StepBudget,
        required_tokens: int,
        uncached: int,
        priority: Priority,
        already_queued: int = 0,
    ) -> float:
        """Seconds until a request has streamed the tokens its deadline promises."""
        first = self.first_token_s(budget, uncached, priority, already_queued)
        return first + self.decode_s(budget, required_tokens)

    def decode_s(self, budget: StepBudget, tokens: int) -> float:
        """Seconds to decode `tokens` beside the running set, each decoding sequence
        leaving the batch once it has taken the steps it can still take
        (``leaving_after``). Priced as if all of them stayed, a request arriving while
        one answer was near its end was refused on this 2-core host (48 tokens at the
        step time of two, about 830 ms against an 800 ms deadline) where it would have
        run alone after a few steps."""
        batch = budget.running + 1
        left = max(tokens, 0)
        total = done = 0.0
        for steps in budget.leaving_after[: budget.running]:
            span = min(steps, left) - done
            if span > 0:
                total += span * self.model.predict(batch)
                done += span
            if done >= left:
                return total
            batch -= 1
        return total + (left - done) * self.model.predict(batch)
