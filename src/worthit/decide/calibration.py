"""Calibrated confidence: how often advice of one kind, in one category, turned out right.

A rule's confidence is a judgement written into the rules; calibration checks it against
what happened. For each (verdict, category) the evidence is a count of successes s and
failures f, and an answer whose rule said c gets the mean of the Beta posterior

    Beta(c·k + s, (1 − c)·k + f),  k = PRIOR_STRENGTH = 10,

so the rule's own c counts as ten observations: with no evidence the calibrated value is
c itself, after ten it is halfway to the observed rate, after a few hundred it is the
observed rate. The prior is per answer (each answer's own c) and the evidence shared, so
two answers of one kind keep their order however much evidence there is.

What counts as "the advice was right":

- from the backtest (decide/backtest.py), what the prices did next: a BUY succeeds unless
  a price at least `LOWER_AFTER_BUY` (5 %) lower came within the horizon; a WAIT succeeds
  when the shopper who followed it paid less than buying at once (paying the same is a
  failure: the wait bought nothing). SKIP and INSUFFICIENT_DATA buy nothing and score
  nothing.
- from feedback, what the shopper did (`FEEDBACK_SUCCESS`): a BUY that was bought and
  kept succeeds, one that was returned fails; a WAIT the shopper waited on succeeds, one
  they bought at once anyway fails (the wait did not hold up for them); a SKIP fails when
  the shopper bought anyway (and kept it) and succeeds when they returned it. Every other
  pair (a dismissed answer, a BUY the shopper waited on) says nothing about the advice and
  is stored but not counted. The prices are the stronger evidence for WAIT; feedback is
  the only evidence of what a shopper thought of a purchase.

INSUFFICIENT_DATA is not advice and gets no calibrated confidence.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

from worthit.decide.as_of import end_of_day_ms
from worthit.decide.backtest import LOWER_AFTER_BUY, Outcome, ReplayPlan, replay
from worthit.decide.feedback import Answered, BacktestTally, Feedback, FeedbackStore, Recorded
from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import VerdictKind
from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache

PRIOR_STRENGTH = 10.0
"""How many observations the rule's own confidence is worth."""
CREDIBLE = 0.9
"""The mass of the credible interval the CLI shows."""
DEFAULT_BINS = 10
CALIBRATED_KINDS = (VerdictKind.BUY, VerdictKind.WAIT, VerdictKind.SKIP)

FEEDBACK_SUCCESS: dict[str, dict[str, bool]] = {
    VerdictKind.BUY: {"bought": True, "returned": False},
    VerdictKind.WAIT: {"waited": True, "bought": False},
    VerdictKind.SKIP: {"bought": False, "returned": True},
}
"""verdict → outcome → whether the advice was right; a pair not listed is no evidence."""

Source = Literal["backtest", "feedback"]


def feedback_success(verdict: str | None, outcome: str) -> bool | None:
    return FEEDBACK_SUCCESS.get(verdict or "", {}).get(outcome)


def backtest_success(outcome: Outcome) -> bool | None:
    if not outcome.counted:
        return None
    assert outcome.paid is not None and outcome.buy_now_price is not None
    if outcome.verdict == VerdictKind.BUY:
        best = outcome.best_price if outcome.best_price is not None else outcome.buy_now_price
        return best > outcome.buy_now_price * (1 - LOWER_AFTER_BUY)
    if outcome.verdict == VerdictKind.WAIT:
        return outcome.paid < outcome.buy_now_price
    return None


@dataclass(frozen=True, slots=True)
class Evidence:
    """`n` pieces of evidence alike: advice of `verdict` in `category`, that the rule gave
    `confidence` (None: not known), and whether it was right."""

    verdict: str
    category: str
    confidence: float | None
    success: bool
    source: Source
    n: int = 1


@dataclass
class Tally:
    successes: int = 0
    failures: int = 0

    @property
    def n(self) -> int:
        return self.successes + self.failures


@dataclass(frozen=True, slots=True)
class Calibrated:
    confidence: float
    """The posterior mean: the chance this advice is right, given the evidence."""
    evidence: int
    """How many outcomes of this (verdict, category) it rests on."""


