"""The asyncio engine over the fake runner: streaming, concurrency, abort, admission,
context overflow, and a property test that nothing leaks."""

from __future__ import annotations

import asyncio
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.errors import AdmissionRefusedError, PromptTooLongError
from worthit.engine.sequence import FinishReason, Priority, SamplingParams

from engine_fakes import FakeRunner, GatedRunner, ScriptedRunner, reference_output


def make_engine(config: EngineConfig | None = None, runner: FakeRunner | None = None) -> Engine:
    config = config or EngineConfig(context_size=1024, block_size=8)
    engine = Engine(runner or FakeRunner(n_ctx=config.context_size), config)
    engine.start()
    return engine


def assert_clean(engine: Engine) -> None:
    """No request, sampler or KV left; cached prefixes are the only KV kept."""
    runner = engine.runner
    assert isinstance(runner, FakeRunner)
    status = engine.status()
    assert status.running == status.waiting == 0
    assert runner.samplers_alive == 0
    engine.blocks.check()
    assert set(runner.kv) == set(engine.blocks.tables)
    for seq_id, table in engine.blocks.tables.items():
        assert len(runner.kv[seq_id]) == len(table) * engine.blocks.block_size
    engine.blocks.clear_cache()
    assert runner.kv == {} and engine.blocks.used_blocks == 0


def test_concurrent_requests_stream_the_reference_tokens():
    async def main() -> None:
        engine = make_engine()
        try:
            prompts = [f"question {i} about product {i % 3}" for i in range(6)]
            streams = [engine.submit(p, params=SamplingParams(max_tokens=10)) for p in prompts]
            texts = ["" for _ in streams]

            async def read(i: int) -> None:
                async for delta in streams[i]:
                    texts[i] += delta.text

            await asyncio.gather(*(read(i) for i in range(len(streams))))
            for prompt, stream, text in zip(prompts, streams, texts, strict=True):
                done = stream.completion
                assert done is not None and done.finish_reason is FinishReason.LENGTH
                expected = reference_output(engine.runner.tokenize(prompt), 10)
                assert list(done.token_ids) == expected
                assert text == done.text == "".join(chr(t - 1) for t in expected)
                assert done.prompt_tokens == len(prompt) and done.completion_tokens == 10
            steps = engine.runner.steps  # type: ignore[attr-defined]
            assert max(len(step) for step in steps) > 1  # requests shared steps
        finally:
            engine.close()
        assert_clean(engine)

    asyncio.run(main())


def test_same_prefix_is_served_from_the_cache():
    async def main() -> None:
        engine = make_engine()
        try:
            system = "You judge products. Facts: price 199, rating 4.5 of 5. " * 2
            first = await engine.generate(system + "Worth it?")
            second = await engine.generate(system + "Is it cheap?")
            assert first.cached_tokens == 0
            assert second.cached_tokens >= len(system) - engine.config.block_size
            expected = reference_output(engine.runner.tokenize(system + "Is it cheap?"), 128)
            assert list(second.token_ids) == expected[: len(second.token_ids)]
        finally:
            engine.close()

    asyncio.run(main())


def test_abort_mid_stream_frees_the_request():
    async def main() -> None:
        config = EngineConfig(context_size=1024, block_size=8)
        runner = GatedRunner(n_ctx=config.context_size)
        engine = make_engine(config, runner)
        try:
            stream = engine.submit("tell me everything", params=SamplingParams(max_tokens=500))
            first = await stream.__anext__()
            assert first.finish_reason is None
            stream.abort()
            runner.release()
            reasons = [d.finish_reason async for d in stream]
            assert reasons[-1] is FinishReason.ABORT
            assert stream.completion is not None
            assert stream.completion.finish_reason is FinishReason.ABORT
        finally:
            engine.close()
        assert_clean(engine)

    asyncio.run(main())


def test_unmeetable_deadline_is_refused_at_once():
    async def main() -> None:
        engine = make_engine()
        engine.step_model.overhead_s = 0.01
        engine.step_model.per_token_s = 0.01
        try:
            with pytest.raises(AdmissionRefusedError) as refused:
                engine.submit("x" * 300, deadline_s=0.2)
            assert refused.value.reason == "deadline"
            assert refused.value.estimated_s is not None and refused.value.estimated_s > 0.2
            ok = await engine.generate(
                "short", deadline_s=30.0, params=SamplingParams(max_tokens=3)
            )
            assert ok.finish_reason is FinishReason.LENGTH
        finally:
            engine.close()
        assert engine.metrics.refusals.labels("deadline")._value.get() == 1

    asyncio.run(main())


