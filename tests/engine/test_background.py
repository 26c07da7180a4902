"""The background class: work nobody waits for, run only in steps no interactive request
needs, on fewer threads, paused and preempted first for interactive work."""

from __future__ import annotations

import asyncio
import contextlib
import time

import pytest

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.errors import AdmissionRefusedError
from worthit.engine.scheduler import StepPlan
from worthit.engine.sequence import FinishReason, Priority, SamplingParams, Status
from worthit.engine.timing.step_calibration import ANCHOR_REPEATS, BACKGROUND_PROBE_EVERY_S

from engine_fakes import FakeRunner, GatedRunner, reference_output
from harness import Harness

BG = Priority.BACKGROUND


def make_engine(config: EngineConfig, runner: FakeRunner | None = None) -> Engine:
    engine = Engine(runner or FakeRunner(n_ctx=config.context_size), config)
    engine.start()
    return engine


def kinds(requests: list[str]) -> set[str]:
    """What a step carried: "bg", "live" (calibration steps carry neither)."""
    return {r.split("-")[0] for r in requests} & {"bg", "live"}


async def live_after_background(n_background: int) -> tuple[int, FakeRunner, Engine]:
    """Submit n_background requests, wait until they generate, then one interactive request.
    Returns how many steps without the interactive request ran after it was submitted."""
    config = EngineConfig(context_size=4096, block_size=8, n_threads=2, background_threads=1)
    runner = FakeRunner(n_ctx=config.context_size, step_delay_s=(0.001, 0.00002))
    engine = make_engine(config, runner)
    background = [
        engine.submit(
            f"background prompt {i} " * 6,
            params=SamplingParams(max_tokens=40),
            priority=BG,
            request_id=f"bg-{i}",
        )
        for i in range(n_background)
    ]
    if background:
        await background[0].__anext__()  # the background load is generating
    mark = len(runner.steps)
    live = engine.submit(
        "live question?", params=SamplingParams(max_tokens=6), priority=Priority.HIGH,
        request_id="live-1",
    )  # fmt: skip
    done = await asyncio.wait_for(live.collect(), 30)
    assert done.finish_reason is FinishReason.LENGTH
    first = next(i for i, ids in enumerate(runner.step_requests) if "live-1" in ids)
    for stream in background:
        bg = await asyncio.wait_for(stream.collect(), 30)
        assert bg.finish_reason is FinishReason.LENGTH
        prompt = engine.runner.tokenize(f"background prompt {bg.request_id[3:]} " * 6)
        assert list(bg.token_ids) == reference_output(prompt, 40)
    engine.close()
    return first - mark, runner, engine


def test_a_live_request_waits_at_most_one_background_step():
    alone, _, _ = asyncio.run(live_after_background(0))
    loaded, runner, engine = asyncio.run(live_after_background(24))
    assert alone == 0
    assert loaded <= 1  # the background step running when it arrived, if any
    steps = [kinds(ids) for ids in runner.step_requests]
    assert all(len(k) <= 1 for k in steps)  # no step mixes interactive and background tokens
    live_steps = [i for i, k in enumerate(steps) if k == {"live"}]
    assert not any("bg" in steps[i] for i in range(live_steps[0], live_steps[-1] + 1))
    assert engine.status().background_running == engine.status().background_waiting == 0
    assert engine.metrics.e2e.labels("background", "length")._sum.get() > 0
    assert engine.metrics.ttft.labels("background")._sum.get() > 0


def test_background_only_steps_run_on_background_threads():
    _, runner, _ = asyncio.run(live_after_background(8))
    seen = set()
    for ids, threads in zip(runner.step_requests, runner.step_threads, strict=True):
        kind = kinds(ids)
        if kind == {"bg"}:
            assert threads == 1
        elif kind == {"live"}:
            assert threads == 2
        seen |= kind
    assert seen == {"bg", "live"}


