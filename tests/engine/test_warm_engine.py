"""The engine of `explain --warm` holds its batch of explanations and no more KV than that:
every cell up to the highest one in use costs every token of the batch its attention scan."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from worthit.answer.background import QUESTIONS
from worthit.cli.explain import warm_engine_config
from worthit.engine.engine import Engine
from worthit.engine.runner import LlamaRunner
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
def test_the_longest_explanation_fits_alone(cells: dict[str, int], parallel: int) -> None:
    assert set(cells) == set(QUESTIONS)
    assert max(cells.values()) < warm_engine_config(2, parallel).context_size


@pytest.mark.parametrize("parallel", PARALLEL)
def test_a_batch_of_english_explanations_fits_at_once(cells: dict[str, int], parallel: int) -> None:
    assert parallel * cells["en"] <= warm_engine_config(2, parallel).context_size


@pytest.mark.parametrize("parallel", [p for p in PARALLEL if p > 1])
def test_the_pool_is_no_larger_than_the_batch_can_fill(
    cells: dict[str, int], parallel: int
) -> None:
    assert warm_engine_config(2, parallel).context_size <= parallel * max(cells.values())
