"""The one answer flow: decide (no LLM), then explain (stored, written on demand, or the
template).

The CLI (`asyncio.run`), `POST /v1/decide` (SSE and JSON) and the `worthit` chat model all
call `Answerer.ask` and render the events it yields; none of them orchestrates the steps
itself, so a rule about answers lives here once.

An explanation depends only on its inputs (explain/inputs.py), so the model's checked
text is stored under their key and served to every later asker of the same inputs at
once, after the guard has checked it again against the current facts. On a miss the
newest text written for the product's earlier inputs is served when it passes those
checks too (while the generator writes the new inputs' own); otherwise the
engine writes it on demand, while the shopper waits, when it says that fits the
deadline; otherwise the shopper gets the template now and the inputs go to the
background generator, so the next asker gets the model's text.
"""

from __future__ import annotations

import itertools
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Iterable

from worthit.answer.answer_events import Event, Finished, VerdictReady
from worthit.answer.demand import LANGUAGES, SALES_WINDOW_DAYS, LanguageMix, Wanted
from worthit.answer.facts_digest import FactsDigests
from worthit.answer.generation import MAX_TRIES, SAMPLING_POLICY
from worthit.answer.metrics import AnswerMetrics
from worthit.answer.on_demand import explain_on_demand, needs_no_model, summary_explanation
from worthit.answer.run_memo import RunMemo
from worthit.audit import AuditLog, AuditRecord, BacklogFullError, LogClosedError, Receipt
from worthit.decide.decider import Decider, Decision, DecisionStatus
from worthit.engine.backend import EngineBackend
from worthit.engine.sequence import Priority
from worthit.explain.explainer import DEFAULT_MAX_TOKENS, Explanation, ExplanationRun, TextPiece
from worthit.explain.store import RETRY_FAILED_AFTER_MS, ExplanationStore, StoredExplanation
from worthit.explain.store_key import explanation_key
from worthit.facts.cache import FactsCache
from worthit.text.time import iso, now_ms

log = logging.getLogger(__name__)