def test_background_requests_finish_once_live_traffic_stops():
    async def main() -> None:
        config = EngineConfig(context_size=1024, block_size=8, max_sequences=6)
        engine = make_engine(config, FakeRunner(n_ctx=1024, step_delay_s=(0.0005, 0.0)))
        try:
            prompts = [f"explain product {i} " * 3 for i in range(20)]
            background = [
                engine.submit(p, params=SamplingParams(max_tokens=12), priority=BG) for p in prompts
            ]
            live = [
                engine.submit(f"live {i}?", params=SamplingParams(max_tokens=8), deadline_s=30)
                for i in range(5)
            ]
            for stream in live:
                done = await asyncio.wait_for(stream.collect(), 30)
                assert done.finish_reason is FinishReason.LENGTH
            for prompt, stream in zip(prompts, background, strict=True):
                done = await asyncio.wait_for(stream.collect(), 30)
                assert done.finish_reason is FinishReason.LENGTH
                assert list(done.token_ids) == reference_output(engine.runner.tokenize(prompt), 12)
            runner = engine.runner
            assert isinstance(runner, FakeRunner)
            # background requests decoded together
            assert max(sum(1 for c in step if c[3]) for step in runner.steps) > 1
        finally:
            engine.close()
        status = engine.status()
        assert (status.background_running, status.background_waiting) == (0, 0)
        assert engine.runner.samplers_alive == 0  # type: ignore[attr-defined]
        engine.blocks.check()

    asyncio.run(main())


def test_background_has_its_own_queue_and_is_never_refused_for_time():
    async def main() -> None:
        config = EngineConfig(max_waiting=2, max_background_waiting=3, default_deadline_s=0.5)
        engine = Engine(FakeRunner(), config)  # not started: submissions stay queued
        engine.step_model.overhead_s = 10.0  # nothing live could make any deadline
        try:
            for i in range(3):
                engine.submit(f"bg {i}", priority=BG)
            with pytest.raises(AdmissionRefusedError) as full:
                engine.submit("bg 3", priority=BG)
            assert full.value.reason == "queue_full"
            with pytest.raises(AdmissionRefusedError) as late:
                engine.submit("live 0")  # the interactive queue has room; the deadline does not
            assert late.value.reason == "deadline"
            engine.step_model.overhead_s = 0.001
            engine.submit("live 1")
            engine.submit("live 2")  # two live waiting beside three background
            with pytest.raises(AdmissionRefusedError) as live_full:
                engine.submit("live 3")
            assert live_full.value.reason == "queue_full"
            with pytest.raises(ValueError, match="no deadline"):
                engine.submit("bg with a deadline", priority=BG, deadline_s=1.0)
        finally:
            engine.close()

    asyncio.run(main())


def test_status_counts_background_apart_from_live():
    async def main() -> None:
        runner = GatedRunner(n_ctx=1024)
        engine = make_engine(EngineConfig(context_size=1024, block_size=8), runner)
        try:
            stream = engine.submit("generate ahead", params=SamplingParams(max_tokens=50),
                                   priority=BG)  # fmt: skip
            await stream.__anext__()  # the engine thread now waits inside the next step
            status = engine.status()
            assert (status.running, status.waiting) == (0, 0)
            assert (status.background_running, status.background_waiting) == (1, 0)
            stream.abort()
            runner.release()
            assert (await stream.collect()).finish_reason is FinishReason.ABORT
        finally:
            engine.close()

    asyncio.run(main())


def six_background_requests(config: EngineConfig) -> list[StepPlan]:
    """Six background requests run to the end on a timed harness (a step costs 1 ms + 1 ms
    a token); each output checked against the reference. Returns every step's plan."""
    h = Harness(config, timed=True)
    seqs = [h.seq(f"bg-{i}", 20, BG, max_tokens=8, base=100 + 7 * i) for i in range(6)]
    plans = []
    while h.scheduler.has_work():
        plan, _ = h.step()
        plans.append(plan)
    for seq in seqs:
        assert seq.finish_reason is FinishReason.LENGTH
        assert seq.output_tokens == reference_output(seq.prompt_tokens, 8)
    return plans


