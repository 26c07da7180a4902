"""Admission: refuse a request at submission, in the caller's thread, or count it in.

A refusal is immediate, so the caller can answer without the LLM at once (the decision
flow sends its template text) instead of learning late that the deadline was missed.
The estimate is the one the scheduler expires waiting requests with (timing/budget.py), made
from the budget the scheduler last published plus the backlog: prompts submitted and
admitted but not yet picked up by the engine thread, which the published queue cannot
know about yet. Background requests are never refused for time, only when their own
queue is full, and they count in neither the interactive queue limit nor the interactive backlog.
"""

from __future__ import annotations

import threading

from worthit.engine.config import EngineConfig
from worthit.engine.errors import AdmissionRefusedError
from worthit.engine.metrics import EngineMetrics
from worthit.engine.sequence import Sequence
from worthit.engine.timing.budget import Estimator, PublishedBudget
from worthit.engine.timing.latency import StepTimeModel


class Admission:
    def __init__(
        self,
        config: EngineConfig,
        model: StepTimeModel,
        published: PublishedBudget,
        metrics: EngineMetrics,
    ) -> None:
        self.config = config
        self._estimator = Estimator(config, model)
        self._published = published
        self._metrics = metrics
        self._lock = threading.Lock()
        self._backlog = [0, 0, 0]
        """Uncached prompt tokens per interactive class, admitted but not yet picked up."""
        self._in_transit = [0, 0]
        """Interactive and background requests admitted but not yet picked up."""
        self.refused_for_time = 0
        """Requests refused because their deadline looked unmeetable, so far: the
        calibration re-measures when these grow (timing/step_calibration.py)."""

    def admit(self, seq: Sequence, now: float) -> None:
        """Raise AdmissionRefusedError when seq's queue is full or its deadline cannot
        be met; otherwise count it (and an interactive prompt into the backlog) until
        ``picked_up``."""
        budget = self._published.read()
        kind = int(seq.is_background)
        if kind:
            waiting, limit = budget.background_waiting, self.config.max_background_waiting
        else:
            waiting, limit = budget.waiting, self.config.max_waiting
        uncached = len(seq.prompt_tokens) - seq.cached_hint
        with self._lock:
            if waiting + self._in_transit[kind] >= limit:
                self._metrics.refusals.labels("queue_full").inc()
                raise AdmissionRefusedError(seq.request_id, "queue_full")
            if not kind and seq.deadline is not None:
                ahead = sum(self._backlog[: seq.priority.value + 1])
                needed = self._estimator.needed_s(
                    budget, seq.required_tokens, uncached + ahead, seq.priority
                )
                if now + needed > seq.deadline:
                    self.refused_for_time += 1
                    self._metrics.refusals.labels("deadline").inc()
                    raise AdmissionRefusedError(
                        seq.request_id, "deadline", needed, seq.deadline - now
                    )
            self._in_transit[kind] += 1
            if not kind:
                self._backlog[seq.priority.value] += uncached

    def picked_up(self, seq: Sequence) -> None:
        """The engine thread took seq in: the scheduler's next plan counts it."""
        kind = int(seq.is_background)
        with self._lock:
            self._in_transit[kind] -= 1
            if not kind:
                self._backlog[seq.priority.value] -= len(seq.prompt_tokens) - seq.cached_hint

    @property
    def backlog(self) -> tuple[int, int, int]:
        with self._lock:
            return (self._backlog[0], self._backlog[1], self._backlog[2])
