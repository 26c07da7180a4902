"""The engine on the real SmolLM2-135M GGUF through llama.cpp.

Oracle: llama-cpp-python's own Llama on the same GGUF. Batching changes llama.cpp's
floating-point accumulation order (other sequences' KV cells in the attention, batched
matmul kernels), so a request inside a batch of 8 may pick a different token at a
near-tie. Measured on this model: 4 of 8 requests bit-identical over 16 greedy tokens,
and at every first divergence the chosen token's logit was within 0.17 of the argmax
(teacher-forced on the reference). The test allows 0.5. The prefix cache reuses the very
same KV cells, and is tested for exact equality.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from llama_cpp import Llama

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.errors import AdmissionRefusedError
from worthit.engine.sequence import FinishReason, Priority, SamplingParams
from worthit.engine.streams import Completion

from engine_fixtures import model_path

pytestmark = pytest.mark.slow
__all__ = ["model_path"]  # the fixture, imported for pytest to find

N = 16
GAP_TOLERANCE = 0.5
SYSTEM = (
    "You explain shopping verdicts. Product: Aurora NC700 headphones. Price 199 USD, "
    "lowest in 90 days 189 USD. Rating 4.4 of 5 from 1,203 reviews. Verdict: worth buying."
)
QUESTIONS = [
    "Is it worth buying?",
    "值不值得买?",
    "Should I wait for a sale?",
    "How is the battery?",
    "Is the price good?",
    "Compare it with the cheaper model.",
    "Any complaints?",
    "Give me one reason to buy it.",
]


def chat(question: str) -> str:
    return (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
        f"<|im_start|>user\n{question}<|im_end|>\n<|im_start|>assistant\n"
    )


def config(**overrides: object) -> EngineConfig:
    base: dict[str, object] = {
        "context_size": 2048,
        "n_threads": 1,
        "max_batch_tokens": 512,
        "min_prefill_chunk": 512,  # whole prompts in one chunk, as the oracle does
    }
    base.update(overrides)
    return EngineConfig(**base)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def reference(model_path: Path) -> Iterator[Llama]:
    """The oracle, configured as llama-cpp-python is by default (logits of the last
    token only: asking for all logits changes the kernels and flips near-ties), with
    flash attention as the engine runs it."""
    llm = Llama(
        str(model_path), n_ctx=1024, n_threads=1, n_threads_batch=1, flash_attn=True,
        verbose=False,
    )  # fmt: skip
    yield llm
    llm.close()


@pytest.fixture(scope="module")
def scorer(model_path: Path) -> Iterator[Llama]:
    """Logits at every position, to measure how near a tie a divergence was."""
    llm = Llama(
        str(model_path), n_ctx=1024, n_threads=1, n_threads_batch=1, logits_all=True,
        flash_attn=True, verbose=False,
    )  # fmt: skip
    yield llm
    llm.close()


def oracle_tokens(llm: Llama, prompt: str, n: int) -> list[int]:
    tokens = llm.tokenize(prompt.encode(), add_bos=False, special=True)
    out: list[int] = []
    for token in llm.generate(tokens, temp=0.0):
        if token == llm.token_eos() or len(out) == n:
            break
        out.append(token)
    return out


def first_tie_gap(llm: Llama, prompt: list[int], output: list[int]) -> float:
    """Teacher-force output after prompt; the logit gap to the argmax at the first
    token that is not the reference's argmax (0 when all are)."""
    llm.reset()
    llm.eval(prompt + output)
    scores = np.asarray(llm.scores[: len(prompt) + len(output)])
    for i, token in enumerate(output):
        row = scores[len(prompt) - 1 + i]
        gap = float(row.max() - row[token])
        if gap > 0:
            return gap
    return 0.0


def conversation(turns: int) -> list[dict[str, str]]:
    """The system prompt, `turns` earlier exchanges, then the first question."""
    messages = [{"role": "system", "content": SYSTEM}]
    for i in range(turns):
        messages.append({"role": "user", "content": f"Earlier question number {i}?"})
        messages.append({"role": "assistant", "content": f"Earlier answer number {i}."})
    messages.append({"role": "user", "content": QUESTIONS[0]})
    return messages


def run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_greedy_output_equals_llama_create_completion(model_path: Path, reference: Llama):
    engine = Engine.from_gguf(model_path, config())
    try:
        for question in QUESTIONS[:2]:
            # Both sides compute the whole prompt in one ubatch: a different chunking
            # (a reused prefix of another length) changes accumulation order.
            prompt = chat(question)
            reference.reset()
            expected = oracle_tokens(reference, prompt, N)
            reference.reset()
            text = reference.create_completion(prompt, temperature=0, max_tokens=N)
            engine.call_in_engine_thread(engine.blocks.clear_cache).result(timeout=10)
            done = run(engine.generate(prompt, params=SamplingParams(max_tokens=N)))
            assert isinstance(done, Completion)
            assert list(done.token_ids) == expected
            # llama-cpp-python may run past max_tokens to finish a character cut in
            # half; the engine stops at max_tokens and drops the partial character.
            assert text["choices"][0]["text"].startswith(done.text)
            assert len(text["choices"][0]["text"]) - len(done.text) <= 1
    finally:
        engine.close()


