"""What the answer flow needs of an engine, so the in-process `Engine` and a remote one
(`remote.RemoteEngine`, `router.Router` over several) serve it alike.

Why a Protocol and not a base class: `Engine` was there first and owns a thread and a
llama.cpp context; the remote client owns an HTTP pool. They share no code, only this
shape. A remote engine learns of a refusal only once it has asked, so a caller must
expect `AdmissionRefusedError`, `PromptTooLongError` and `EngineClosedError` from
`submit` and from the stream's first item alike; a replica that dies or cannot be
reached ends the stream with `finish_reason` "error" instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from worthit.engine.chat import ChatMessage
from worthit.engine.sequence import Priority, SamplingParams
from worthit.engine.streams import Completion, Delta


class TokenStream(Protocol):
    """One request's deltas; `completion` once they end; `abort()` frees the request."""

    @property
    def request_id(self) -> str: ...

    @property
    def completion(self) -> Completion | None: ...

    def __aiter__(self) -> TokenStream: ...

    async def __anext__(self) -> Delta: ...

    def abort(self) -> None: ...


class EngineBackend(Protocol):
    """An engine the answer flow can ask for an explanation."""

    @property
    def model_id(self) -> str: ...

    def submit(
        self,
        *,
        messages: Sequence[ChatMessage] | None = None,
        params: SamplingParams | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
        answer_prefix: str = "",
        tenant: str | None = None,
    ) -> TokenStream: ...
