"""Errors a caller of the engine can catch by kind."""

from __future__ import annotations


class EngineError(Exception):
    """Base of every error the engine raises on purpose."""


class ModelLoadError(EngineError):
    """The GGUF could not be loaded or a llama.cpp context could not be created."""


class EngineClosedError(EngineError):
    """The engine was shut down; it takes no more requests."""


class PromptTooLongError(EngineError):
    """Even after dropping old turns the prompt does not fit the context."""

    def __init__(self, n_tokens: int, limit: int) -> None:
        super().__init__(f"prompt needs {n_tokens} tokens, the context allows {limit}")
        self.n_tokens = n_tokens
        self.limit = limit


class AdmissionRefusedError(EngineError):
    """The request was refused at once instead of being queued to fail late.

    ``reason`` is ``"deadline"`` (the estimate says the first sentence cannot be
    streamed before the deadline) or ``"queue_full"``. The caller answers without the
    LLM (the decision flow sends its template text).
    """

    def __init__(
        self,
        request_id: str,
        reason: str,
        estimated_s: float | None = None,
        budget_s: float | None = None,
    ) -> None:
        detail = ""
        if estimated_s is not None and budget_s is not None:
            detail = f": needs ~{estimated_s * 1000:.0f} ms, deadline in {budget_s * 1000:.0f} ms"
        super().__init__(f"request {request_id} refused ({reason}){detail}")
        self.request_id = request_id
        self.reason = reason
        self.estimated_s = estimated_s
        self.budget_s = budget_s
