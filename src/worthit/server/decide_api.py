"""POST /v1/decide: the verdict at once, the explanation streamed after it."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from worthit.answer.live import explain_live
from worthit.answer.payload import candidates_payload, explanation_payload, verdict_payload
from worthit.decide.decider import Decision, DecisionStatus
from worthit.engine.sequence import Priority
from worthit.explain.explainer import Delta, Explanation
from worthit.explain.prompt import prompt_reviews
from worthit.server.problems import ProblemError, problem_body
from worthit.server.services import Services
from worthit.server.sse import sse_event, wants_event_stream

router = APIRouter()

MAX_QUESTION_CHARS = 500


class DecideRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUESTION_CHARS)
    ]
    sku: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64)] | (
        None
    ) = None
    locale: Literal["en", "zh"] | None = None
    max_tokens: int = Field(default=64, ge=1, le=256)
    deadline_ms: int | None = Field(default=None, ge=50, le=30_000)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


@router.post("/v1/decide", response_model=None, tags=["decide"])
async def decide(
    body: DecideRequest,
    request: Request,
    accept: Annotated[str | None, Header()] = None,
) -> JSONResponse | StreamingResponse:
    """Answer a shopper's question. `Accept: text/event-stream` streams SSE events
    `verdict`, `token`…, `done` (or `error`); otherwise one JSON object."""
    services: Services = request.app.state.services
    started = time.perf_counter()
    if body.sku is not None and not services.store.has_sku(body.sku):
        raise ProblemError(404, "Unknown product", f"no product with sku {body.sku!r}", "sku")
    decision = services.decider.decide(body.question, sku=body.sku, language=body.locale)
    _refuse_unanswered(decision)
    if decision.status is DecisionStatus.AMBIGUOUS:
        return JSONResponse(
            {
                "status": "ambiguous",
                "question": body.question,
                "candidates": candidates_payload(decision),
            }
        )
    timings = dict(decision.timings_ms)
    timings["to_verdict"] = _ms(started)
    request.state.server_timing = {"decide": timings["to_verdict"]}
    priority: Priority = getattr(request.state, "priority", Priority.MEDIUM)
    deadline_ms = body.deadline_ms or services.default_deadline_ms
    reviews = prompt_reviews(services.store, decision.sheet) if decision.sheet else []
    events = explain_live(
        decision,
        reviews,
        getattr(request.app.state, "engine", None),
        priority=priority,
        deadline_s=deadline_ms / 1000 - (time.perf_counter() - started),
        max_tokens=body.max_tokens,
    )
    if wants_event_stream(accept):
        return StreamingResponse(
            _stream(decision, events, timings, started),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )
    explanation = None
    async for item in events:
        if isinstance(item, Explanation):
            explanation = item
    return JSONResponse(_answer(decision, explanation, timings, started))


def _refuse_unanswered(decision: Decision) -> None:
    if decision.status is DecisionStatus.NOT_UNDERSTOOD:
        raise ProblemError(
            422,
            "Question not understood",
            "no product, category or ranking found in the question",
            "question",
        )
    if decision.status is DecisionStatus.UNKNOWN_PRODUCT:
        unknown = [r.mention for r in decision.resolutions if r.sku is None]
        mention = unknown[0] if unknown else decision.question
        raise ProblemError(
            404,
            "Unknown product",
            f"no product matches {mention!r}",
            "question",
            mention=mention,
            candidates=candidates_payload(decision),
        )


def _answer(
    decision: Decision, explanation: Explanation | None, timings: dict[str, float], started: float
) -> dict[str, Any]:
    data = verdict_payload(decision)
    data.update(explanation_payload(explanation))
    if explanation is not None:
        timings.update(explanation.timings_ms)
        data["tokens"] = explanation.tokens
    timings["total"] = _ms(started)
    data["timings_ms"] = timings
    return data


async def _stream(
    decision: Decision,
    events: AsyncIterator[Delta | Explanation],
    timings: dict[str, float],
    started: float,
) -> AsyncIterator[str]:
    verdict = verdict_payload(decision)
    verdict["timings_ms"] = dict(timings)
    yield sse_event("verdict", verdict)
    try:
        async for item in events:
            if isinstance(item, Delta):
                yield sse_event("token", {"text": item.text})
            else:
                done = _answer(decision, item, timings, started)
                yield sse_event(
                    "done",
                    {
                        key: done[key]
                        for key in (
                            "finish_reason",
                            "explanation_source",
                            "explanation",
                            "timings_ms",
                            "tokens",
                        )
                    }
                    | {k: done[k] for k in ("fallback_reason", "ungrounded") if k in done},
                )
    except Exception as exc:  # the verdict is out; say what broke instead of cutting the stream
        yield sse_event("error", problem_body(500, "Explanation failed", str(exc)))
