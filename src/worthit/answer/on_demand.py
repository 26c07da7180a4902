"""An explanation written on demand: by the model on the batching engine, streamed as
it comes while the shopper waits (`stream_explanation` serves the background generator
too).

The rules live in `ExplanationRun`; this module only feeds it the engine's stream. The
engine is shared by every request and may refuse one it cannot serve before the
deadline: a refusal is an answer too, the template.
"""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator

from worthit.decide.decider import Decision
from worthit.decide.intent import IntentKind
from worthit.engine.backend import EngineBackend, TokenStream
from worthit.engine.errors import AdmissionRefusedError, EngineClosedError, PromptTooLongError
from worthit.engine.sequence import FinishReason, Priority, SamplingParams
from worthit.explain.explainer import (
    DEFAULT_MAX_TOKENS,
    Explanation,
    ExplanationRun,
    FallbackError,
    TextPiece,
    token_budget,
)
from worthit.explain.templates import template_explanation

FINISH_MARGIN_S = 0.1
"""Time kept back from the engine's deadline for what follows the last token: the
guard, the `done` event and its trip to the shopper, so the answer as a whole lands
inside the latency objective, not just its last token."""

ENGINE_PROBLEMS = frozenset({"engine_error", "engine_abort", "EngineClosedError"})
"""Fallbacks that say nothing about the text: trying again with other sampling is no cure."""


async def stream_explanation(
    run: ExplanationRun,
    engine: EngineBackend,
    params: SamplingParams,
    *,
    priority: Priority = Priority.MEDIUM,
    deadline_s: float | None = None,
    tenant: str | None = None,
) -> AsyncIterator[TextPiece | Explanation]:
    """Guarded deltas, then one Explanation (always the last item); `deadline_s` is the
    time left for the whole answer, `FINISH_MARGIN_S` of it kept for what follows;
    `tenant` is whose share of the engine the model's time comes from. A verdict without
    reasons gets the template at once: the checker refuses any text for it, as there is
    nothing to name, so the engine's time would be spent for nothing."""
    if not run.inputs.reasons:
        yield run.fallback("no_reasons")
        return
    if deadline_s is not None:
        deadline_s -= FINISH_MARGIN_S  # the engine's deadline is for the last token
        if deadline_s <= 0:
            yield run.fallback("deadline_passed")
            return
    try:
        stream = engine.submit(
            messages=run.messages,
            params=params,
            priority=priority,
            deadline_s=deadline_s,
            answer_prefix=run.prefix,
            tenant=tenant,
        )
    except (AdmissionRefusedError, PromptTooLongError, EngineClosedError) as exc:
        yield _refused(run, exc)
        return
    try:
        async for item in _drive(run, stream):
            yield item
    except (AdmissionRefusedError, PromptTooLongError, EngineClosedError) as exc:
        yield _refused(run, exc)  # a remote engine refuses once asked, before any text
    finally:
        stream.abort()


def _refused(run: ExplanationRun, exc: Exception) -> Explanation:
    if not isinstance(exc, AdmissionRefusedError):
        return run.fallback(type(exc).__name__)
    refused = run.fallback(f"refused_{exc.reason}")
    if exc.estimated_s is not None and exc.budget_s is not None:  # why, for the receipt
        refused.timings_ms["llm_estimate"] = round(exc.estimated_s * 1000, 1)
        refused.timings_ms["llm_budget"] = round(exc.budget_s * 1000, 1)
    return refused


async def explain_on_demand(
    decision: Decision,
    engine: EngineBackend | None,
    *,
    priority: Priority = Priority.MEDIUM,
    deadline_s: float | None = None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    run: ExplanationRun | None = None,
    tenant: str | None = None,
) -> AsyncIterator[TextPiece | Explanation]:
    """The model's explanation of an answered decision, greedy, as a shopper waits;
    `run` when the caller has already built the decision's."""
    if needs_no_model(decision):
        yield summary_explanation(decision)
        return
    assert decision.sheet is not None and decision.verdict is not None
    run = run or ExplanationRun(decision.sheet, decision.verdict)
    if engine is None:
        yield run.fallback("no_model")
        return
    params = SamplingParams(
        max_tokens=token_budget(run.inputs.language, max_tokens), temperature=0.0
    )
    async for item in stream_explanation(
        run, engine, params, priority=priority, deadline_s=deadline_s, tenant=tenant
    ):
        yield item


async def _drive(
    run: ExplanationRun, stream: TokenStream
) -> AsyncIterator[TextPiece | Explanation]:
    finish: str | None = None
    written = 0
    try:
        async for delta in stream:
            written += len(delta.token_ids) or (1 if delta.text else 0)
            if delta.text:
                out = run.feed(delta.text)
                if out:
                    yield TextPiece(out)
            if run.done:
                break
            if delta.finish_reason is not None:
                finish = delta.finish_reason.value
                break
        if finish == FinishReason.EXPIRED.value:
            tail, explanation = "", run.cut_short("deadline_expired")
        elif finish in (FinishReason.ERROR.value, FinishReason.ABORT.value):
            tail, explanation = "", run.cut_short(f"engine_{finish}")
        else:
            deadline = finish if finish == FinishReason.DEADLINE.value else None
            tail, explanation = run.finish(deadline)
    except FallbackError as fallback:
        yield _with_tokens(fallback.explanation, stream, written)
        return
    if tail:
        yield TextPiece(tail)
    yield _with_tokens(explanation, stream, written)


def _with_tokens(explanation: Explanation, stream: TokenStream, written: int) -> Explanation:
    """The explanation with the engine's token counts, as a new object: the run built it.
    A run that stopped reading before the engine ended (its sentences were out, or one was
    refused) has no completion to read: it counts the tokens it was sent (a remote chunk
    without token ids as one), so the model's work is never reported as none."""
    done = stream.completion
    if done is None:
        return (
            dataclasses.replace(explanation, tokens={"completion": written})
            if written
            else explanation
        )
    tokens = {
        "prompt": done.prompt_tokens,
        "cached": done.cached_tokens,
        "completion": done.completion_tokens,
    }
    return dataclasses.replace(explanation, tokens=tokens)


def needs_no_model(decision: Decision) -> bool:
    """Rankings and comparisons are worded by their own reason sentences."""
    return decision.intent.kind is IntentKind.TOP_N or bool(decision.compared)


def summary_explanation(decision: Decision) -> Explanation:
    """compare and top_n are explained by their own reason sentences, deterministically."""
    parts = [reason.text for reason in decision.summary]
    if decision.compared and decision.verdict is not None and decision.sheet is not None:
        parts.append(template_explanation(decision.verdict, decision.sheet))
    joiner = "" if decision.language in ("zh", "ja") else " "
    return Explanation(
        text=joiner.join(parts), source="template", finish_reason="stop", fallback_reason="summary"
    )
