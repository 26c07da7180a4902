"""Test doubles of vLLM's and SGLang's OpenAI-compatible servers, speaking their
documented streaming wire, for the engines that cannot run on this machine (no GPU).

What each says is what their docs and servers say: `GET /v1/models` with `owned_by`
"vllm" or "sglang"; `POST /v1/chat/completions` with `stream: true` answers SSE
`chat.completion.chunk`s, a first one with the assistant role, one per token with its
`delta.content`, the last with `finish_reason` ("length" at max_tokens, else "stop";
SGLang adds `matched_stop`), then with `stream_options.include_usage` a chunk with no
choices and the `usage`, then `data: [DONE]`. vLLM writes `"usage": null` in the other
chunks when usage is asked for. The text is fixed: these doubles show that worthit reads
the wire, not that a model writes well. Every request body goes to a JSON-lines log.

Run: python wire_doubles.py {vllm|sglang} PORT LOG
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"
WORDS = ("it", " is", " at", " a", " good", " price", " today", ".")
"""The continuation every request gets, a token a chunk."""
TOKEN_S = 0.01


def app(kind: str, log: Path) -> Starlette:
    async def models(request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [
            {"id": MODEL, "object": "model", "created": int(time.time()), "owned_by": kind,
             "root": MODEL, "parent": None, "max_model_len": 8192},
        ]})  # fmt: skip

    async def chat(request: Request) -> StreamingResponse | JSONResponse:
        body = await request.json()
        with log.open("a") as out:
            out.write(json.dumps(body) + "\n")
        if not body.get("stream"):
            return JSONResponse({"error": {"message": "the double streams only"}}, 400)
        return StreamingResponse(_chunks(kind, body), media_type="text/event-stream")

    return Starlette(routes=[
        Route("/v1/models", models), Route("/v1/chat/completions", chat, methods=["POST"]),
    ])  # fmt: skip


async def _chunks(kind: str, body: dict[str, Any]) -> AsyncIterator[str]:
    usage_asked = bool((body.get("stream_options") or {}).get("include_usage"))
    words = WORDS[: int(body.get("max_tokens") or len(WORDS))]
    finish = "length" if len(words) < len(WORDS) else "stop"
    base = {"id": "chatcmpl-double", "object": "chat.completion.chunk",
            "created": int(time.time()), "model": MODEL}  # fmt: skip

    def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> str:
        choice: dict[str, Any] = {"index": 0, "delta": delta, "logprobs": None,
                                  "finish_reason": finish_reason}  # fmt: skip
        if kind == "sglang" and finish_reason is not None:
            choice["matched_stop"] = 2 if finish_reason == "stop" else None
        data: dict[str, Any] = base | {"choices": [choice]}
        if usage_asked and kind == "vllm":
            data["usage"] = None
        return f"data: {json.dumps(data)}\n\n"

    yield chunk({"role": "assistant", "content": ""})
    for i, word in enumerate(words):
        await asyncio.sleep(TOKEN_S)
        yield chunk({"content": word}, finish if i == len(words) - 1 else None)
    if usage_asked:
        prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        usage = {"prompt_tokens": prompt, "completion_tokens": len(words),
                 "total_tokens": prompt + len(words)}  # fmt: skip
        yield f"data: {json.dumps(base | {'choices': [], 'usage': usage})}\n\n"
    yield "data: [DONE]\n\n"


if __name__ == "__main__":
    kind, port, log_path = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    uvicorn.run(app(kind, log_path), host="127.0.0.1", port=port, log_level="warning")