def test_background_steps_stay_under_their_time_bound_and_batch():
    # step cost 1 ms + 1 ms a token: 10.5 ms fits 9 tokens
    plans = six_background_requests(
        EngineConfig(block_size=4, max_background_step_s=0.0105, min_background_step_tokens=1)
    )
    assert all(p.background and p.num_tokens <= 9 for p in plans)
    assert max(p.n_decode for p in plans) > 1


def test_a_background_step_carries_its_floor_where_the_time_bound_fits_one_token():
    """A host whose step's fixed cost is near the bound would otherwise decode one
    sequence a token at a time: the background batch would never form."""
    # step cost 1 ms + 1 ms a token: 2.5 ms fits one token, the floor is 6
    plans = six_background_requests(
        EngineConfig(block_size=4, max_background_step_s=0.0025, min_background_step_tokens=6)
    )
    assert all(p.background and p.num_tokens <= 6 for p in plans)
    assert max(p.num_tokens for p in plans) == 6 and max(p.n_decode for p in plans) > 1


def test_live_work_pauses_background_and_preempts_it_before_a_lower_live_class():
    config = EngineConfig(
        context_size=96, block_size=16, max_sequences=4, max_cached_prefixes=4,
        max_batch_tokens=64, min_prefill_chunk=64, tpot_target_s=1.0, max_background_step_s=1.0,
    )  # fmt: skip
    h = Harness(config)
    bg = h.seq("bg", 40, BG, max_tokens=6)
    h.step()
    h.step()
    assert bg.status is Status.RUNNING and len(bg.output_tokens) == 2
    low = h.seq("low", 20, Priority.LOW, max_tokens=8, base=200)
    plan, _ = h.step()
    assert bg.status is Status.RUNNING and len(bg.output_tokens) == 2  # paused, KV kept
    assert [c.seq for c in plan.chunks] == [low] and not plan.background
    high = h.seq("high", 30, Priority.HIGH, max_tokens=4, base=300)
    h.step()  # KV for high: the background request goes, not the lower interactive class
    assert bg.status is Status.WAITING and bg.preemptions == 1
    assert low.status is Status.RUNNING and low.preemptions == 0
    while h.scheduler.has_work():
        plan, _ = h.step()
        assert plan.background == all(c.seq is bg for c in plan.chunks)
    assert high.preemptions == low.preemptions == 0
    assert h.finished[-1] is bg
    for seq, n in ((bg, 6), (low, 8), (high, 4)):
        assert seq.output_tokens == reference_output(seq.prompt_tokens, n)


def test_a_live_request_takes_a_sequence_id_from_background():
    config = EngineConfig(context_size=512, block_size=8, max_sequences=2,
                          max_background_step_s=1.0)  # fmt: skip
    h = Harness(config)
    first = h.seq("bg-1", 10, BG, max_tokens=20)
    h.step()
    second = h.seq("bg-2", 10, BG, max_tokens=20, base=200)
    h.step()
    assert first.status is second.status is Status.RUNNING
    live = h.seq("live", 10, max_tokens=3, base=300)
    plan, _ = h.step()
    assert [c.seq for c in plan.chunks] == [live]
    assert second.status is Status.WAITING and second.preemptions == 1  # the newer one
    assert first.status is Status.RUNNING and first.preemptions == 0
    h.run()
    assert second.output_tokens == reference_output(second.prompt_tokens, 20)


def test_live_work_preempts_background_before_evicting_a_live_cached_prefix():
    config = EngineConfig(
        context_size=96, block_size=16, max_sequences=4, max_cached_prefixes=4,
        max_batch_tokens=64, min_prefill_chunk=64, tpot_target_s=1.0, max_background_step_s=1.0,
    )  # fmt: skip
    h = Harness(config)
    warm = h.seq("warm", 40, Priority.LOW, max_tokens=1, base=200)
    h.run()
    assert h.blocks.cached_prefix_len(warm.prompt_tokens) == 32  # a best seller's prompt
    bg = h.seq("bg", 40, BG, max_tokens=6)
    h.step()
    h.step()
    assert bg.status is Status.RUNNING and h.blocks.free_blocks == 1
    ask = h.seq("ask", 30, Priority.HIGH, max_tokens=2, base=300)
    h.step()  # two blocks for ask: the paused background request's, not the cached prompt's
    assert bg.status is Status.WAITING and bg.preemptions == 1
    assert h.blocks.cached_prefix_len(warm.prompt_tokens) == 32
    h.run()
    assert ask.output_tokens == reference_output(ask.prompt_tokens, 2)
    assert bg.output_tokens == reference_output(bg.prompt_tokens, 6)