STREAMS = {"max_sequences": 8, "max_cached_prefixes": 4, "kv_streams": True}
"""A KV stream per sequence id (what `explain --warm` runs), 256 cells each."""


@pytest.mark.parametrize("streams", [False, True], ids=["pool", "streams"])
def test_batch_of_8_and_prefix_cache_against_solo(model_path: Path, scorer: Llama, streams: bool):
    """In streams a cached prefix is a copy of another stream cut to length: the same KV."""
    engine = Engine.from_gguf(
        model_path, config(context_size=12 * 256, **STREAMS) if streams else config()
    )

    async def main() -> tuple[list[Completion], list[Completion], list[Completion]]:
        solo = []
        for question in QUESTIONS:
            await engine.clear_prefix_cache()
            solo.append(await engine.generate(chat(question), params=SamplingParams(max_tokens=N)))
        await engine.clear_prefix_cache()
        batch = await asyncio.gather(
            *(engine.generate(chat(q), params=SamplingParams(max_tokens=N)) for q in QUESTIONS)
        )
        await engine.clear_prefix_cache()
        await engine.generate(chat(QUESTIONS[0]), params=SamplingParams(max_tokens=1))
        warm = [
            await engine.generate(chat(q), params=SamplingParams(max_tokens=N))
            for q in QUESTIONS[1:4]
        ]
        return solo, list(batch), warm

    try:
        solo, batch, warm = run(main())  # type: ignore[misc]
    finally:
        engine.close()
    identical = 0
    for question, alone, batched in zip(QUESTIONS, solo, batch, strict=True):
        if alone.token_ids == batched.token_ids:
            identical += 1
            continue
        prompt = scorer.tokenize(chat(question).encode(), add_bos=False, special=True)
        gap = first_tie_gap(scorer, prompt, list(batched.token_ids))
        print(f"batched diverged from alone at a near-tie, gap {gap:.3f}")
        assert gap <= GAP_TOLERANCE
    assert identical >= 1
    for question, cached in zip(QUESTIONS[1:4], warm, strict=True):
        assert cached.cached_tokens >= 48
        if cached.token_ids != solo[QUESTIONS.index(question)].token_ids:
            # flash attention sums a reused prefix in another order than a cold prompt
            prompt = scorer.tokenize(chat(question).encode(), add_bos=False, special=True)
            gap = first_tie_gap(scorer, prompt, list(cached.token_ids))
            print(f"cached prefix diverged from cold at a near-tie, gap {gap:.3f}")
            assert gap <= GAP_TOLERANCE


@pytest.mark.parametrize("streams", [False, True], ids=["pool", "streams"])
def test_random_traffic_leaves_no_kv_cell_behind(model_path: Path, streams: bool):
    """Random lengths, classes (background included, on its own thread count), deadlines
    and aborts on the real context; afterwards every llama.cpp sequence id is empty
    except the cached prefixes, and those go too when the cache is cleared."""
    cfg = config(context_size=10 * 256 if streams else 512, kv_streams=streams, max_sequences=6,
                 max_cached_prefixes=4, min_prefill_chunk=32, n_threads=2,
                 background_threads=1)  # fmt: skip
    engine = Engine.from_gguf(model_path, cfg)
    rnd = random.Random(7)

    async def main() -> list[Completion]:
        streams = []
        for i in range(30):
            question = rnd.choice(QUESTIONS) + " " + "please " * rnd.randint(0, 30)
            priority = rnd.choice(list(Priority))
            deadline_s = rnd.choice([None, None, 0.05, 0.5, 3.0])
            try:
                stream = engine.submit(
                    chat(question) if rnd.random() < 0.7 else question,
                    params=SamplingParams(max_tokens=rnd.randint(1, 4)),
                    priority=priority,
                    deadline_s=None if priority.is_background else deadline_s,
                    request_id=f"r{i}",
                )
            except AdmissionRefusedError:
                continue
            if rnd.random() < 0.2:
                stream.abort()
            streams.append(stream)
            await asyncio.sleep(rnd.random() * 0.02)
        return [await s.collect() for s in streams]

    try:
        done = run(main())
        assert isinstance(done, list)
        assert all(c.finish_reason is not FinishReason.ERROR for c in done)
        runner = engine.runner

        def check() -> None:
            engine.blocks.check()
            assert not engine.scheduler.running and not engine.scheduler.waiting
            for seq_id in range(cfg.num_seq_ids):
                table = engine.blocks.tables.get(seq_id)
                expected = len(table) * cfg.block_size - 1 if table else -1
                assert runner.seq_pos_max(seq_id) == expected  # type: ignore[attr-defined]
            engine.blocks.clear_cache()
            for seq_id in range(cfg.num_seq_ids):
                assert runner.seq_pos_max(seq_id) == -1  # type: ignore[attr-defined]
            assert engine.blocks.used_blocks == 0

        engine.call_in_engine_thread(check).result(timeout=30)
    finally:
        engine.close()