def test_long_conversation_keeps_system_prompt_and_newest_turns():
    async def main() -> None:
        config = EngineConfig(context_size=256, block_size=8, max_batch_tokens=128)
        engine = make_engine(config)
        try:
            messages = [{"role": "system", "content": "FACTS"}]
            for i in range(20):
                messages.append({"role": "user", "content": f"old question {i:02d}"})
                messages.append({"role": "assistant", "content": f"old answer {i:02d}"})
            messages.append({"role": "user", "content": "NEWEST"})
            done = await engine.generate(messages=messages, params=SamplingParams(max_tokens=8))
            assert done.truncated_messages > 0
            assert done.prompt_tokens + 8 <= 256
            stream_prompt = engine.chat_template.render(
                messages[:1] + messages[1 + done.truncated_messages :]
            )
            assert done.prompt_tokens == len(stream_prompt)
            assert "FACTS" in stream_prompt and "NEWEST" in stream_prompt
            with pytest.raises(PromptTooLongError):
                engine.submit(messages=[{"role": "user", "content": "x" * 400}])
        finally:
            engine.close()

    asyncio.run(main())


request = st.fixed_dictionaries(
    {
        "prefix": st.sampled_from(["", "FACTS-A " * 6, "FACTS-B " * 9]),
        "tail": st.text(alphabet="abcdef ", min_size=1, max_size=40),
        "max_tokens": st.integers(1, 12),
        "priority": st.sampled_from(list(Priority)),
        "deadline": st.one_of(st.none(), st.floats(0.001, 0.3)),
        "abort_after": st.one_of(st.none(), st.floats(0.0, 0.05)),
    }
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.lists(request, min_size=30, max_size=50))
def test_random_traffic_leaves_nothing_behind(requests):
    """About 1,000 random requests per run (25 examples of 30-50) over a KV small
    enough to force eviction and preemption, with a step cost that makes deadlines
    bite."""

    async def main() -> None:
        config = EngineConfig(
            context_size=256, block_size=8, max_sequences=6, max_cached_prefixes=6,
            max_batch_tokens=64, min_prefill_chunk=16,
        )  # fmt: skip
        engine = make_engine(config, FakeRunner(n_ctx=256, step_delay_s=(0.0005, 0.0001)))
        try:
            streams = []
            for i, r in enumerate(requests):
                try:
                    stream = engine.submit(
                        r["prefix"] + r["tail"],
                        params=SamplingParams(max_tokens=r["max_tokens"]),
                        priority=r["priority"],
                        deadline_s=None if r["priority"].is_background else r["deadline"],
                        request_id=f"r{i}",
                    )
                except AdmissionRefusedError:
                    continue
                streams.append((r, stream))

            async def consume(r, stream) -> None:
                if r["abort_after"] is not None:
                    await asyncio.sleep(r["abort_after"])
                    stream.abort()
                await stream.collect()

            await asyncio.wait_for(asyncio.gather(*(consume(r, s) for r, s in streams)), timeout=60)
            for r, stream in streams:
                done = stream.completion
                assert done is not None
                assert done.finish_reason is not FinishReason.ERROR
                if done.finish_reason is FinishReason.LENGTH:
                    prompt = engine.runner.tokenize(r["prefix"] + r["tail"])
                    assert list(done.token_ids) == reference_output(prompt, r["max_tokens"])
            deadline = time.monotonic() + 5
            while engine.scheduler.has_work() and time.monotonic() < deadline:
                await asyncio.sleep(0.001)
        finally:
            engine.close()
        assert_clean(engine)

    asyncio.run(main())


def test_a_prompt_refused_once_is_warmed_for_the_next_asker():
    """Idle prefixes leave the KV cells for host RAM (resident cells), so warming the
    long tail displaces no popular prompt there: the first refusal warms."""

    async def main() -> None:
        engine = make_engine()
        try:
            engine.step_model.overhead_s = 0.01
            engine.step_model.per_token_s = 0.01
            prompt = "FACTS about product 7. " * 10 + "Worth it?"
            tokens = engine.runner.tokenize(prompt)
            with pytest.raises(AdmissionRefusedError):
                engine.submit(prompt, deadline_s=0.3)
            for _ in range(500):
                if engine.blocks.cached_prefix_len(tokens) and not engine.scheduler.has_work():
                    break
                await asyncio.sleep(0.002)
            size = engine.config.block_size
            assert engine.blocks.cached_prefix_len(tokens) == (len(tokens) - 1) // size * size
            assert engine.runner.samplers_alive == 0  # type: ignore[attr-defined]
        finally:
            engine.close()

    asyncio.run(main())


