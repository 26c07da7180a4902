"""Streams model text through the grounding guard without letting a bad number out.

Text is released up to the last point where no number can still be growing (a trailing
"29" may become "299" or "29.5" with the next token), and everything released so far is
re-checked as a whole, so a number is never judged from half its digits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from decimal import Decimal

from worthit.explain.guard import Grounds, GuardResult, check_grounding
from worthit.text.sentences import sentence_ends

_TRAILING_NUMBER = re.compile(r"[\d０-９][\d０-９.,，/\-－]*[kK千万萬亿億]?\s*$|[.,][\d０-９]*$")
"""A number that may still grow; a date ("2026-11-"), a range ("5-") or a day waiting for
its month ("13 " before "November") counts as one."""


class UngroundedError(ValueError):
    def __init__(self, result: GuardResult) -> None:
        why, named = result.failure
        super().__init__(f"{why}: " + "; ".join(named))
        self.result = result


class GuardedStream:
    def __init__(self, allowed: Grounds | Iterable[Decimal], max_sentences: int = 2) -> None:
        self.allowed = allowed if isinstance(allowed, Grounds) else Grounds(frozenset(allowed))
        self.max_sentences = max_sentences
        self.text = ""
        self.released = 0

    @property
    def shown(self) -> str:
        """Everything released so far: what a reader has already seen."""
        return self.text[: self.released]

    @property
    def done(self) -> bool:
        """True once the released text holds the sentences asked for."""
        return len(sentence_ends(self.text[: self.released])) >= self.max_sentences

    def feed(self, delta: str) -> str:
        """Add model text; return the newly safe part, or raise UngroundedError."""
        self.text += delta
        match = _TRAILING_NUMBER.search(self.text)
        cut = match.start() if match else len(self.text)
        return self._release(cut)

    def finish(self) -> str:
        """Release the rest at the end of generation, trimmed to the sentence limit."""
        return self._release(len(self.text))

    def _release(self, cut: int) -> str:
        cut = min(cut, self._sentence_limit())
        if cut <= self.released:
            return ""
        result = check_grounding(self.text[:cut], self.allowed)
        if not result.ok:
            raise UngroundedError(result)
        out = self.text[self.released : cut]
        self.released = cut
        return out

    def _sentence_limit(self) -> int:
        ends = sentence_ends(self.text)
        if len(ends) >= self.max_sentences:
            return ends[self.max_sentences - 1]
        return len(self.text)
