"""Admission on the expected length: the ``complete`` policy prices what recent answers
needed (a high quantile, at most max_tokens), and one that runs longer stops at a
sentence end with "deadline"."""

from __future__ import annotations

import asyncio
from collections import deque

import pytest

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.errors import AdmissionRefusedError
from worthit.engine.sequence import DeadlinePolicy, FinishReason, SamplingParams
from worthit.engine.timing.lengths import MIN_SAMPLES, CompletionLengths, kaplan_meier_quantile

from engine_fakes import ScriptedRunner

COMPLETE = DeadlinePolicy.COMPLETE
SHORT = "Fine. "
LONG = "Ok. " + "This one keeps on going for a while. " * 20


def test_policies_price_their_promise():
    sentence, complete = DeadlinePolicy.SENTENCE, DeadlinePolicy.COMPLETE
    assert sentence.required_tokens(48, 12, 30) == sentence.required_tokens(48, 12) == 12
    assert complete.required_tokens(48, 12) == 48  # nothing known yet: all of max_tokens
    assert complete.required_tokens(48, 12, 30) == 30
    assert complete.required_tokens(20, 12, 30) == 20  # bounded by max_tokens
    assert complete.required_tokens(48, 12, 5) == 12  # never less than one sentence


def test_answers_cut_short_keep_the_quantile_from_going_under_them():
    ended = [(10, True)] * 17
    assert kaplan_meier_quantile(deque(ended + [(9, True)] * 3), 0.9) == 10
    # three cut at max_tokens: 15% may run past 10, so no length is known to hold 90%
    assert kaplan_meier_quantile(deque(ended + [(48, False)] * 3), 0.9) is None
    # cut early (a deadline at the first sentence) says nothing against 10
    assert kaplan_meier_quantile(deque(ended + [(4, False)] * 3), 0.9) == 10


def test_the_estimate_waits_for_enough_answers_and_forgets_old_ones():
    lengths = CompletionLengths(0.9)
    for _ in range(MIN_SAMPLES - 1):
        lengths.observe(30, FinishReason.STOP)
    lengths.observe(30, FinishReason.ABORT)  # says nothing about length
    assert lengths.expected() is None
    lengths.observe(30, FinishReason.STOP)
    assert lengths.expected() == 30
    for _ in range(1000):
        lengths.observe(8, FinishReason.STOP)
    assert lengths.expected() == 8


def slow(engine: Engine) -> None:
    """Step costs the admission test prices with: 20 ms a token."""
    engine.step_model.overhead_s, engine.step_model.per_token_s = 0.019, 0.001


async def answer(engine: Engine, question: str, n: int, **kwargs: object) -> None:
    for _ in range(n):
        stream = engine.submit(question, params=SamplingParams(max_tokens=200), **kwargs)  # type: ignore[arg-type]
        await asyncio.wait_for(stream.collect(), 30)


def test_complete_admits_on_the_length_recent_answers_needed():
    async def main() -> None:
        runner = ScriptedRunner(scripts={"short": SHORT, "long": "x " * 75})
        engine = Engine(runner, EngineConfig(context_size=2048, block_size=8))
        engine.start()
        params = SamplingParams(max_tokens=200)  # 200 x 20 ms = 4 s: late for 2 s
        try:
            slow(engine)
            with pytest.raises(AdmissionRefusedError):  # nothing known: all 200 priced
                engine.submit("short?", params=params, deadline_s=2.0, deadline_policy=COMPLETE)
            await answer(engine, "short?", MIN_SAMPLES)  # they end after 6 tokens
            # recorded before the caller heard the end (it raced the next submit)
            assert engine.lengths.expected() is not None
            slow(engine)
            stream = engine.submit(
                "short?", params=params, deadline_s=2.0, deadline_policy=COMPLETE
            )
            done = await asyncio.wait_for(stream.collect(), 30)
            assert done.finish_reason is FinishReason.STOP and done.text == SHORT
            await answer(engine, "long?", MIN_SAMPLES)  # they end after 150 tokens
            slow(engine)
            with pytest.raises(AdmissionRefusedError) as refused:
                engine.submit("short?", params=params, deadline_s=2.0, deadline_policy=COMPLETE)
            assert refused.value.reason == "deadline"
        finally:
            engine.close()

    asyncio.run(main())


def test_an_answer_past_its_expected_length_stops_at_a_sentence_end():
    async def main() -> None:
        runner = ScriptedRunner(scripts={"short": SHORT, "long": LONG})
        engine = Engine(runner, EngineConfig(context_size=2048, block_size=8))
        engine.start()
        try:
            await answer(engine, "short?", MIN_SAMPLES)
            runner.step_delay_s = (0.02, 0.0)
            slow(engine)  # what the steps now cost: 400 tokens would take 8 s
            stream = engine.submit(
                "long?", params=SamplingParams(max_tokens=400), deadline_s=1.0,
                deadline_policy=COMPLETE,
            )  # fmt: skip
            streamed = "".join([d.text async for d in stream])
            done = stream.completion
            assert done is not None and done.finish_reason is FinishReason.DEADLINE
            assert done.text.endswith(".") and LONG.startswith(done.text)
            assert streamed.startswith(done.text)
            assert 12 < done.completion_tokens < 400
        finally:
            engine.close()

    asyncio.run(main())
