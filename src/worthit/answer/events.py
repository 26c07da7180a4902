"""What the answer flow yields, in order: the verdict, text deltas, then the finished answer.

The verdict event comes before any model work starts, so every caller (the CLI, the SSE
stream, the chat model) can show it while the explanation is still being written.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worthit.decide.decider import Decision
from worthit.engine.sequence import Priority
from worthit.explain.explainer import Delta, Explanation


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


Event = VerdictReady | Delta | Finished

__all__ = ["Delta", "Event", "Finished", "VerdictReady"]
