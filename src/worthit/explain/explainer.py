"""The rules of one explanation: model text → shaping → guard → kept text, or the template.

The verdict is already out when this runs; the model only words it. Whatever goes
wrong here (an ungrounded number, an empty answer, a model error) ends in the
deterministic template, never in a missing explanation. Who drives the model is the
answer layer's business (`worthit.answer.on_demand`); the rules live here once.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field

from worthit.decide.verdict import Verdict
from worthit.explain.checker import CheckInputs, check_explanation
from worthit.explain.guard import Grounds, allowed_numbers, check_grounding
from worthit.explain.guarded_stream import GuardedStream, Refusal, RefusedError
from worthit.explain.inputs import ExplanationInputs
from worthit.explain.prompt import answer_prefix, build_messages
from worthit.explain.sanity import problem, repetitive
from worthit.explain.templates import template_explanation
from worthit.facts.sheet import FactSheet
from worthit.text.sentences import ends_sentence

DEFAULT_MAX_TOKENS = 64
"""No stop strings go with it: an explanation is one paragraph, but a new line before its
first word is layout ("because:\n1. The price…"), so the run, not the engine, decides what
a new line means (see `ExplanationRun._one_paragraph`)."""
MODEL_SENTENCES = {"en": 2, "zh": 1, "ja": 1}
"""How many of the model's sentences a shopper reads, per language: why, then (English) what
to do. Read beside their reasons (docs/benchmarks.md "Explanation quality"), the adapter's
English advice sentences were right in all but one of 100 served answers; its Chinese
ones often were not ("等价格降到16.5%以内再买", "等价格开始再买") where its first sentences
were, so Chinese and Japanese keep the model's first sentence and the card offers the watch."""
RECHECKS_KEPT = 4
"""Texts a basis remembers re-checking: its own inputs' stored text and an earlier one."""
CJK_TOKEN_FACTOR = 1.75
"""The same explanation takes about 1.75 times the tokens in Chinese or Japanese: the gold
answers' median is 71 tokens in Chinese, and 65 % of them are over 64 (English: 15 %)."""


def token_budget(language: str, max_tokens: int = DEFAULT_MAX_TOKENS) -> int:
    """The tokens an explanation may take in `language`, given the English budget."""
    return max_tokens if language == "en" else round(max_tokens * CJK_TOKEN_FACTOR)


@dataclass
class Explanation:
    text: str
    source: str
    """"llm" when the model's words were kept, "template" otherwise."""
    finish_reason: str
    fallback_reason: str | None = None
    ungrounded: tuple[str, ...] = ()
    """What the guard named: the numbers no fact backs, or the false comparisons."""
    timings_ms: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)
    """Prompt, cached and completion token counts, when the model ran."""
    cached: bool = False
    """The model's text came from the explanation store, checked again against the facts."""
    generated_at: str | None = None
    """When the model wrote it (ISO 8601), for stored text."""


@dataclass(frozen=True, slots=True)
class TextPiece:
    """A piece of the explanation's text as the shopper receives it (what the engine
    streams is `engine.streams.Delta`, with its token ids and finish reason)."""

    text: str


class FallbackError(Exception):
    """The model's text cannot be used; `explanation` is the template that replaces it."""

    def __init__(self, explanation: Explanation) -> None:
        super().__init__(explanation.fallback_reason)
        self.explanation = explanation


@dataclass(frozen=True, slots=True)
class RunBasis:
    """What an explanation run derives from its sheet and verdict before any model text:
    the inputs, the prompt, the answer's prefix and the numbers the guard allows. It is
    fixed by the verdict and the sheet's version (data age aside), so a product asked
    about again may reuse it instead of building it again (`answer.run_memo`)."""

    inputs: ExplanationInputs
    messages: list[dict[str, str]]
    prefix: str
    grounds: Grounds
    checked: CheckInputs
    """The inputs as the strict checker reads them (with the reasons' codes and polarities)."""
    rechecked: dict[str, Refusal | None] = field(default_factory=dict, compare=False)
    """Stored texts already re-checked against this basis, and what was found: the same
    best seller's text is served to every asker of its inputs, and the checks (a fifth of
    the HTTP thread's time per answer) give the same result for the same text and basis."""

    @classmethod
    def of(cls, sheet: FactSheet, verdict: Verdict) -> RunBasis:
        inputs = ExplanationInputs.of(sheet.title, verdict, sheet.currency)
        return cls(
            inputs,
            build_messages(inputs),
            answer_prefix(inputs),
            allowed_numbers(sheet, verdict),
            CheckInputs.of(sheet.title, verdict, sheet.currency),
        )


