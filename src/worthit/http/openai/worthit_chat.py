"""The `worthit` model on the OpenAI-compatible API: the answer flow, in chat form.

The last user message is the shopper's question. The answer leads with the verdict and
its reasons (known before any model work), then the explanation streams after them, so
an OpenAI client gets the same grounded answer as /v1/decide, and the same evidence in
the completion's `worthit` extension.

`usage` counts what the client sent and received, as OpenAI's does, with the engine's
tokenizer: `completion_tokens` are the tokens of the message's content (the verdict's lead
and the explanation, whether the model wrote it now, the store kept it or it is the
template's), `prompt_tokens` the engine's prompt when the model wrote the explanation for
this answer, else the question's. With remote engines there is no tokenizer in this
process, so the model's own counts are reported (0 for stored and template text). What the
model generated for this answer, what a tenant's budget is charged, stays in the
extension's `tokens`.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from fastapi.responses import JSONResponse, StreamingResponse

from worthit.answer.answer_events import Event, Finished, VerdictReady
from worthit.answer.payload import answer_payload
from worthit.decide.decider import Decision, DecisionStatus
from worthit.engine.sequence import Priority
from worthit.explain.explainer import TextPiece
from worthit.http.openai.schema import ChatCompletionRequest
from worthit.http.openai.wire import DONE_LINE, chat_chunk, completion_object, error_response
from worthit.http.sse import FastJSONResponse
from worthit.http.token_budget import TokenReservation
from worthit.service.state import ServiceState
from worthit.text.sentences import last_sentence_end

MODEL_ID = "worthit"
MAX_EXPLANATION_TOKENS = 256


async def worthit_chat(
    body: ChatCompletionRequest,
    state: ServiceState,
    priority: Priority,
    budget: TokenReservation,
    tenant: str | None = None,
) -> JSONResponse | StreamingResponse:
    """The answer flow in chat form; `budget` is settled with what the model generated."""
    question = next((m.content for m in reversed(body.messages) if m.role == "user"), "").strip()
    if not question:
        budget.settle(0)
        return error_response(400, "messages: no user message to answer", "invalid_request_error",
                              "messages")  # fmt: skip
    answerer = state.market().answerer
    deadline_ms = body.deadline_ms or state.settings.default_deadline_ms
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    events = answerer.ask(
        question,
        priority=priority,
        deadline_s=deadline_ms / 1000,
        max_tokens=budget.tokens,
        tenant=tenant,
        request_id=completion_id,
    )
    pieces = _pieces(events, budget)
    created = int(time.time())
    count = _token_counter(state)
    if body.stream:
        return StreamingResponse(
            _chunks(
                pieces,
                completion_id,
                created,
                lambda text, final: _usage(count, question, text, final),
            ),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    text, extension = "", dict[str, Any]()
    async for piece, final in pieces:
        text += piece
        extension = final or extension
    return FastJSONResponse(
        completion_object(
            completion_id,
            created,
            MODEL_ID,
            text,
            "stop",
            _usage(count, question, text, extension),
            extension,
        )
    )


async def _pieces(
    events: AsyncGenerator[Event], budget: TokenReservation
) -> AsyncGenerator[tuple[str, dict[str, Any] | None]]:
    """(text, None) pieces, then ("", the answer's JSON) once.

    A chat client cannot take text back, and a deadline may cut the model mid-sentence:
    the model's text is released in whole sentences only (the kept text is cut so too).
    """
    released = ""
    buffer = ""
    async with aclosing(events):
        try:
            async for event in events:
                if isinstance(event, VerdictReady):
                    yield _lead(event.decision), None
                elif isinstance(event, TextPiece):
                    buffer += event.text
                    end = last_sentence_end(buffer)
                    if end > len(released):
                        yield buffer[len(released) : end], None
                        released = buffer[:end]
                else:
                    budget.settle(event.generated_tokens)
                    yield _tail(event, bool(released)), answer_payload(event)
        finally:
            budget.settle(None)


def _tail(finished: Finished, released: bool) -> str:
    """The template's text when the model's was not kept (a summary is already in the lead)."""
    explanation = finished.explanation
    if explanation is None or explanation.source != "template":
        return ""
    if explanation.fallback_reason == "summary":
        return ""
    return ("\n\n" if released else "") + explanation.text


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
    pieces: AsyncGenerator[tuple[str, dict[str, Any] | None]],
    completion_id: str,
    created: int,
    usage: Callable[[str, dict[str, Any]], dict[str, int]],
) -> AsyncIterator[str]:
    def chunk(delta: dict[str, str], finish: str | None, **extra: Any) -> str:
        return chat_chunk(completion_id, created, MODEL_ID, delta, finish, **extra)

    yield chunk({"role": "assistant", "content": ""}, None)
    sent = ""
    async with aclosing(pieces):
        async for text, final in pieces:
            if text:
                sent += text
                yield chunk({"content": text}, None)
            if final is not None:
                yield chunk({}, "stop", usage=usage(sent, final), worthit=final)
    yield DONE_LINE


TokenCounter = Callable[[str], int] | None


def _token_counter(state: ServiceState) -> TokenCounter:
    """The in-process engine's tokenizer (it only reads the vocabulary, so any thread may
    call it); None with remote engines or before the model has loaded."""
    engine = state.engine
    if state.remote is not None or engine is None:
        return None
    runner = engine.runner
    return lambda text: len(runner.tokenize(text, add_special=False)) if text else 0


def _usage(
    count: TokenCounter, question: str, text: str, extension: dict[str, Any]
) -> dict[str, int]:
    """OpenAI's usage for the content sent (see the module's docstring for what counts)."""
    tokens = extension.get("tokens") or {}
    prompt, completion = int(tokens.get("prompt", 0)), int(tokens.get("completion", 0))
    if count is not None:
        prompt = prompt if completion else count(question)
        completion = count(text)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}  # fmt: skip
