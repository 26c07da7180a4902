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

    def label(self, language: str) -> str:
        """The verdict in a shopper's words ("Better to wait", "建议再等等"): the one wording
        the templates, the compare sentences, the prompt and the page all use."""
        return _LABELS.get(language.lower()[:2], _LABELS["en"])[self]


_LABELS = {
    "en": {
        VerdictKind.BUY: "Worth buying now",
        VerdictKind.WAIT: "Better to wait",
        VerdictKind.SKIP: "Not worth buying",
        VerdictKind.INSUFFICIENT_DATA: "Not enough data yet",
    },
    "zh": {
        VerdictKind.BUY: "值得现在买",
        VerdictKind.WAIT: "建议再等等",
        VerdictKind.SKIP: "不建议购买",
        VerdictKind.INSUFFICIENT_DATA: "数据还不够，暂时无法判断",
    },
    "ja": {
        VerdictKind.BUY: "今が買い時",
        VerdictKind.WAIT: "待った方がよい",
        VerdictKind.SKIP: "おすすめしません",
        VerdictKind.INSUFFICIENT_DATA: "まだ判断できるだけのデータがありません",
    },
}


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
