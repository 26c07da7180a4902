"""What an explanation depends on, and nothing else: the explanation's inputs.

The explanation words a verdict the facts already fixed, so it needs the product's title,
the verdict, its leading reasons with their numbers, and the language; not the question's
wording, not the facts version, not the time. Two askers of the same inputs get
byte-identical prompts, and a fact that changes no reason (stock from 950 to 949) changes
no input: that is what lets one checked explanation serve every asker of those inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from worthit.decide.verdict import Verdict, VerdictKind
from worthit.explain.templates import language_of, leading_reasons
from worthit.explain.untrusted import clean_untrusted, neutralise_markers

TITLE_MAX_CHARS = 120


@dataclass(frozen=True, slots=True)
class ExplanationInputs:
    title: str
    """The catalogue title, cleaned as untrusted text (sellers write titles)."""
    verdict: VerdictKind
    reasons: tuple[str, ...]
    """The sentences of the reasons the template would lead with, numbers included."""
    language: str
    """"en" or "zh"."""

    @classmethod
    def of(cls, title: str, verdict: Verdict) -> ExplanationInputs:
        return cls(
            title=neutralise_markers(clean_untrusted(title, TITLE_MAX_CHARS)),
            verdict=verdict.kind,
            reasons=tuple(r.text.strip() for r in leading_reasons(verdict)),
            language=language_of(verdict),
        )

    @property
    def label(self) -> str:
        return self.verdict.label(self.language)
