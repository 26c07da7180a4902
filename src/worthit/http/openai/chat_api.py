"""POST /v1/chat/completions and GET /v1/models: the OpenAI-compatible API.

A request for the `worthit` model is a shopper's question and runs the answer flow
(`worthit_chat`); any other model id is plain chat on the engine. worthit adds three
request fields: `priority` (high/medium/low, at most the key's class), `deadline_ms`
and `deadline_policy` ("complete", the default: the answer's expected length, a high
quantile of what recent answers produced, bounded by max_tokens, by the deadline, and a
longer one stopped at a sentence end; or "sentence": one sentence by the deadline). A
request the engine cannot serve before its deadline is refused at once with HTTP 503,
`code: "deadline_unmeetable"` and `x-should-retry: false`. A model id that GET /v1/models
does not list is a 404 `model_not_found`, as OpenAI answers it, before any engine work: a
client that mistyped the id learns that, not that the engine could not fit its request.
No model at all means the engine's, as vLLM takes it.

OpenAI's `user` names the engine's fair share on plain chat when the server has no keys
(caller.fair_share_key); the answer flow's tenant, which its audit record keeps, is only
ever the authenticated one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, StreamingResponse

from worthit.engine.backend import TokenStream
from worthit.engine.engine import Engine
from worthit.engine.errors import AdmissionRefusedError, EngineClosedError, PromptTooLongError
from worthit.engine.remote.router import Router
from worthit.engine.sequence import DeadlinePolicy, SamplingParams
from worthit.engine.streams import Completion, Delta
from worthit.http.caller import fair_share_key, request_priority, tenant_name
from worthit.http.dependencies import StateDep
from worthit.http.openai.schema import ChatCompletionRequest
from worthit.http.openai.wire import DONE_LINE, chat_chunk, completion_object, error_response
from worthit.http.openai.worthit_chat import MAX_EXPLANATION_TOKENS, MODEL_ID, worthit_chat
from worthit.http.sse import FastJSONResponse
from worthit.http.token_budget import TokenReservation, reserve_tokens_async
from worthit.service.state import ServiceState

router = APIRouter(tags=["openai"])

DEFAULT_MAX_TOKENS = 256


@router.get("/v1/models")
async def models(state: StateDep) -> dict[str, Any]:
    ids = model_ids(state)
    return {
        "object": "list",
        "data": [
            {"id": model_id, "object": "model", "created": 0, "owned_by": "worthit"}
            for model_id in ids
        ],
    }


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(
    body: ChatCompletionRequest, request: Request, state: StateDep
) -> JSONResponse | StreamingResponse:
    if body.model is not None and not (body.model == MODEL_ID and state.service is not None):
        known = model_ids(state)  # the engine's id: a 503 while it is still loading
        if body.model not in known:
            return error_response(
                404,
                f"The model {body.model!r} does not exist; this server serves "
                f"{', '.join(known)} (GET /v1/models).",
                "invalid_request_error", "model", "model_not_found",
            )  # fmt: skip
    priority = request_priority(request, body.priority)
    asked = body.max_completion_tokens or body.max_tokens
    if body.model == MODEL_ID and state.service is not None:
        budget = await reserve_tokens_async(
            request, state.limiter, min(asked or 64, MAX_EXPLANATION_TOKENS)
        )
        return await worthit_chat(body, state, priority, budget, tenant_name(request))
    engine = _engine(state)
    budget = await reserve_tokens_async(request, state.limiter, asked or DEFAULT_MAX_TOKENS)
    try:
        messages = [m.model_dump() for m in body.messages]
        prefix = ""
        if body.continue_final_message:
            if messages[-1]["role"] != "assistant":
                raise ValueError("continue_final_message needs a final assistant message")
            prefix = messages.pop()["content"]
        params = SamplingParams(
            max_tokens=budget.tokens,
            temperature=body.temperature,
            top_p=body.top_p,
            top_k=body.top_k,
            seed=body.seed,
            stop=body.stop_strings(),
        )
        stream = await engine.submit_async(
            messages=messages,
            params=params,
            answer_prefix=prefix,
            priority=priority,
            deadline_s=None if body.deadline_ms is None else body.deadline_ms / 1000,
            deadline_policy=DeadlinePolicy(body.deadline_policy),
            tenant=fair_share_key(request, body.user),
        )
        first = None if state.remote is None else await anext(stream)  # a refusal comes here
    except (AdmissionRefusedError, PromptTooLongError, EngineClosedError, ValueError) as exc:
        budget.settle(0)
        return _refusal(exc)
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    created = int(time.time())
    extras = {"priority": priority.name.lower()}
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            _sse(
                _replay(first, stream),
                stream,
                budget,
                completion_id,
                created,
                engine.model_id,
                include_usage,
                extras,
            ),
            media_type="text/event-stream",
            headers={"cache-control": "no-cache"},
        )
    try:
        done = await _collect(stream)
        budget.settle(done.completion_tokens)
    finally:
        stream.abort()  # no-op when finished; frees the KV if the client went away
        budget.settle(None)
    return JSONResponse(
        completion_object(
            completion_id,
            created,
            engine.model_id,
            done.text,
            done.finish_reason.value,
            usage(done),
            extras | evidence(done),
        )
    )


def model_ids(state: ServiceState) -> list[str]:
    """The ids a request may name: the `worthit` model when a market is served, then the
    engine's model (the GGUF's file name, or the remote replicas' id)."""
    ids = [_engine(state).model_id]
    if state.service is not None:
        ids.insert(0, MODEL_ID)
    return ids