def prior(confidence: float, strength: float = PRIOR_STRENGTH) -> tuple[float, float]:
    """Beta(c·k, (1 − c)·k), with c kept inside (0, 1) so both parameters stay positive."""
    c = min(max(confidence, 0.01), 0.99)
    return c * strength, (1 - c) * strength


class Calibration:
    """Success and failure counts per (verdict, category), and the confidence they give.

    Opened on a market file (`open`), it reads the stored evidence once and writes new
    feedback through (`record`), keeping the counts current for the answers that follow.
    Shared by the event loop and worker threads, so counts change under a lock.
    """

    def __init__(
        self,
        evidence: Iterable[Evidence] = (),
        *,
        strength: float = PRIOR_STRENGTH,
        store: FeedbackStore | None = None,
    ) -> None:
        self.strength = strength
        self.store = store
        self._tallies: dict[tuple[str, str], Tally] = {}
        self._lock = threading.Lock()
        for item in evidence:
            self.add(item)

    @classmethod
    def open(cls, path: str | Path) -> Calibration:
        store = FeedbackStore(path)
        return cls(stored_evidence(store), store=store)

    def add(self, item: Evidence, sign: int = 1) -> None:
        with self._lock:
            tally = self._tallies.setdefault((item.verdict, item.category), Tally())
            if item.success:
                tally.successes += sign * item.n
            else:
                tally.failures += sign * item.n

    def tally(self, verdict: str, category: str) -> Tally:
        with self._lock:
            found = self._tallies.get((verdict, category), Tally())
            return Tally(found.successes, found.failures)

    def posterior(self, verdict: str, category: str, confidence: float) -> Any:
        """The frozen `scipy.stats.beta` of this advice being right (scipy is imported
        here: it takes seconds to import, and answering needs only `calibrate`)."""
        from scipy import stats  # type: ignore[import-untyped]  # scipy ships no type hints

        a, b = prior(confidence, self.strength)
        tally = self.tally(verdict, category)
        return stats.beta(a + tally.successes, b + tally.failures)

    def calibrate(self, verdict: str, category: str, confidence: float) -> Calibrated | None:
        """The posterior mean (closed form: this runs on every answer), or None for a
        verdict that is not advice."""
        if verdict not in CALIBRATED_KINDS:
            return None
        a, b = prior(confidence, self.strength)
        tally = self.tally(verdict, category)
        mean = (a + tally.successes) / (a + b + tally.n)
        return Calibrated(round(mean, 4), tally.n)

    def record(self, feedback: Feedback) -> Recorded:
        """Store `feedback` (idempotent, decide/feedback.py) and count what it says."""
        if self.store is None:
            raise RuntimeError("this calibration has no store to record feedback in")
        recorded = self.store.record(feedback)
        if recorded.duplicate:
            return recorded
        if recorded.replaced is not None:
            old = feedback_evidence(_with_outcome(recorded.feedback, recorded.replaced))
            if old is not None:
                self.add(old, sign=-1)
        new = feedback_evidence(recorded.feedback)
        if new is not None:
            self.add(new)
        return recorded

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def _with_outcome(feedback: Feedback, outcome: str) -> Feedback:
    return Feedback(feedback.tenant, feedback.request_id, outcome, feedback.answer,
                    feedback.received_ms)  # fmt: skip


def feedback_evidence(feedback: Feedback) -> Evidence | None:
    answer = feedback.answer
    success = feedback_success(answer.verdict, feedback.outcome)
    if success is None or answer.verdict is None or answer.category is None:
        return None
    return Evidence(answer.verdict, answer.category, answer.confidence, success, "feedback")


def stored_evidence(store: FeedbackStore) -> Iterator[Evidence]:
    """The backtest's stored tallies, then every feedback row that is evidence."""
    for t in store.backtest():
        yield Evidence(t.verdict, t.category, t.confidence, t.success, "backtest", t.n)
    for feedback in store.all():
        item = feedback_evidence(feedback)
        if item is not None:
            yield item


