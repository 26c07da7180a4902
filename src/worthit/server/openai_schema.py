"""Request body of POST /v1/chat/completions, as the OpenAI API defines it, plus the
two worthit extensions ``priority`` and ``deadline_ms``.

Unknown fields are ignored (OpenAI clients send many we do not use); known fields are
validated strictly, so a bad value gets a 400 naming the field.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: str


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")

    include_usage: bool = False


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    model: str | None = None
    messages: list[Message] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float = Field(default=1.0, ge=0.0, le=2.0)
    top_p: float = Field(default=1.0, gt=0.0, le=1.0)
    top_k: int = Field(default=0, ge=0)
    seed: int | None = None
    stop: str | list[str] | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(default=1, ge=1, le=1)
    priority: Literal["high", "medium", "low"] = "medium"
    deadline_ms: int | None = Field(default=None, ge=1)
    deadline_policy: Literal["complete", "sentence"] = "complete"
    """complete: admitted only when max_tokens are expected by the deadline; sentence:
    admitted when a first sentence fits, stopped at a sentence end (finish_reason
    "deadline")."""

    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)
