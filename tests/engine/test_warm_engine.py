"""The engine of `explain --warm` gives each explanation in flight a KV stream that holds the
longest one and no more: every cell up to the highest one in use in its stream costs each of
its tokens the attention scan."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from worthit.answer.background import QUESTIONS
from worthit.cli.explain import warm_engine_config
from worthit.engine.engine import Engine
from worthit.engine.runner import LlamaRunner
from worthit.engine.sequence import FinishReason, Priority, SamplingParams
from worthit.engine.streams import Completion
from worthit.explain.explainer import ExplanationRun, token_budget
from worthit.explain.prompt import answer_prefix, build_messages
from worthit.market.store import MarketStore
from worthit.service.build import build_answerer

from conftest import market_clock
from engine_fixtures import model_path

__all__ = ["model_path"]  # the fixture, imported for pytest to find

PARALLEL = (1, 4, 8, 16)


@pytest.fixture(scope="module")
def cells(small_market: Path, model_path: Path) -> Iterator[dict[str, int]]:
    """The most KV cells one explanation of the market takes in each language: its prompt
    as the engine tokenizes it, and the tokens it may write."""
    config = warm_engine_config(1, 8)
    engine = Engine(LlamaRunner(model_path, config), config)
    answerer = build_answerer(MarketStore(small_market), None, clock=market_clock())
    most: dict[str, int] = {}
    for hit in answerer.store.all_names():
        for language, question in QUESTIONS.items():
            decision = answerer.decider.decide(question, sku=hit.sku, language=language)
            if decision.verdict is None or decision.sheet is None:
                continue
            inputs = ExplanationRun(decision.sheet, decision.verdict).inputs
            n = engine.prompts.count(build_messages(inputs), answer_prefix(inputs))
            most[language] = max(most.get(language, 0), n + token_budget(language))
    engine.close()
    yield most


@pytest.mark.parametrize("parallel", PARALLEL)
def test_the_longest_explanation_fits_its_stream(cells: dict[str, int], parallel: int) -> None:
    assert set(cells) == set(QUESTIONS)
    assert max(cells.values()) <= warm_engine_config(2, parallel).sequence_cells


@pytest.mark.parametrize("parallel", PARALLEL)
def test_every_explanation_in_flight_has_its_own_stream(parallel: int) -> None:
    config = warm_engine_config(2, parallel)
    assert config.kv_streams
    assert config.max_sequences >= parallel


@pytest.mark.parametrize("parallel", PARALLEL)
def test_a_stream_is_no_larger_than_the_longest_explanation_needs(
    cells: dict[str, int], parallel: int
) -> None:
    """llama.cpp pads what a step's attention visits to 256 cells: a stream holds the
    longest explanation rounded up to that, and not a pad more."""
    longest = max(cells.values())
    assert warm_engine_config(2, parallel).sequence_cells <= -(-longest // 256) * 256


def test_in_streams_the_explanations_in_flight_share_their_instructions(model_path: Path) -> None:
    """No finished prompt is kept (`WARM_CACHED_PREFIXES`): a new explanation copies the
    instructions from a running one's stream, once some running one has computed them. An
    explanation taken in just after all four in flight ended in the same step has none to
    copy from (how often depends on how the CPU is shared), at most one in each four."""
    engine = Engine.from_gguf(model_path, warm_engine_config(2, 4))
    system = "You are a shopping assistant. Tell the shopper why the verdict below is right."

    def chat(i: int) -> str:
        return (
            f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\nProduct: Gadget {i}\n"
            "Verdict: Better to wait<|im_end|>\n<|im_start|>assistant\nBetter to wait because"
        )

    async def main() -> list[Completion]:
        return list(
            await asyncio.gather(
                *(
                    engine.generate(
                        chat(i), params=SamplingParams(max_tokens=8), priority=Priority.BACKGROUND
                    )
                    for i in range(12)
                )
            )
        )

    try:
        done = asyncio.run(main())
    finally:
        engine.close()
    assert all(d.finish_reason is not FinishReason.ERROR for d in done)
    shared = [d.cached_tokens for d in done[4:]]
    cold = [c for c in shared if c < 24]
    assert len(cold) <= len(shared) // 4, shared  # all four ran out in one step: none to copy
