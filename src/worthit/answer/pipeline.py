"""One answer, end to end: decide (no LLM), then explain (LLM or template).

The verdict event is yielded before any model work starts, so a caller can show it
while the explanation is still being written.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from worthit.decide.decider import Decider, Decision, DecisionStatus
from worthit.decide.intent import IntentKind
from worthit.decide.resolve import ProductResolver
from worthit.explain.explainer import DEFAULT_MAX_TOKENS, Delta, Explanation, TextStreamer, explain
from worthit.explain.prompt import prompt_reviews
from worthit.explain.templates import template_explanation
from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.market.store import MarketStore


@dataclass(frozen=True, slots=True)
class VerdictReady:
    decision: Decision


@dataclass
class Finished:
    decision: Decision
    explanation: Explanation | None
    timings_ms: dict[str, float] = field(default_factory=dict)


Event = VerdictReady | Delta | Finished


class Answerer:
    def __init__(
        self,
        store: MarketStore,
        streamer: TextStreamer | None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        self.store = store
        self.streamer = streamer
        self.max_tokens = max_tokens
        self.decider = Decider(FactsCache(FactsBuilder(store)), ProductResolver(store))

    def ask(self, question: str, sku: str | None = None) -> Iterator[Event]:
        started = time.perf_counter()
        decision = self.decider.decide(question, sku=sku)
        timings = dict(decision.timings_ms)
        timings["to_verdict"] = _ms(started)
        yield VerdictReady(decision)
        if decision.status is not DecisionStatus.ANSWERED:
            timings["total"] = _ms(started)
            yield Finished(decision, None, timings)
            return
        explanation: Explanation | None = None
        for item in self._explain(decision):
            if isinstance(item, Delta):
                yield item
            else:
                explanation = item
        if explanation is not None:
            timings.update(explanation.timings_ms)
        timings["total"] = _ms(started)
        yield Finished(decision, explanation, timings)

    def _explain(self, decision: Decision) -> Iterator[Delta | Explanation]:
        if needs_no_model(decision):
            yield summary_explanation(decision)
            return
        sheet, verdict = decision.sheet, decision.verdict
        assert sheet is not None and verdict is not None
        reviews = prompt_reviews(self.store, sheet)
        yield from explain(
            sheet, reviews, verdict, decision.question, self.streamer, self.max_tokens
        )


def needs_no_model(decision: Decision) -> bool:
    """Rankings and comparisons are worded by their own reason sentences."""
    return decision.intent.kind is IntentKind.TOP_N or bool(decision.compared)


def summary_explanation(decision: Decision) -> Explanation:
    """compare and top_n are explained by their own reason sentences, deterministically."""
    parts = [reason.text for reason in decision.summary]
    if decision.compared and decision.verdict is not None and decision.sheet is not None:
        parts.append(template_explanation(decision.verdict, decision.sheet))
    joiner = "" if decision.language == "zh" else " "
    return Explanation(
        text=joiner.join(parts), source="template", finish_reason="stop", fallback_reason="summary"
    )


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
