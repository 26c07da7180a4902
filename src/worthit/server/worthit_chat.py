"""The `worthit` model on the OpenAI-compatible API: the grounded decision flow.

The last user message is the shopper's question. The answer leads with the verdict and
its reasons (known before any model work), then the explanation streams after them, so
an OpenAI client gets the same grounded answer as /v1/decide, in chat form.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, StreamingResponse

from worthit.answer.live import explain_live
from worthit.answer.payload import explanation_payload, verdict_payload
from worthit.decide.decider import Decision, DecisionStatus
from worthit.engine.detokenizer import last_sentence_end
from worthit.engine.sequence import Priority
from worthit.explain.explainer import Delta, Explanation
from worthit.explain.prompt import prompt_reviews
from worthit.server.app import chat_chunk, error_response
from worthit.server.openai_schema import ChatCompletionRequest
from worthit.server.services import Services

MODEL_ID = "worthit"


async def worthit_chat(
    body: ChatCompletionRequest, request: Request
) -> JSONResponse | StreamingResponse:
    services: Services = request.app.state.services
    question = next((m.content for m in reversed(body.messages) if m.role == "user"), "").strip()
    if not question:
        return error_response(400, "messages: no user message to answer", "invalid_request_error",
                              "messages")  # fmt: skip
    started = time.perf_counter()
    decision = services.decider.decide(question)
    deadline_ms = body.deadline_ms or services.default_deadline_ms
    priority: Priority = getattr(request.state, "priority", Priority[body.priority.upper()])
    events = _events(request, services, decision, priority, deadline_ms, body, started)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    if body.stream:
        return StreamingResponse(
            _chunks(events, completion_id, created),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    text, extras = "", dict[str, Any]()
    async for piece, final in events:
        text += piece
        extras = final or extras
    return JSONResponse(
        {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": MODEL_ID,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": _usage(extras),
            "worthit": extras,
        }
    )


async def _events(
    request: Request,
    services: Services,
    decision: Decision,
    priority: Priority,
    deadline_ms: int,
    body: ChatCompletionRequest,
    started: float,
) -> AsyncIterator[tuple[str, dict[str, Any] | None]]:
    """(text, None) pieces, then ("", evidence) once: verdict, explanation, timings."""
    verdict = verdict_payload(decision)
    yield _lead(decision), None
    explanation: Explanation | None = None
    released = ""  # the model's text sent so far: whole sentences only
    buffer = ""
    if decision.status is DecisionStatus.ANSWERED:
        reviews = prompt_reviews(services.store, decision.sheet) if decision.sheet else []
        async for item in explain_live(
            decision,
            reviews,
            getattr(request.app.state, "engine", None),
            priority=priority,
            deadline_s=deadline_ms / 1000 - (time.perf_counter() - started),
            max_tokens=min(body.max_completion_tokens or body.max_tokens or 64, 256),
        ):
            if isinstance(item, Delta):
                # A chat client cannot take text back, and a deadline may cut the model
                # mid-sentence: release whole sentences only (the kept text is cut so too).
                buffer += item.text
                end = last_sentence_end(buffer)
                if end > len(released):
                    yield buffer[len(released) : end], None
                    released = buffer[:end]
            else:
                explanation = item
        summarised = explanation is not None and explanation.fallback_reason == "summary"
        if explanation is not None and explanation.source == "template" and not summarised:
            # the lead already lists a ranking or a comparison
            yield ("\n\n" if released else "") + explanation.text, None
    verdict.update(explanation_payload(explanation))
    verdict["tokens"] = explanation.tokens if explanation else {}
    verdict["timings_ms"] = {"total": round((time.perf_counter() - started) * 1000, 2)}
    yield "", verdict


def _lead(decision: Decision) -> str:
    """What is known at once: the verdict and its reasons, or why there is none."""
    if decision.status is DecisionStatus.NOT_UNDERSTOOD:
        return "I could not find a product or a category in that question."
    if decision.status in (DecisionStatus.AMBIGUOUS, DecisionStatus.UNKNOWN_PRODUCT):
        lines = []
        for resolution in decision.resolutions:
            if resolution.sku is not None:
                continue
            names = ", ".join(f"{c.title} ({c.sku})" for c in resolution.candidates[:5])
            if names:
                lines.append(f"Which product do you mean by {resolution.mention!r}? {names}.")
            else:
                lines.append(f"I do not know a product called {resolution.mention!r}.")
        return "\n".join(lines)
    reasons = decision.summary + (decision.verdict.reasons if decision.verdict else ())
    bullets = "\n".join(f"- {r.text}" for r in reasons)
    if decision.verdict is None or decision.sheet is None:
        return bullets + "\n\n"
    head = (
        f"{decision.verdict.kind.value} (confidence {decision.verdict.confidence:.2f}): "
        f"{decision.sheet.title} [{decision.sheet.sku}]"
    )
    return f"{head}\n{bullets}\n\n"


async def _chunks(
    events: AsyncIterator[tuple[str, dict[str, Any] | None]], completion_id: str, created: int
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, str], finish: str | None, **extra: Any) -> str:
        return chat_chunk(completion_id, created, MODEL_ID, delta, finish, **extra)

    yield chunk({"role": "assistant", "content": ""}, None)
    async for text, final in events:
        if text:
            yield chunk({"content": text}, None)
        if final is not None:
            yield chunk({}, "stop", usage=_usage(final), worthit=final)
    yield "data: [DONE]\n\n"


def _usage(extras: dict[str, Any]) -> dict[str, int]:
    tokens = extras.get("tokens") or {}
    prompt, completion = int(tokens.get("prompt", 0)), int(tokens.get("completion", 0))
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}  # fmt: skip
