"""The OpenAI-compatible HTTP API over the engine.

The same protocol as the anchors (llama-server, ``python -m llama_cpp.server``), so one
benchmark client measures all three. worthit adds three request fields: ``priority``
(high/medium/low), ``deadline_ms`` and ``deadline_policy`` ("complete", the default:
all of max_tokens by the deadline; or "sentence"); a request the engine cannot serve
before its deadline is refused at once with HTTP 503, ``code: "deadline_unmeetable"`` and
``x-should-retry: false`` (the OpenAI SDK would otherwise retry it, late).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Completion, Engine, RequestStream
from worthit.engine.errors import AdmissionRefusedError, EngineClosedError, PromptTooLongError
from worthit.engine.sequence import DeadlinePolicy, Priority, SamplingParams
from worthit.server.openai_schema import ChatCompletionRequest

DEFAULT_MAX_TOKENS = 256

ModelRoute = Callable[[ChatCompletionRequest, Request], Awaitable[JSONResponse | StreamingResponse]]
"""A model id served by something other than plain chat on the engine (`worthit`)."""


def error_response(
    status: int, message: str, kind: str, param: str | None = None, code: str | None = None
) -> JSONResponse:
    """OpenAI's error shape, so SDKs raise their typed errors with our message."""
    headers = {"x-should-retry": "false"} if status >= 500 else None
    body = {"error": {"message": message, "type": kind, "param": param, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def openai_validation_error(exc: RequestValidationError) -> JSONResponse:
    """A 400 in OpenAI's shape naming the first bad field (what the SDKs expect)."""
    first = exc.errors()[0] if exc.errors() else {}
    loc = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(loc) or None
    message = f"{param}: {first.get('msg', 'invalid value')}" if param else "invalid body"
    return error_response(400, message, "invalid_request_error", param)


def create_app(
    engine_config: EngineConfig | None = None,
    model_path: str | Path | None = None,
    *,
    engine: Engine | None = None,
) -> FastAPI:
    """The app; it loads the GGUF at startup and closes the engine at shutdown.

    Pass ``engine`` instead of a model path to serve an engine you built (tests do,
    with a fake runner); the app then starts it but leaves closing it to you.
    """
    if engine is None and model_path is None:
        raise ValueError("give model_path or engine")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        owned = engine is None
        if engine is None:
            assert model_path is not None
            app.state.engine = Engine.from_gguf(model_path, engine_config)
        else:
            engine.start()
            app.state.engine = engine
        for hook in app.state.on_engine_ready:
            hook(app)
        try:
            yield
        finally:
            if owned:
                app.state.engine.close()

    app = FastAPI(title="worthit", lifespan=lifespan)
    app.state.on_engine_ready = []
    """Callables run with the app once the engine is up (the service warms its cache)."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return openai_validation_error(exc)

    @app.get("/healthz")
    async def healthz(request: Request) -> dict[str, Any]:
        eng: Engine = request.app.state.engine
        return {
            "status": "ok",
            "model": eng.model_id,
            "running": len(eng.scheduler.running),
            "waiting": len(eng.scheduler.waiting),
            "kv_usage": round(eng.blocks.usage, 4),
        }

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        eng: Engine = request.app.state.engine
        return Response(generate_latest(eng.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    app.state.model_routes = {}

    @app.get("/v1/models")
    async def models(request: Request) -> dict[str, Any]:
        eng: Engine = request.app.state.engine
        ids = [*request.app.state.model_routes, eng.model_id]
        return {
            "object": "list",
            "data": [
                {"id": model_id, "object": "model", "created": 0, "owned_by": "worthit"}
                for model_id in ids
            ],
        }

    @app.post("/v1/chat/completions", response_model=None)
    async def chat_completions(
        body: ChatCompletionRequest, request: Request
    ) -> JSONResponse | StreamingResponse:
        routed: ModelRoute | None = request.app.state.model_routes.get(body.model or "")
        if routed is not None:
            return await routed(body, request)
        eng: Engine = request.app.state.engine
        try:
            params = SamplingParams(
                max_tokens=body.max_completion_tokens or body.max_tokens or DEFAULT_MAX_TOKENS,
                temperature=body.temperature,
                top_p=body.top_p,
                top_k=body.top_k,
                seed=body.seed,
                stop=body.stop_strings(),
            )
            stream = eng.submit(
                messages=[m.model_dump() for m in body.messages],
                params=params,
                priority=Priority[body.priority.upper()],
                deadline_s=None if body.deadline_ms is None else body.deadline_ms / 1000,
                deadline_policy=DeadlinePolicy(body.deadline_policy),
            )
        except AdmissionRefusedError as exc:
            code = "deadline_unmeetable" if exc.reason == "deadline" else exc.reason
            return error_response(503, str(exc), "admission_refused", "deadline_ms", code)
        except PromptTooLongError as exc:
            return error_response(400, str(exc), "invalid_request_error", "messages",
                                  "context_length_exceeded")  # fmt: skip
        except EngineClosedError as exc:
            return error_response(503, str(exc), "server_error")
        except ValueError as exc:
            return error_response(400, str(exc), "invalid_request_error")
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        if body.stream:
            include_usage = bool(body.stream_options and body.stream_options.include_usage)
            return StreamingResponse(
                _sse(stream, completion_id, created, eng.model_id, include_usage),
                media_type="text/event-stream",
                headers={"cache-control": "no-cache"},
            )
        try:
            done = await stream.collect()
        finally:
            stream.abort()  # no-op when finished; frees the KV if the client went away
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": eng.model_id,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": done.text},
                        "finish_reason": done.finish_reason.value,
                    }
                ],
                "usage": _usage(done),
                "worthit": _extras(done),
            }
        )

    return app


def chat_chunk(
    completion_id: str,
    created: int,
    model: str,
    delta: dict[str, str] | None,
    finish: str | None = None,
    **extra: Any,
) -> str:
    """One `chat.completion.chunk` SSE line; `delta=None` sends no choices (the usage chunk)."""
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    data = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": choices,
        **extra,
    }
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


async def _sse(
    stream: RequestStream, completion_id: str, created: int, model: str, include_usage: bool
) -> AsyncIterator[str]:
    """Chunks as OpenAI streams them. If the client disconnects, Starlette cancels this
    generator and the finally clause aborts the request, which frees its KV."""
    try:
        yield chat_chunk(completion_id, created, model, {"role": "assistant", "content": ""})
        async for delta in stream:
            finish = delta.finish_reason.value if delta.finish_reason else None
            if delta.text or finish:
                content = {"content": delta.text} if delta.text else {}
                yield chat_chunk(completion_id, created, model, content, finish)
        done = stream.completion
        if include_usage and done is not None:
            yield chat_chunk(
                completion_id, created, model, None, usage=_usage(done), worthit=_extras(done)
            )
        yield "data: [DONE]\n\n"
    finally:
        stream.abort()


def _usage(done: Completion) -> dict[str, Any]:
    return {
        "prompt_tokens": done.prompt_tokens,
        "completion_tokens": done.completion_tokens,
        "total_tokens": done.prompt_tokens + done.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": done.cached_tokens},
    }


def _extras(done: Completion) -> dict[str, Any]:
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


def serve(
    host: str = "127.0.0.1",
    port: int = 8000,
    model: str | Path | None = None,
    engine_config: EngineConfig | None = None,
) -> None:
    """Run the OpenAI-compatible API until interrupted (``python -m worthit.server``),
    the engine on this thread (server/runtime.py)."""
    from worthit.engine.model_files import resolve_model_path
    from worthit.engine.runner import LlamaRunner
    from worthit.server import runtime

    config = engine_config or EngineConfig()
    engine = Engine(LlamaRunner(resolve_model_path(model), config), config)
    engine.claim_current_thread()
    runtime.run(create_app(engine=engine), engine, host, port)
