"""The one answer flow: decide (no LLM), then explain (the engine's text or the template).

The CLI (`asyncio.run`), `POST /v1/decide` (SSE and JSON) and the `worthit` chat model all
call `Answerer.ask` and render the events it yields; none of them orchestrates the steps
itself, so a rule about answers lives here once.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator

from worthit.answer.events import Event, Finished, VerdictReady
from worthit.answer.live import explain_live
from worthit.decide.decider import Decider, DecisionStatus
from worthit.decide.resolve import ProductResolver
from worthit.engine.engine import Engine
from worthit.engine.sequence import Priority
from worthit.explain.explainer import DEFAULT_MAX_TOKENS, Delta, Explanation
from worthit.explain.prompt import prompt_reviews
from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.market.store import MarketStore
from worthit.market.timeutil import Clock, now_ms


class Answerer:
    """Answers questions about one market; `engine` None means template text only."""

    def __init__(self, store: MarketStore, engine: Engine | None, *, clock: Clock = now_ms) -> None:
        self.store = store
        self.engine = engine
        self.decider = Decider(FactsCache(FactsBuilder(store, clock)), ProductResolver(store))

    @property
    def facts(self) -> FactsCache:
        return self.decider.facts

    async def ask(
        self,
        question: str,
        *,
        sku: str | None = None,
        language: str | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> AsyncGenerator[Event]:
        """VerdictReady, then the explanation's Deltas, then Finished (always last).

        `deadline_s` is the time the whole answer may take from this call (None: no
        deadline, the model finishes); the engine refuses at once what cannot fit.
        """
        started = time.perf_counter()
        decision = self.decider.decide(question, sku=sku, language=language)
        timings = dict(decision.timings_ms)
        timings["to_verdict"] = _ms(started)
        yield VerdictReady(decision, dict(timings))
        explanation: Explanation | None = None
        if decision.status is DecisionStatus.ANSWERED:
            reviews = prompt_reviews(self.store, decision.sheet) if decision.sheet else []
            left = None if deadline_s is None else deadline_s - (time.perf_counter() - started)
            async for item in explain_live(
                decision,
                reviews,
                self.engine,
                priority=priority,
                deadline_s=left,
                max_tokens=max_tokens,
            ):
                if isinstance(item, Delta):
                    yield item
                else:
                    explanation = item
        if explanation is not None:
            timings.update(explanation.timings_ms)
        timings["total"] = _ms(started)
        yield Finished(decision, explanation, priority, timings)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