class Answerer:
    """Answers questions about one market.

    `decider` decides over the market (`Decider.for_store`). `engine` None means template
    text only. `explanations` is the store of checked explanations (None: every
    explanation is written on demand). `model` is the model file's identity
    (`explain.store_key.model_identity`), part of every stored explanation's key. `audit` is
    the log every answer is appended to (None: none kept).
    """

    def __init__(
        self,
        decider: Decider,
        engine: EngineBackend | None,
        *,
        explanations: ExplanationStore | None = None,
        model: str | None = None,
        metrics: AnswerMetrics | None = None,
        audit: AuditLog | None = None,
    ) -> None:
        self.store = decider.store
        self.engine = engine
        self.decider = decider
        self.explanations = explanations
        self.model = model or (engine.model_id if engine is not None else "no-model")
        self.metrics = metrics or AnswerMetrics()
        self.audit = audit
        self.languages = LanguageMix()
        """Who asks in which language: the generator's demand order reads it."""
        self.wanted = Wanted()
        """Inputs a shopper missed in the store: the generator writes them first."""
        self.runs = RunMemo(self.key)
        self.digests = FactsDigests()
        self.asked_at = -float("inf")
        """When the last question came (`time.perf_counter`): idle-time work waits for a
        quiet moment (answer/facts_refresh.py)."""
        self.restated = Wanted()
        """Products events changed: the generator rewrites the explanations of these it
        had written, next after shoppers' misses."""

    @property
    def facts(self) -> FactsCache:
        return self.decider.facts

    def warm(self, budget_s: float) -> int:
        """Build the fact sheets of last week's best sellers, then of the other products,
        before questions come, for at most `budget_s` (`FactsCache.warm`); the number
        built. Shoppers ask about products as they sell, so the first questions find the
        sheets they need."""
        ranked = self.decider.rankings.top(None, "sales", SALES_WINDOW_DAYS, self.facts.capacity)
        skus = itertools.chain(
            (item.sku for item in ranked), (hit.sku for hit in self.store.all_names())
        )
        return self.facts.warm(skus, budget_s)

    def facts_changed(self, skus: Iterable[str]) -> None:
        """Events changed these products: their sheets go now, and a product record among
        the events (a new product, a new title or alias) is searchable at once."""
        skus = list(skus)
        self.facts.evict(skus)
        self.decider.resolver.refresh(skus)

    def facts_restated(self, skus: Iterable[str]) -> None:
        """Events moved what these products' explanations may say (a price, a rating, a
        promotion): the generator rewrites, ahead of its walk, those it had written
        (`restated`). Stock and sales readings do not come here: at a live feed's rate they
        would keep the generator re-checking unchanged inputs."""
        for sku in skus:
            for language in LANGUAGES:
                self.restated.add(sku, language)

    def key(self, run: ExplanationRun) -> str:
        """The key of `run`'s explanation in the store."""
        return explanation_key(self.model, run.messages, run.prefix, SAMPLING_POLICY)

    async def ask(
        self,
        question: str,
        *,
        sku: str | None = None,
        language: str | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        tenant: str | None = None,
        request_id: str | None = None,
        as_of_ms: int | None = None,
    ) -> AsyncGenerator[Event]:
        """VerdictReady, then the explanation's Deltas, then Finished (always last).

        `deadline_s` is the time the whole answer may take from this call (None: no
        deadline, the model finishes); the engine refuses at once what cannot fit.
        `tenant` shares the engine fairly with other tenants of its class. With an audit
        log the answer is appended to it (as `request_id`, made up when None) before
        Finished, which carries the receipt.

        `as_of_ms` answers as of that past moment (`Decider.as_of` checks one): the facts
        and verdict from the rows stamped by then, and the template explanation
        (`fallback_reason` "as_of"). Stored texts and the engine serve today's answers; an
        as-of one neither reads nor fills them, nor tells the generator what is asked now.
        """
        self.asked_at = started = time.perf_counter()
        decision = self.decider.decide(question, sku=sku, language=language, at_ms=as_of_ms)
        timings = dict(decision.timings_ms)
        timings["to_verdict"] = _ms(started)
        yield VerdictReady(decision, dict(timings))
        explanation: Explanation | None = None
        if decision.status is DecisionStatus.ANSWERED and as_of_ms is not None:
            explanation = as_of_explanation(decision)
        elif decision.status is DecisionStatus.ANSWERED:
            self.languages.count(decision.language)
            left = None if deadline_s is None else deadline_s - (time.perf_counter() - started)
            async for item in self._explain(decision, priority, left, max_tokens, tenant):
                if isinstance(item, TextPiece):
                    yield item
                else:
                    explanation = item
        if explanation is not None:
            timings.update(explanation.timings_ms)
        timings["total"] = _ms(started)
        finished = Finished(
            decision, explanation, priority, timings, request_id or uuid.uuid4().hex
        )
        if self.audit is not None:
            finished.receipt = self._record(finished, question, tenant)
        yield finished

    async def _explain(
        self,
        decision: Decision,
        priority: Priority,
        deadline_s: float | None,
        max_tokens: int,
        tenant: str | None,
    ) -> AsyncIterator[TextPiece | Explanation]:
        if needs_no_model(decision) or self.engine is None:
            async for item in explain_on_demand(decision, self.engine):
                yield item
            return
        assert decision.sheet is not None and decision.verdict is not None
        run, key = self.runs.run(decision.sheet, decision.verdict)
        stored = self.explanations.get(key) if self.explanations is not None else None
        why = None if stored is None else stale_reason(stored, run, now_ms())
        if stored is not None and why is None:
            async for item in self._from_store(stored, decision.language):
                yield item
            return
        earlier = self._earlier(run, decision.language, key)
        if earlier is not None or why is not None:
            self.wanted.add(run.sheet.sku, decision.language)
        if earlier is not None:
            async for item in self._from_store(earlier, decision.language):
                yield item
            return
        if why is not None:
            self.metrics.explanations.labels("template", decision.language).inc()
            yield run.fallback(*why)
            return
        final: Explanation | None = None
        async for item in explain_on_demand(
            decision,
            self.engine,
            priority=priority,
            deadline_s=deadline_s,
            max_tokens=max_tokens,
            run=run,
            tenant=tenant,
        ):
            if isinstance(item, TextPiece):
                yield item
            else:
                final = item
        assert final is not None
        self._after_on_demand(decision, key, final)
        self.metrics.explanations.labels(
            "live" if final.source == "llm" else "template", decision.language
        ).inc()
        yield final

    def _earlier(self, run: ExplanationRun, language: str, key: str) -> StoredExplanation | None:
        """The newest text the model wrote for this product under earlier inputs, when it
        passes every check against today's facts: a live feed restates a best seller's
        price or stock faster than the generator rewrites it, and a text that names none of
        what changed still says what is true. The generator still writes these inputs'
        own text, which then wins."""
        if self.explanations is None:
            return None
        earlier = self.explanations.latest(
            run.sheet.sku, language, self.model, run.verdict.kind.value
        )
        if earlier is None or earlier.key == key or stale_reason(earlier, run, now_ms()):
            return None
        return earlier

    async def _from_store(
        self, stored: StoredExplanation, language: str
    ) -> AsyncIterator[TextPiece | Explanation]:
        """A stored text that holds for the current facts, sent at once as one piece: it is
        checked whole, and every event more is the HTTP thread's time in every answer."""
        assert stored.text is not None
        started = time.perf_counter()
        yield TextPiece(stored.text)
        self.metrics.explanations.labels("stored", language).inc()
        elapsed = _ms(started)
        yield Explanation(
            stored.text,
            "llm",
            "stop",
            cached=True,
            generated_at=iso(stored.generated_at_ms),
            timings_ms={"llm_first_token": elapsed, "llm_total": elapsed},
        )

    def _record(self, finished: Finished, question: str, tenant: str | None) -> Receipt | None:
        """Append the answer to the audit log; a log that cannot take it costs the answer
        its receipt, never the answer itself."""
        assert self.audit is not None
        decision, explanation = finished.decision, finished.explanation
        sheet, verdict = decision.sheet, decision.verdict
        record = AuditRecord.for_answer(
            request_id=finished.request_id,
            question=question,
            tenant=tenant,
            facts_sha256=None if sheet is None else self.digests.digest(sheet),
            facts_version=None if sheet is None else sheet.version,
            verdict=None if verdict is None else verdict.kind.value,
            explanation=None if explanation is None else explanation.text,
            explanation_source=None if explanation is None else explanation.source,
            model=self.model,
            timings_ms=finished.timings_ms,
            sku=None if sheet is None else sheet.sku,
            language=decision.language,
            priority=finished.priority.name.lower(),
            status=decision.status.value,
        )
        try:
            return self.audit.append(record)
        except (BacklogFullError, LogClosedError) as exc:
            log.warning("answer %s not in the audit log: %s", record.request_id, exc)
            return None

    def _after_on_demand(self, decision: Decision, key: str, final: Explanation) -> None:
        """Store what the model wrote while the shopper waited; or queue the inputs."""
        assert decision.sheet is not None and decision.verdict is not None
        if final.source == "llm" and final.finish_reason == "stop":
            if self.explanations is not None:
                self.explanations.put(
                    StoredExplanation(
                        key=key,
                        text=final.text,
                        model=self.model,
                        sku=decision.sheet.sku,
                        language=decision.language,
                        verdict=decision.verdict.kind.value,
                        generated_at_ms=now_ms(),
                        method="live",
                        tries=1,
                        sampling="greedy",
                    )
                )
            return
        self.wanted.add(decision.sheet.sku, decision.language)


def as_of_explanation(decision: Decision) -> Explanation:
    """The deterministic text of an answered as-of decision."""
    if needs_no_model(decision):
        return summary_explanation(decision)
    assert decision.sheet is not None and decision.verdict is not None
    return ExplanationRun(decision.sheet, decision.verdict).fallback("as_of")


def stale_reason(
    stored: StoredExplanation, run: ExplanationRun, now: int
) -> tuple[str, tuple[str, ...]] | None:
    """Why `stored` must not be served (or kept) for these facts, or None.

    A failed entry stands for `RETRY_FAILED_AFTER_MS` (template meanwhile), and for good
    once its inputs had `MAX_TRIES`; a text must pass the guard and the wording checks
    against the current facts."""
    if stored.text is None:
        if stored.tries >= MAX_TRIES or now - stored.generated_at_ms < RETRY_FAILED_AFTER_MS:
            return "model_failed_checks", ()
        return "model_failed_before", ()
    found = run.recheck(stored.text)
    return None if found is None else (f"stale_{found[0]}", found[1])


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
