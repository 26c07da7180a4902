"""Request body of POST /v1/chat/completions, as the OpenAI API defines it, plus the
worthit extensions ``priority``, ``deadline_ms`` and ``deadline_policy``.

Unknown fields are ignored (OpenAI clients send many we do not use); known fields are
validated strictly, so a bad value gets a 400 naming the field. Every number has an
upper bound: an unbounded integer reaches arithmetic that overflows (a 500, not a 400).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from worthit.http.fields import ENCODABLE, Text

MAX_COMPLETION_TOKENS = 2048
"""The most a plain chat request may generate (the context is shared by every request)."""
MAX_DEADLINE_MS = 600_000
MAX_USER_CHARS = 256


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: Text


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: Text | None = None
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_COMPLETION_TOKENS)
    max_completion_tokens: int | None = Field(default=None, ge=1, le=MAX_COMPLETION_TOKENS)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0, le=1_000_000)
    seed: int | None = Field(default=None, ge=-(2**63), lt=2**64)
    stop: Text | list[Text] | None = Field(default=None, max_length=4)
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=1)
    user: Annotated[str, StringConstraints(max_length=MAX_USER_CHARS), ENCODABLE] | None = None
    """OpenAI's end-user id: the engine's fair-share key where the server has no keys
    (how the API workers name their tenant to a `worthit engine serve` replica); with
    keys the share is the key's tenant, whatever this says."""
    priority: Literal["high", "medium", "low", "background"] | None = None
    """At most the key's class; none asked: the key's class (medium without keys).
    background: no deadline, tokens only when no other class needs the engine."""
    deadline_ms: int | None = Field(default=None, ge=1, le=MAX_DEADLINE_MS)
    deadline_policy: Literal["complete", "sentence"] = "complete"
    """complete: admitted only when max_tokens are expected by the deadline; sentence:
    admitted when a first sentence fits, stopped at a sentence end (finish_reason
    "deadline")."""

    continue_final_message: bool = False
    """vLLM's field: the final assistant message is the start of the answer, continued
    (the engine's answer_prefix) instead of closed and followed by a new turn."""
    add_generation_prompt: bool = True
    """vLLM's companion field; worthit continues or opens the assistant's turn by
    continue_final_message alone."""

    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
