"""Streams model text to the shopper one checked sentence at a time.

A sentence is released only once it is complete and the text up to its end has passed
every check: the grounding guard (every number backed by a fact, no false comparison) and
the wording checks the run is given. So nothing a reader has seen is ever withdrawn: a
sentence that fails before anything was shown makes the run fall back to the template;
one that fails after an earlier sentence was shown ends the answer at that sentence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from decimal import Decimal

from worthit.explain.guard import Grounds, GuardResult, check_grounding
from worthit.text.sentences import sentence_ends

_MAYBE_DECIMAL = ".…"

Refusal = tuple[str, tuple[str, ...]]
"""Why text may not be shown (a short code) and what it names (numbers, claims, words)."""
WordingCheck = Callable[[str], Refusal | None]
"""Judges the text up to a sentence end, prefix included, as the shopper would read it."""


class RefusedError(ValueError):
    """The first sentence failed a check: nothing was shown, the template replaces it."""

    def __init__(self, why: str, named: tuple[str, ...] = ()) -> None:
        super().__init__(f"{why}: " + "; ".join(named) if named else why)
        self.why = why
        self.named = named


class UngroundedError(RefusedError):
    def __init__(self, result: GuardResult) -> None:
        super().__init__(*result.failure)
        self.result = result


class GuardedStream:
    def __init__(
        self,
        allowed: Grounds | Iterable[Decimal],
        max_sentences: int = 2,
        wording: WordingCheck | None = None,
    ) -> None:
        self.allowed = allowed if isinstance(allowed, Grounds) else Grounds(frozenset(allowed))
        self.max_sentences = max_sentences
        self.wording = wording
        self.text = ""
        self.released = 0
        self.refused: Refusal | None = None
        """Why a sentence after the shown ones was refused; the answer ends before it."""

    @property
    def shown(self) -> str:
        """Everything released so far: what a reader has already seen."""
        return self.text[: self.released]

    @property
    def done(self) -> bool:
        """True once the sentences asked for are out, or a later one was refused."""
        return self.refused is not None or (
            len(sentence_ends(self.shown)) >= self.max_sentences
        )

    def feed(self, delta: str) -> str:
        """Add model text; return the newly released sentences, or raise RefusedError."""
        self.text += delta
        return self._release(final=False)

    def finish(self) -> str:
        """Release what is left at the end of generation: whole sentences only."""
        return self._release(final=True)

    def refuse(self, why: str, named: tuple[str, ...] = ()) -> None:
        """A check outside the stream failed: fall back if nothing is shown, else end here."""
        if not self.shown:
            raise RefusedError(why, named)
        self.refused = (why, named)

    def _release(self, final: bool) -> str:
        """While the model writes, a full stop at the very end may still be a decimal point
        ("$249" + ".00"): it ends a sentence once more text follows, or at the end."""
        out = ""
        if self.refused is not None:
            return out
        for end in sentence_ends(self.text)[: self.max_sentences]:
            if end <= self.released:
                continue
            if not final and end == len(self.text) and self.text[end - 1] in _MAYBE_DECIMAL:
                break
            why = self._judge(self.text[:end])
            if why is not None:
                self.refuse(*why)
                break
            out += self.text[self.released : end]
            self.released = end
        return out

    def _judge(self, text: str) -> Refusal | None:
        result = check_grounding(text, self.allowed)
        if not result.ok:
            if not self.shown:
                raise UngroundedError(result)
            return result.failure
        return None if self.wording is None else self.wording(text)
