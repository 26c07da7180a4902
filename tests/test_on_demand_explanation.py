"""The engine-driven explanation: whatever the engine ends with, the shopper gets text."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from worthit.answer.on_demand import explain_on_demand
from worthit.decide.decider import Decision, DecisionStatus
from worthit.decide.intent import parse_intent
from worthit.decide.verdict import Verdict
from worthit.engine.sequence import FinishReason
from worthit.engine.streams import Delta as EngineDelta
from worthit.explain.explainer import Explanation
from worthit.explain.templates import template_explanation

from factories import make_sheet, make_verdict


class EndsWith:
    """A stream that sends some text, then ends with the given finish reason."""

    def __init__(self, texts: list[str], finish: FinishReason) -> None:
        self.deltas = [EngineDelta("r", t, ()) for t in texts]
        self.deltas.append(EngineDelta("r", "", (), finish))
        self.completion = None
        self.aborted = False

    def __aiter__(self) -> EndsWith:
        return self

    async def __anext__(self) -> EngineDelta:
        if not self.deltas:
            raise StopAsyncIteration
        return self.deltas.pop(0)

    def abort(self) -> None:
        self.aborted = True


class Engine:
    def __init__(self, stream: EndsWith) -> None:
        self.stream = stream

    def submit(self, **_: Any) -> EndsWith:
        return self.stream


def explanation_for(stream: EndsWith, verdict: Verdict | None = None) -> Explanation:
    decision = Decision(
        question="Is it worth buying?",
        intent=parse_intent("Is the Aurora NC700 worth buying?"),
        status=DecisionStatus.ANSWERED,
        verdict=verdict or make_verdict(),
        sheet=make_sheet(),
    )

    async def last() -> Explanation:
        items = [item async for item in explain_on_demand(decision, Engine(stream))]  # type: ignore[arg-type]
        assert isinstance(items[-1], Explanation)
        return items[-1]

    return asyncio.run(last())


SALE = " a sale at 259.00 USD starts in 6.5 days."
"""A sentence that passes every check for the default verdict (a WAIT for that sale)."""


@pytest.mark.parametrize("finish", [FinishReason.ERROR, FinishReason.ABORT])
def test_an_engine_that_fails_before_a_whole_sentence_ends_in_the_template(
    finish: FinishReason,
) -> None:
    stream = EndsWith([" a sale at 259.00 USD starts"], finish)
    final = explanation_for(stream)
    assert (final.source, final.fallback_reason) == ("template", f"engine_{finish}")
    assert final.text == template_explanation(make_verdict(), make_sheet())
    assert stream.aborted


@pytest.mark.parametrize("finish", [FinishReason.ERROR, FinishReason.ABORT])
def test_an_engine_that_fails_after_a_checked_sentence_keeps_it(finish: FinishReason) -> None:
    """The shopper has read that sentence, and it passed every check: it stands; it is
    never replaced by other words."""
    stream = EndsWith([SALE, " The price"], finish)
    final = explanation_for(stream)
    assert final.source == "llm"
    assert final.text == "Better to wait because" + SALE


def test_a_stream_that_stops_normally_is_kept() -> None:
    stream = EndsWith([SALE], FinishReason.STOP)
    assert explanation_for(stream).source == "llm"


def test_a_verdict_without_reasons_gets_the_template_without_asking_the_engine() -> None:
    """Nothing to name, so whatever the model wrote was made up ("because once the price
    settles, a 5G Smartphone from Stratus A50 drops to 5.00"), and the checker refuses it."""
    stream = EndsWith([" once the price settles, it drops to 5.00."], FinishReason.STOP)
    bare = make_verdict(reasons=())
    final = explanation_for(stream, bare)
    assert (final.source, final.fallback_reason) == ("template", "no_reasons")
    assert final.text == template_explanation(bare, make_sheet())
    assert len(stream.deltas) == 2  # never read