class ExplanationRun:
    """One explanation, driven piece by piece by whoever owns the model stream.

    The answer layer feeds it the engine's stream; the rules (prefix, guard, sentence
    limit, sanity checks, fallback) live here once. `feed` returns the text that is safe
    to show, or raises FallbackError. `basis` is the run's `RunBasis` when the caller has
    it already (it must be this sheet's and verdict's).
    """

    def __init__(self, sheet: FactSheet, verdict: Verdict, basis: RunBasis | None = None) -> None:
        self.sheet = sheet
        self.verdict = verdict
        self.basis = basis = basis or RunBasis.of(sheet, verdict)
        self.inputs = basis.inputs
        self.messages = basis.messages
        self.prefix = basis.prefix
        self._guard: GuardedStream | None = None
        self._started = time.perf_counter()
        self._first_piece_ms: float | None = None
        self._ended = False
        self._opening = ""
        """The model's text until its first word ("of:" is no word of the answer yet)."""
        self._lead: str | None = ""
        """The answer's first characters, held until a list marker could be told apart."""
        self._hold = ""
        """A tail that may be the next list item's marker (", 2"), not yet given to the guard."""

    @property
    def done(self) -> bool:
        """The sentences wanted are out, or the paragraph ended: stop reading the model."""
        return self._ended or (self._guard is not None and self._guard.done)

    @property
    def _stream(self) -> GuardedStream:
        """The guard, made (and given the prefix, held until the model's first sentence) when
        model text first comes: a run that ends in the template or a stored text, as most
        answers do, never needs one."""
        if self._guard is None:
            self._guard = GuardedStream(
                self.basis.grounds,
                max_sentences=MODEL_SENTENCES.get(self.inputs.language, 1),
                wording=self._wording,
            )
            self._guard.feed(self.prefix)
        return self._guard

    def _wording(self, text: str) -> Refusal | None:
        """The wording checks on the text up to a sentence end, as a shopper reads it: the
        model's usual failures (echoes, loops, a dangling end), then the strict checker
        (faithful to the reasons, naming the strongest one, fluent in the language)."""
        why = problem(text[len(self.prefix) :], self.verdict.kind)
        if why is None and repetitive(text):
            why = "repetitive"
        if why is not None:
            return why, ()
        result = check_explanation(text, self.basis.checked)
        return None if result.ok else (result.code or "refused", (result.detail,))

    def feed(self, piece: str) -> str:
        if self._first_piece_ms is None:
            self._first_piece_ms = _ms(self._started)
        piece = self._shape(piece)
        guard = self._stream
        try:
            out = guard.feed(piece)
            if repetitive(guard.text):
                guard.refuse("repetitive")
        except RefusedError as exc:
            raise FallbackError(self.fallback(exc.why, exc.named)) from None
        return out

    def _shape(self, piece: str, last: bool = False) -> str:
        """Model text as one paragraph of prose: no list marker opening it, and a second
        list item ("…all-time low, 2. The…") ends it. `last` flushes what was held."""
        piece = self._one_paragraph(piece)
        guard = self._stream
        if self._lead is not None:
            self._lead += piece
            unsure = len(self._lead.strip()) < LEAD_CHARS or _MARKER_SO_FAR.search(self._lead)
            if unsure and not last:
                return ""
            piece, self._lead = _unlisted(self._lead), None
        text = self._hold + piece
        before = guard.text[-1:]  # a space already given to the guard still counts
        marker = _NEXT_ITEM.search(before + text + (" " if last else ""))  # the end is a space
        if marker is not None:  # one item is a whole thought: end it as a sentence
            self._ended, self._hold = True, ""
            item = text[: max(0, marker.start() - len(before))].rstrip()
            written = (guard.text + item).rstrip()
            return item + ("." if written and _looks_cut(written) else "")
        held = None if last else _MAYBE_NEXT_ITEM.search(before + text)
        cut = max(0, held.start() - len(before)) if held else len(text)
        self._hold = text[cut:]
        return text[:cut]

    def _one_paragraph(self, piece: str) -> str:
        """The piece up to the paragraph's end; a new line before any word is a space."""
        if self._ended:
            return ""
        out = []
        for i, part in enumerate(piece.split("\n")):
            if i and _LETTER.search(_OPENER.sub("", self._opening)):
                self._ended = True
                break
            out.append(" " if i else "")
            out.append(part)
            self._opening += part
        return "".join(out)

    def finish(self, finish_reason: str | None = None) -> tuple[str, Explanation]:
        """The last sentences to show and the kept explanation; raises FallbackError if no
        sentence of the model's passed. Only whole, checked sentences are ever shown, so a
        run cut by the deadline or max_tokens keeps the sentences it finished."""
        guard = self._stream
        try:
            tail = guard.feed(self._shape("", last=True)) + guard.finish()
        except RefusedError as exc:
            raise FallbackError(self.fallback(exc.why, exc.named)) from None
        text = " ".join(guard.shown.split())
        if len(text) <= len(self.prefix):
            why = "incomplete" if guard.text[len(self.prefix) :].strip() else "too_short"
            raise FallbackError(self.fallback(why))
        if guard.text.rstrip() != guard.shown.rstrip() and not guard.done:
            finish_reason = finish_reason or "length"
        timings = {"llm_total": _ms(self._started)}
        if self._first_piece_ms is not None:
            timings["llm_first_token"] = self._first_piece_ms
        return tail, Explanation(text, "llm", finish_reason or "stop", timings_ms=timings)

    def cut_short(self, why: str) -> Explanation:
        """The engine ended the run early (deadline expired, error, abort): the sentences a
        reader has already seen stand, as the answer; with none shown, the template."""
        shown = "" if self._guard is None else " ".join(self._guard.shown.split())
        if len(shown) <= len(self.prefix):
            raise FallbackError(self.fallback(why))
        return Explanation(shown, "llm", why, timings_ms={"llm_total": _ms(self._started)})

    def recheck(self, text: str) -> Refusal | None:
        """Why a stored explanation may not be shown against this run's facts (the guard
        and the wording checks its generation passed, run again), or None. Found once per
        text and basis (`RunBasis.rechecked`)."""
        memo = self.basis.rechecked
        if text in memo:
            return memo[text]
        found = self._recheck(text)
        if len(memo) >= RECHECKS_KEPT:
            memo.clear()
        memo[text] = found
        return found

    def _recheck(self, text: str) -> Refusal | None:
        result = check_grounding(text, self.basis.grounds)
        if not result.ok:
            return result.failure
        if not text.startswith(self.prefix):
            return "other_verdict", ()
        return self._wording(text)

    def fallback(self, why: str, ungrounded: tuple[str, ...] = ()) -> Explanation:
        """The template in place of the model's text, saying why."""
        return Explanation(
            text=template_explanation(self.verdict, self.sheet),
            source="template",
            finish_reason="fallback",
            fallback_reason=why,
            ungrounded=ungrounded,
            timings_ms={"llm_total": _ms(self._started)},
        )


