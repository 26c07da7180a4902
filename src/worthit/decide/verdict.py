"""Verdict types: what the decision core answers, before any LLM is involved."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any


class VerdictKind(StrEnum):
    BUY = "BUY"
    WAIT = "WAIT"
    SKIP = "SKIP"
    INSUFFICIENT_DATA = "INSUFFICIENT_DATA"


class Polarity(StrEnum):
    """Which way a reason pushes: towards buying, waiting, skipping, or neither."""

    BUY = "buy"
    WAIT = "wait"
    SKIP = "skip"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Reason:
    code: str
    polarity: Polarity
    numbers: dict[str, float | int | str]
    text: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "polarity": self.polarity.value,
            "numbers": dict(self.numbers),
            "text": self.text,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    kind: VerdictKind
    confidence: float
    reasons: tuple[Reason, ...]
    sku: str
    language: str
    facts_version: str
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["kind"] = self.kind.value
        data["reasons"] = [r.to_dict() for r in self.reasons]
        return data