def backtest_evidence(
    builder: FactsBuilder,
    plan: ReplayPlan,
    skus: Iterable[str],
    progress: Callable[[int], None] | None = None,
) -> Iterator[Evidence]:
    """The backtest's decisions as evidence, each with the confidence its rule gave.

    `replay` scores the decisions; the confidence is read again from the decision day's
    sheet (the same `build_from` and `decide_verdict`, so the same verdict)."""
    for done, sku in enumerate(skus, 1):
        history = builder.history(sku)
        if history is not None:
            for outcome in replay(builder, plan, [sku]):
                success = backtest_success(outcome)
                if success is None:
                    continue
                day = end_of_day_ms(date.fromisoformat(outcome.day))
                verdict = decide_verdict(builder.build_from(history, day))
                confidence = verdict.confidence if verdict.kind == outcome.verdict else None
                yield Evidence(outcome.verdict, outcome.category, confidence, success, "backtest")
        if progress is not None:
            progress(done)


def tallies(evidence: Iterable[Evidence]) -> list[BacktestTally]:
    """Evidence folded to the store's rows (unknown confidences are not kept)."""
    counts: dict[tuple[str, str, float, bool], int] = {}
    for item in evidence:
        if item.confidence is not None:
            key = (item.verdict, item.category, round(item.confidence, 4), item.success)
            counts[key] = counts.get(key, 0) + item.n
    return [BacktestTally(v, c, conf, s, n) for (v, c, conf, s), n in sorted(counts.items())]


def answered_confidence(
    facts: FactsCache, sku: str, verdict: str, facts_version: str | None
) -> float | None:
    """The confidence the answer with this facts version gave, when today's sheet is that
    same version (nothing changed since, so the rules give the same verdict); else None:
    a confidence recomputed from other facts is not what the shopper was shown."""
    sheet = facts.get(sku)
    if sheet is None or facts_version is None or sheet.version != facts_version:
        return None
    judged = decide_verdict(sheet)
    return judged.confidence if judged.kind == verdict else None


def answered(
    facts: FactsCache,
    *,
    verdict: str | None,
    sku: str | None,
    facts_version: str | None,
    answered_ms: int,
) -> Answered:
    """What an answer advised, from its audit leaf's fields and the market."""
    product = None if sku is None else facts.builder.store.product(sku)
    confidence = None
    if sku is not None and verdict is not None:
        confidence = answered_confidence(facts, sku, verdict, facts_version)
    return Answered(verdict, sku, None if product is None else product.category, confidence,
                    answered_ms)  # fmt: skip


@dataclass
class Bin:
    """One confidence bin of a reliability table: [low, high) (the last one closed)."""

    low: float
    high: float
    n: int = 0
    successes: int = 0
    predicted_sum: float = 0.0
    sources: dict[str, int] = field(default_factory=dict)

    @property
    def predicted(self) -> float:
        return self.predicted_sum / self.n if self.n else 0.0

    @property
    def observed(self) -> float:
        return self.successes / self.n if self.n else 0.0

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        """Clopper–Pearson interval of the observed rate."""
        from scipy import stats  # a report's cost, not an answer's (see posterior)

        ci = stats.binomtest(self.successes, self.n).proportion_ci(level)
        return float(ci.low), float(ci.high)

    def to_dict(self) -> dict[str, Any]:
        low, high = self.interval()
        return {
            "low": self.low,
            "high": self.high,
            "n": self.n,
            "predicted": round(self.predicted, 4),
            "observed": round(self.observed, 4),
            "observed_95": [round(low, 4), round(high, 4)],
            "sources": dict(sorted(self.sources.items())),
        }


def reliability(evidence: Iterable[Evidence], bins: int = DEFAULT_BINS) -> list[Bin]:
    """Predicted (the rule's confidence) against observed (the share right), per bin of
    equal width; bins with no evidence are left out, as is evidence of unknown confidence."""
    table = [Bin(round(i / bins, 4), round((i + 1) / bins, 4)) for i in range(bins)]
    for item in evidence:
        if item.confidence is None:
            continue
        b = table[min(bins - 1, max(0, int(item.confidence * bins)))]
        b.n += item.n
        b.successes += item.n if item.success else 0
        b.predicted_sum += item.confidence * item.n
        b.sources[item.source] = b.sources.get(item.source, 0) + item.n
    return [b for b in table if b.n]


def calibration_error(table: Iterable[Bin]) -> float | None:
    """Expected calibration error: Σ (n_bin / n) · |observed − predicted|."""
    rows = list(table)
    total = sum(b.n for b in rows)
    if not total:
        return None
    return sum(b.n * abs(b.observed - b.predicted) for b in rows) / total