def test_chat_messages_use_the_gguf_template_and_fit_the_context(model_path: Path):
    engine = Engine.from_gguf(model_path, config(context_size=256, max_batch_tokens=256,
                                                 min_prefill_chunk=256))  # fmt: skip
    assert engine.chat_template.source.startswith("{% for message in messages %}")
    messages = conversation(12)
    try:
        done = run(engine.generate(messages=messages, params=SamplingParams(max_tokens=8)))
        assert isinstance(done, Completion)
        assert done.truncated_messages > 0
        assert done.prompt_tokens <= 256 - 8
        assert done.finish_reason in (FinishReason.LENGTH, FinishReason.STOP)
    finally:
        engine.close()


COUNTING = "Count from 1 to 100 in words, separated by commas."
"""Greedy, the model counts on past 128 tokens."""


def test_in_streams_a_sequence_stops_at_its_stream_not_at_the_whole_kv(model_path: Path):
    """A stream holds context_size / sequence ids cells: a request that would write past
    its stream ends with "length" there, and the conversation is cut to fit it."""
    cfg = config(context_size=4 * 128, kv_streams=True, max_sequences=2, max_cached_prefixes=2)
    engine = Engine.from_gguf(model_path, cfg)
    messages = conversation(6)
    try:
        long = run(engine.generate(chat(COUNTING), params=SamplingParams(max_tokens=200)))
        cut = run(engine.generate(messages=messages, params=SamplingParams(max_tokens=8)))
    finally:
        engine.close()
    assert isinstance(long, Completion) and isinstance(cut, Completion)
    assert long.finish_reason is FinishReason.LENGTH
    assert long.prompt_tokens + len(long.token_ids) == 128
    assert cut.truncated_messages > 0
    assert cut.prompt_tokens <= 128 - 8


def test_an_engine_measured_too_slow_measures_again_when_idle(model_path: Path):
    """A start-up calibration taken on a busy machine can leave the model so slow that
    every request is refused, and refusals teach it nothing: after refusing, an idle
    engine measures again (a calibration, or the lone decode step it anchors the overhead
    to after warming the refused prompt) and admits what fits (before: refused for good)."""
    engine = Engine.from_gguf(model_path, config())
    params = SamplingParams(max_tokens=4)

    def as_a_busy_machine_left_it() -> None:
        engine.step_model.overhead_s = 5.0

    try:
        engine.call_in_engine_thread(as_a_busy_machine_left_it).result(timeout=30)

        async def ask() -> Completion:
            return await engine.submit(chat(QUESTIONS[0]), params=params, deadline_s=3.0).collect()

        with pytest.raises(AdmissionRefusedError):
            run(ask())
        give_up = time.monotonic() + 60
        while engine.step_model.overhead_s >= 1.0:
            assert time.monotonic() < give_up, "no re-measurement"
            time.sleep(0.1)
        done = run(ask())
        assert isinstance(done, Completion)
        assert done.finish_reason in (FinishReason.LENGTH, FinishReason.STOP)
    finally:
        engine.close()


@pytest.mark.parametrize("streams", [False, True], ids=["pool", "streams"])
def test_a_prompt_evicted_to_host_ram_comes_back_with_the_same_kv(
    model_path: Path, scorer: Llama, streams: bool
):
    """Evicted from the KV cells, a prompt's KV waits in host RAM; the next request
    with it restores the copy (no prefill of those tokens) and writes what the request
    that found it still cached wrote."""
    cfg = config(context_size=4 * 256, kv_streams=streams, max_sequences=2, max_cached_prefixes=2)
    engine = Engine.from_gguf(model_path, cfg)
    params = SamplingParams(max_tokens=N)
    prompt = chat(QUESTIONS[0])

    async def main() -> tuple[Completion, Completion]:
        await engine.generate(prompt, params=params)
        cached = await engine.generate(prompt, params=params)
        for other in ("Vela K2 kettle", "Orbit S3 speaker", "Lumen A1 lamp"):
            await engine.generate(
                chat(QUESTIONS[0]).replace("Aurora NC700 headphones", other), params=params
            )
        return cached, await engine.generate(prompt, params=params)

    try:
        cached, restored = run(main())  # type: ignore[misc]
        assert engine.blocks.host.restored == 1
        assert restored.cached_tokens == cached.cached_tokens >= 48

        def check() -> None:
            engine.blocks.check()
            for seq_id in range(cfg.num_seq_ids):
                table = engine.blocks.tables.get(seq_id)
                expected = len(table) * cfg.block_size - 1 if table else -1
                assert engine.runner.seq_pos_max(seq_id) == expected  # type: ignore[attr-defined]

        engine.call_in_engine_thread(check).result(timeout=30)
    finally:
        engine.close()
    if restored.token_ids != cached.token_ids:
        # in one pool the restored cells sit elsewhere: flash attention sums in another order
        tokens = scorer.tokenize(prompt.encode(), add_bos=False, special=True)
        gap = first_tie_gap(scorer, tokens, list(restored.token_ids))
        print(f"restored prefix diverged from cached at a near-tie, gap {gap:.3f}")
        assert gap <= GAP_TOLERANCE