def test_facts_refused_under_two_questions_are_warmed_for_the_next_question():
    """Two questions about one product share its facts and differ at the end: the facts'
    blocks are warmed after the second refusal, though no whole prompt was refused twice."""

    async def main() -> None:
        engine = make_engine()
        try:
            engine.step_model.overhead_s = 0.01
            engine.step_model.per_token_s = 0.01
            facts = "FACTS about product 7. " * 10
            first = facts + "Worth it?"
            second = facts + "Should I wait for a sale, or is it fine to buy today?"
            third = engine.runner.tokenize(facts + "Is it a good gift?")
            shared = engine.runner.tokenize(facts)
            for prompt in (first, second):
                with pytest.raises(AdmissionRefusedError):
                    engine.submit(prompt, deadline_s=0.3)
                await asyncio.sleep(0.05)
            for _ in range(500):
                if engine.blocks.cached_prefix_len(third) and not engine.scheduler.has_work():
                    break
                await asyncio.sleep(0.002)
            size = engine.config.block_size
            cached = engine.blocks.cached_prefix_len(third)
            assert (len(shared) - size) // size * size <= cached <= len(shared)
        finally:
            engine.close()

    asyncio.run(main())


def test_deadline_mid_sentence_cuts_the_answer_at_the_last_sentence_end():
    async def main() -> None:
        config = EngineConfig(context_size=1024, block_size=8)
        runner = ScriptedRunner("Ok. " + "and this second sentence just goes on " * 10)
        runner.step_delay_s = (0.02, 0.0)
        engine = make_engine(config, runner)
        try:
            stream = engine.submit("Why?", params=SamplingParams(max_tokens=400), deadline_s=0.5)
            streamed = "".join([delta.text async for delta in stream])
            done = stream.completion
            assert done is not None and done.finish_reason is FinishReason.DEADLINE
            assert done.text == "Ok."
            assert streamed.startswith("Ok.")
        finally:
            engine.close()

    asyncio.run(main())


def test_a_line_break_is_not_a_sentence_end():
    """The engine cuts with the project's one sentence rule (worthit.text.sentences),
    which leaves line breaks to the explanation flow: cut mid-sentence after "Ok\\n",
    nothing was a finished sentence. (The engine's own rule used to end one there.)"""

    async def main() -> None:
        config = EngineConfig(context_size=1024, block_size=8)
        runner = ScriptedRunner("Ok\n" + "and this second line just goes on " * 10)
        runner.step_delay_s = (0.02, 0.0)
        engine = make_engine(config, runner)
        try:
            stream = engine.submit("Why?", params=SamplingParams(max_tokens=400), deadline_s=0.5)
            streamed = "".join([delta.text async for delta in stream])
            done = stream.completion
            assert done is not None and done.finish_reason is FinishReason.DEADLINE
            assert streamed.startswith("Ok\nand this")
            assert done.text == ""
        finally:
            engine.close()

    asyncio.run(main())


def test_status_reports_the_load():
    async def main() -> None:
        config = EngineConfig(context_size=1024, block_size=8)
        runner = GatedRunner(n_ctx=config.context_size)
        engine = make_engine(config, runner)
        try:
            assert engine.status().running == 0
            stream = engine.submit("tell me everything " * 3, params=SamplingParams(max_tokens=500))
            await stream.__anext__()  # the engine thread now waits inside the next step
            busy = engine.status()
            assert (busy.model_id, busy.running, busy.waiting) == ("fake-model", 1, 0)
            assert busy.kv_usage > 0 and busy.cached_prefixes == 0
            stream.abort()
            runner.release()
            await stream.collect()
            idle = engine.status()
            assert (idle.running, idle.waiting, idle.cached_prefixes) == (0, 0, 1)
            assert idle.prefix_queried_tokens == 57
            model = engine.scheduler.model
            terms = (model.overhead_s, model.per_token_s, model.per_sample_s)
            assert idle.step_model_s == terms
            registry = engine.metrics.registry
            for term, seconds in zip(("overhead", "per_token", "per_sample"), terms, strict=True):
                assert registry.get_sample_value(
                    "worthit_engine_step_model_seconds", {"term": term}
                ) == pytest.approx(seconds)
        finally:
            engine.close()

    asyncio.run(main())


