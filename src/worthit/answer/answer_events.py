"""What the answer flow yields, in order: the verdict, text deltas, then the finished answer.

The verdict event comes before any model work starts, so every caller (the CLI, the SSE
stream, the chat model) can show it while the explanation is still being written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worthit.audit import Receipt
from worthit.decide.decider import Decision
from worthit.engine.sequence import Priority
from worthit.explain.explainer import Explanation, TextPiece


@dataclass(frozen=True, slots=True)
class VerdictReady:
    decision: Decision
    timings_ms: dict[str, float]
    """The decision's stages and `to_verdict`, measured from the start of the answer."""


@dataclass
class Finished:
    decision: Decision
    explanation: Explanation | None
    """None when there is nothing to explain (the question was not answered)."""
    priority: Priority
    """The class the answer ran at: the tenant's ceiling or lower, never higher."""
    timings_ms: dict[str, float] = field(default_factory=dict)
    request_id: str = ""
    """The answer's id: the caller's, or one made up for it (its audit leaf carries it)."""
    receipt: Receipt | None = None
    """Where the answer sits in the audit log (None: the flow keeps no log)."""

    @property
    def generated_tokens(self) -> int:
        """Tokens the model generated for this answer (0 for a stored or template text):
        what a tenant's LLM budget is charged."""
        if self.explanation is None:
            return 0
        return self.explanation.tokens.get("completion", 0)


Event = VerdictReady | TextPiece | Finished

__all__ = ["Event", "Finished", "TextPiece", "VerdictReady"]