def test_background_steps_on_the_interactive_threads_are_not_followed_by_a_probe_each():
    """With one thread count for both classes (`explain --warm`), every large background
    step leaves the step-time model stale; re-measuring it after each took two one-token
    steps every half second. Between background steps it is re-measured at most every
    BACKGROUND_PROBE_EVERY_S."""

    async def main() -> tuple[FakeRunner, float]:
        config = EngineConfig(
            context_size=4096, block_size=8, n_threads=1, background_threads=1,
            max_background_step_s=0.5,
        )  # fmt: skip
        runner = FakeRunner(n_ctx=config.context_size, step_delay_s=(0.001, 0.002))
        engine = make_engine(config, runner)
        started = time.monotonic()
        try:
            prompts = [f"explain product {i} with its reasons " * 8 for i in range(8)]
            streams = [
                engine.submit(
                    p, params=SamplingParams(max_tokens=24), priority=BG, request_id=f"bg-{i}"
                )
                for i, p in enumerate(prompts)
            ]
            for prompt, stream in zip(prompts, streams, strict=True):
                done = await asyncio.wait_for(stream.collect(), 60)
                assert list(done.token_ids) == reference_output(runner.tokenize(prompt), 24)
        finally:
            engine.close()
        return runner, time.monotonic() - started

    runner, seconds = asyncio.run(main())
    background = sum(kinds(ids) == {"bg"} for ids in runner.step_requests)
    probes = sum("probe" in ids for ids in runner.step_requests)
    assert background > 10
    steps_a_probe = 1 + ANCHOR_REPEATS  # one untimed, then the timed ones
    assert probes <= steps_a_probe * (1 + seconds / BACKGROUND_PROBE_EVERY_S)


def test_the_interactive_model_is_re_anchored_between_background_steps():
    """`worthit serve` is rarely idle: the background generator keeps the engine busy, so
    the step-time model that prices live requests is re-anchored between background steps
    once live work has been quiet for BACKGROUND_PROBE_EVERY_S. Every submission sets the
    engine's wake event and a busy engine never clears it, so a probe that stopped on
    the event never ran there."""

    async def main() -> tuple[FakeRunner, int]:
        config = EngineConfig(context_size=4096, block_size=8, n_threads=2, background_threads=1)
        # four answers of 1,000 tokens at ~7 ms a step: busy for longer than the probe's wait
        runner = FakeRunner(n_ctx=config.context_size, step_delay_s=(0.006, 0.0002))
        engine = make_engine(config, runner)
        try:
            for i in range(4):
                engine.submit(
                    f"write about product {i} " * 4,
                    params=SamplingParams(max_tokens=1000),
                    priority=BG,
                    request_id=f"bg-{i}",
                )
            await engine.submit("live question", params=SamplingParams(max_tokens=4)).collect()
            live_done = len(runner.step_requests)
            assert engine.step_model.steps_since_anchor > 0
            give_up = time.monotonic() + BACKGROUND_PROBE_EVERY_S + 10
            more = 0
            while engine.step_model.steps_since_anchor > 0 and time.monotonic() < give_up:
                more += 1  # the generator submits as it goes
                with contextlib.suppress(AdmissionRefusedError):  # its queue may be full
                    engine.submit(
                        f"and product {more}", params=SamplingParams(max_tokens=2), priority=BG
                    )
                await asyncio.sleep(0.05)
        finally:
            engine.close()
        return runner, live_done

    runner, live_done = asyncio.run(main())
    after = runner.step_requests[live_done:]
    probe_at = next(i for i, ids in enumerate(after) if "probe" in ids)  # none: StopIteration
    assert any(kinds(ids) == {"bg"} for ids in after[probe_at + 1 :])  # still busy after it