def test_engine_driven_on_a_thread_it_did_not_start():
    """What `worthit serve` does (the engine on the main thread, the event loop on
    another): requests stream, and stop() ends the loop with unfinished ones aborted."""
    import threading

    runner = GatedRunner(n_ctx=1024, armed=False)
    engine = Engine(runner, EngineConfig(context_size=1024, block_size=8))
    claimed = threading.Event()

    def drive() -> None:
        engine.claim_current_thread()
        claimed.set()
        engine.run_here()

    driver = threading.Thread(target=drive)
    driver.start()
    assert claimed.wait(10)

    async def main() -> tuple[str, FinishReason | None]:
        engine.start()  # a no-op: the app's lifespan calls it on an engine it was given
        done = await engine.generate("question", params=SamplingParams(max_tokens=5))
        runner.arm()
        stuck = engine.submit("never finishes", params=SamplingParams(max_tokens=500))
        await stuck.__anext__()
        engine.stop()
        runner.release()
        reasons = [d.finish_reason async for d in stuck]
        return done.text, reasons[-1]

    text, last = asyncio.run(main())
    driver.join(10)
    assert not driver.is_alive()
    assert len(text) == 5 and last is FinishReason.ABORT
    engine.close()
    assert_clean(engine)


def test_warming_leaves_the_queued_work_estimate_at_zero():
    """Review finding: warming requests were subtracted from the queued-prefill count
    without ever being added, driving it negative (admission then ignored real work)."""

    async def main() -> None:
        engine = make_engine()
        try:
            messages = [
                {"role": "system", "content": "FACTS " * 40},
                {"role": "user", "content": "?"},
            ]
            assert engine.warm(messages)
            for _ in range(500):
                if engine.blocks.cached_prefixes and not engine.scheduler.has_work():
                    break
                await asyncio.sleep(0.002)
            assert engine.admission.backlog == (0, 0, 0)
            assert not engine.warm(messages)  # cached now
        finally:
            engine.close()

    asyncio.run(main())


def test_idle_engine_re_measures_a_small_step_after_large_ones():
    """With only prefill chunks seen (refused traffic, prefix warming), a stale overhead
    would refuse everything forever; the first idle gap times a one-token step."""

    async def main() -> None:
        engine = make_engine()
        try:
            model = engine.step_model
            model.overhead_s, model.per_token_s = 0.2, 1e-5  # the degenerate fixed point
            model.large_steps_since_small = model.steps_since_anchor = 3
            for _ in range(200):  # the idle loop wakes every IDLE_PROBE_S
                if model.steps_since_anchor == 0:
                    break
                await asyncio.sleep(0.01)
            assert model.steps_since_anchor == model.large_steps_since_small == 0
            assert model.overhead_s < 0.2
        finally:
            engine.close()
        assert_clean(engine)

    asyncio.run(main())


def test_a_prompt_refused_twice_while_busy_is_warmed_once_the_engine_is_idle():
    """Refusals come when the engine is busy; the prefix is warmed when it is next idle,
    not only if it happened to be idle at the refusal."""

    async def main() -> None:
        runner = GatedRunner(n_ctx=1024)
        engine = make_engine(runner=runner)
        try:
            engine.step_model.overhead_s = 0.01
            engine.step_model.per_token_s = 0.01
            busy = engine.submit("a long answer", params=SamplingParams(max_tokens=4))
            for _ in range(500):
                if engine.status().running:
                    break
                await asyncio.sleep(0.002)
            prompt = "FACTS about product 7. " * 10 + "Worth it?"
            tokens = engine.runner.tokenize(prompt)
            for _ in range(2):
                with pytest.raises(AdmissionRefusedError):
                    engine.submit(prompt, deadline_s=0.3)
            assert engine.blocks.cached_prefix_len(tokens) == 0
            runner.release()
            await busy.collect()
            for _ in range(1000):
                if engine.blocks.cached_prefix_len(tokens) and not engine.scheduler.has_work():
                    break
                await asyncio.sleep(0.002)
            size = engine.config.block_size
            assert engine.blocks.cached_prefix_len(tokens) == (len(tokens) - 1) // size * size
        finally:
            engine.close()

    asyncio.run(main())
