"""The explanation flow: prompt → model stream → guard → text, or the template instead.

The verdict is already out when this runs; the model only words it. Whatever goes
wrong here (an ungrounded number, an empty answer, a model error) ends in the
deterministic template, never in a missing explanation.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from worthit.decide.verdict import Verdict
from worthit.explain.guard import allowed_numbers
from worthit.explain.guarded_stream import GuardedStream, UngroundedError
from worthit.explain.prompt import answer_prefix, build_messages
from worthit.explain.sanity import problem, repetitive
from worthit.explain.templates import template_explanation
from worthit.facts.sheet import FactSheet
from worthit.market.entities import Review

DEFAULT_MAX_TOKENS = 64
STOP = ["\n"]
"""An explanation is one paragraph: a new line is the model starting something else."""


class TextStreamer(Protocol):
    """Anything that turns chat messages into streamed text (llama.cpp, the engine, a remote)."""

    def stream(
        self,
        messages: list[dict[str, str]],
        max_tokens: int = ...,
        temperature: float = ...,
        stop: list[str] | None = ...,
        answer_prefix: str = ...,
    ) -> Iterator[str]: ...


@dataclass
class Explanation:
    text: str
    source: str
    """"llm" when the model's words were kept, "template" otherwise."""
    finish_reason: str
    fallback_reason: str | None = None
    ungrounded: tuple[str, ...] = ()
    streamed: str = ""
    """What had been shown from the model before a fallback (empty when kept)."""
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


def explain(
    sheet: FactSheet,
    reviews: Sequence[Review],
    verdict: Verdict,
    question: str,
    streamer: TextStreamer | None,
    max_tokens: int = DEFAULT_MAX_TOKENS,
) -> Iterator[Delta | Explanation]:
    """Yields guarded text deltas, then one Explanation (the last item, always).

    The answer is started for the model with the verdict's headline ("Better to wait
    because"), so what it writes is the reason, not a new verdict.
    """
    started = time.perf_counter()
    if streamer is None:
        yield _template(sheet, verdict, "no_model", "", started)
        return
    guard = GuardedStream(allowed_numbers(sheet, verdict))
    messages = build_messages(sheet, reviews, verdict, question)
    prefix = answer_prefix(verdict)
    pending = guard.feed(prefix)
    first_token_ms: float | None = None
    finish = "stop"
    try:
        stream = streamer.stream(
            messages, max_tokens=max_tokens, temperature=0.0, stop=STOP, answer_prefix=prefix
        )
        for piece in stream:
            if first_token_ms is None:
                first_token_ms = _ms(started)
            out = pending + guard.feed(piece)
            pending = ""
            if out:
                yield Delta(out)
            if guard.done:
                break
            if repetitive(guard.text):
                yield _template(sheet, verdict, "repetitive", guard.shown, started)
                return
        else:
            finish = "length" if _looks_cut(guard.text) else "stop"
        tail = pending + guard.finish()
        if tail:
            yield Delta(tail)
    except UngroundedError as exc:
        yield _template(sheet, verdict, "ungrounded", guard.shown, started, exc.result.ungrounded)
        return
    text = " ".join(guard.shown.split())
    why = problem(text[len(prefix) :], verdict.kind)
    if why is not None:
        yield _template(sheet, verdict, why, guard.shown, started)
        return
    timings = {"llm_total": _ms(started)}
    if first_token_ms is not None:
        timings["llm_first_token"] = first_token_ms
    yield Explanation(text=text, source="llm", finish_reason=finish, timings_ms=timings)


def _template(
    sheet: FactSheet,
    verdict: Verdict,
    why: str,
    streamed: str,
    started: float,
    ungrounded: tuple[str, ...] = (),
) -> Explanation:
    return Explanation(
        text=template_explanation(verdict, sheet),
        source="template",
        finish_reason="fallback",
        fallback_reason=why,
        ungrounded=ungrounded,
        streamed=streamed,
        timings_ms={"llm_total": _ms(started)},
    )


def _looks_cut(text: str) -> bool:
    return not text.rstrip().endswith((".", "!", "?", "。", "！", "？"))


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