_LETTER = re.compile(r"[^\W\d_]")
_OPENER = re.compile(r"^\s*of\b", re.IGNORECASE)
LEAD_CHARS = 6
_MARKER_SO_FAR = re.compile(r"(?:\d{1,2}[.)、]?|[-*•])$")
"""The lead ends where a list marker may still be forming ("1", "1)"): keep holding."""
_LIST_MARKER = re.compile(r"^(\s*(?:of\s*)?[:：]?)\s*(?:\d{1,2}[.)、]|[-*•])(?=\s)\s*")
"""A list opened right after the headline ("because: 1. The price…", "because:\n- it")."""


_NEXT_ITEM = re.compile(r"(?:[,;，；]\s*|\s+)[2-9][.)、](?=\s)")
"""The next item of a list the model started ("…its low, 2. The…"): one digit, two to nine.
A sale's name that ends a sentence ("ahead of Double 12. Wait…") is no list marker."""
_MAYBE_NEXT_ITEM = re.compile(r"(?:[,;，；]\s*\d{0,2}|\s+\d{1,2})[.)、]?$")
"""Held back until the next character: " 2" may become " 2. The…" or " 20%"."""


def _unlisted(lead: str) -> str:
    """The answer's start without a list marker: one or two sentences are not a list, and
    a "1." reads to the guard as a number and to the sentence counter as a full stop."""
    return _LIST_MARKER.sub(lambda m: m[1] + " ", lead, count=1)


def _looks_cut(text: str) -> bool:
    return not ends_sentence(text)


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
