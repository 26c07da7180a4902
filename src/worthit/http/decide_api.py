"""POST /v1/decide: the verdict at once, the explanation streamed after it.

The handler validates the request, hands it to the answer flow and renders the events
the flow yields: as SSE (`verdict`, `token`…, `done`, or `error`) or as one JSON object.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Annotated, Literal

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from worthit.answer.answer_events import Event, Finished, VerdictReady
from worthit.answer.payload import answer_payload, candidates_payload, done_payload, verdict_payload
from worthit.decide.decider import Decision, DecisionStatus
from worthit.explain.explainer import TextPiece
from worthit.http.caller import request_priority, tenant_name
from worthit.http.dependencies import state_of
from worthit.http.fields import ENCODABLE
from worthit.http.json_body import json_body, openapi
from worthit.http.problems import ProblemError, problem_body
from worthit.http.sse import (
    EventStreamResponse,
    FastJSONResponse,
    LastEvent,
    sse_event,
    wants_event_stream,
)
from worthit.http.token_budget import TokenReservation, reserve_tokens_async

router = APIRouter()

MAX_QUESTION_CHARS = 500


class DecideRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    question: Annotated[
        str,
        StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_QUESTION_CHARS),
        ENCODABLE,
    ]
    sku: (
        Annotated[
            str, StringConstraints(strip_whitespace=True, min_length=1, max_length=64), ENCODABLE
        ]
        | None
    ) = None
    locale: Literal["en", "zh", "ja"] | None = None
    max_tokens: int = Field(default=64, ge=1, le=256)
    deadline_ms: int | None = Field(default=None, ge=50, le=30_000)
    as_of: (
        Annotated[
            str, StringConstraints(strip_whitespace=True, min_length=1, max_length=40), ENCODABLE
        ]
        | None
    ) = Field(
        default=None,
        description="Answer as worthit would have at this past moment, from data stamped up "
        "to it: an ISO 8601 time (no zone means UTC) or a day (its end).",
    )


@router.post(
    "/v1/decide", response_model=None, tags=["decide"], openapi_extra=openapi(DecideRequest)
)
async def decide(request: Request) -> JSONResponse | EventStreamResponse:
    """Answer a shopper's question. `Accept: text/event-stream` streams SSE events
    `verdict`, `token`…, `done` (or `error`); otherwise one JSON object."""
    body = await json_body(request, DecideRequest)
    state = state_of(request)
    service = state.market()
    as_of_ms = None
    if body.as_of is not None:
        try:
            as_of_ms = service.decider.as_of(body.as_of)
        except ValueError as exc:
            raise ProblemError(422, "Invalid request", f"body.as_of: {exc}", "body.as_of") from None
    if body.sku is not None and not service.store.has_sku(body.sku):
        raise ProblemError(404, "Unknown product", f"no product with sku {body.sku!r}", "sku")
    deadline_ms = body.deadline_ms or state.settings.default_deadline_ms
    budget = await reserve_tokens_async(request, state.limiter, body.max_tokens)
    events = service.answerer.ask(
        body.question,
        sku=body.sku,
        language=body.locale,
        priority=request_priority(request),
        deadline_s=deadline_ms / 1000,
        max_tokens=budget.tokens,
        tenant=tenant_name(request),
        as_of_ms=as_of_ms,
    )
    first = await anext(events)
    assert isinstance(first, VerdictReady)
    decision = first.decision
    if decision.status is not DecisionStatus.ANSWERED:
        await events.aclose()
        budget.settle(0)
        return _unanswered(decision, body.question)
    request.state.server_timing = {"decide": first.timings_ms["to_verdict"]}
    if wants_event_stream(request.headers.get("accept")):
        return EventStreamResponse(
            _stream(first, events, budget),
            headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
        )
    try:
        async for event in events:
            if isinstance(event, Finished):
                budget.settle(event.generated_tokens)
                return FastJSONResponse(answer_payload(event))
    finally:
        budget.settle(None)
    raise AssertionError("the answer flow ends with Finished")


def _unanswered(decision: Decision, question: str) -> JSONResponse:
    """Ambiguous: the candidates (200); unknown or not understood: a problem naming why."""
    if decision.status is DecisionStatus.AMBIGUOUS:
        return FastJSONResponse(
            {"status": "ambiguous", "question": question,
             "candidates": candidates_payload(decision)}
        )  # fmt: skip
    if decision.status is DecisionStatus.NOT_UNDERSTOOD:
        raise ProblemError(
            422,
            "Question not understood",
            "no product, category or ranking found in the question",
            "question",
        )
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


async def _stream(
    first: VerdictReady, events: AsyncGenerator[Event], budget: TokenReservation
) -> AsyncIterator[str]:
    """The SSE events. A client that goes away closes this generator, which closes the
    flow at once, and the flow aborts its engine request (freeing its KV)."""
    verdict = verdict_payload(first.decision)
    verdict["timings_ms"] = first.timings_ms
    yield sse_event("verdict", verdict)
    await asyncio.sleep(0)  # verdicts first: other shoppers' waiting ones go out before this text
    async with aclosing(events):
        try:
            async for event in events:
                if isinstance(event, TextPiece):
                    yield sse_event("token", {"text": event.text})
                elif isinstance(event, Finished):
                    budget.settle(event.generated_tokens)
                    yield LastEvent(sse_event("done", done_payload(event)))
        except Exception as exc:  # the verdict is out: say what broke, do not cut the stream
            yield LastEvent(sse_event("error", problem_body(500, "Explanation failed", str(exc))))
        finally:
            budget.settle(None)