def _engine(state: ServiceState) -> Engine | Router:
    return state.remote if state.remote is not None else state.running_engine()


async def _collect(stream: TokenStream) -> Completion:
    async for _ in stream:
        pass
    assert stream.completion is not None
    return stream.completion


def _refusal(exc: Exception) -> JSONResponse:
    if isinstance(exc, AdmissionRefusedError):
        code = "deadline_unmeetable" if exc.reason == "deadline" else exc.reason
        error: dict[str, Any] = {
            "message": str(exc),
            "type": "admission_refused",
            "param": "deadline_ms",
            "code": code,
        }
        if exc.estimated_s is not None and exc.budget_s is not None:  # a router reads them
            error["estimated_ms"] = round(exc.estimated_s * 1000, 1)
            error["budget_ms"] = round(exc.budget_s * 1000, 1)
        return FastJSONResponse(
            {"error": error}, status_code=503, headers={"x-should-retry": "false"}
        )
    if isinstance(exc, PromptTooLongError):
        return error_response(400, str(exc), "invalid_request_error", "messages",
                              "context_length_exceeded")  # fmt: skip
    if isinstance(exc, EngineClosedError):
        return error_response(503, str(exc), "server_error")
    return error_response(400, str(exc), "invalid_request_error")


async def _replay(first: Delta | None, stream: TokenStream) -> AsyncIterator[Delta]:
    if first is not None:
        yield first
        if first.finish_reason is not None:
            return
    async for delta in stream:
        yield delta


async def _sse(
    deltas: AsyncIterator[Delta],
    stream: TokenStream,
    budget: TokenReservation,
    completion_id: str,
    created: int,
    model: str,
    include_usage: bool,
    extras: dict[str, Any],
) -> AsyncIterator[str]:
    """Chunks as OpenAI streams them. If the client disconnects, Starlette cancels this
    generator and the finally clause aborts the request, which frees its KV, and charges
    the tenant for the tokens it was sent."""
    sent = 0
    try:
        yield chat_chunk(completion_id, created, model, {"role": "assistant", "content": ""})
        async for delta in deltas:
            sent += len(delta.token_ids)
            finish = delta.finish_reason.value if delta.finish_reason else None
            if delta.text or finish:
                content = {"content": delta.text} if delta.text else {}
                yield chat_chunk(completion_id, created, model, content, finish)
        done = stream.completion
        if done is not None:
            sent = max(sent, done.completion_tokens)  # a remote engine's deltas carry no ids
        if include_usage and done is not None:
            yield chat_chunk(
                completion_id, created, model, None, usage=usage(done),
                worthit=extras | evidence(done),
            )  # fmt: skip
        yield DONE_LINE
    finally:
        stream.abort()
        budget.settle(sent)


def usage(done: Completion) -> dict[str, Any]:
    return {
        "prompt_tokens": done.prompt_tokens,
        "completion_tokens": done.completion_tokens,
        "total_tokens": done.prompt_tokens + done.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": done.cached_tokens},
    }


def evidence(done: Completion) -> dict[str, Any]:
    """worthit's per-request evidence: timings and what the engine did."""
    return {
        "finish_reason": done.finish_reason.value,
        "truncated_messages": done.truncated_messages,
        "preemptions": done.preemptions,
        "queue_ms": None if done.queue_s is None else round(done.queue_s * 1000, 2),
        "ttft_ms": None if done.ttft_s is None else round(done.ttft_s * 1000, 2),
        "prefill_ms": round(done.prefill_s * 1000, 2),
        "e2e_ms": round(done.e2e_s * 1000, 2),
    }
