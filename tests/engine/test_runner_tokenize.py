"""Tokenising on the real model: what a prompt costs the process beyond its tokens."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path

import pytest

from worthit.engine.config import EngineConfig
from worthit.engine.runner import LlamaRunner

from engine_fixtures import model_path

pytestmark = pytest.mark.slow
__all__ = ["model_path"]  # the fixture, imported for pytest to find


@pytest.fixture(scope="module")
def runner(model_path: Path) -> Iterator[LlamaRunner]:
    runner = LlamaRunner(model_path, EngineConfig(context_size=512))
    yield runner
    runner.close()


def test_prompts_of_every_length_leave_no_garbage_for_the_cyclic_collector(
    runner: LlamaRunner,
) -> None:
    """The server tokenises each live request's prompt on its event loop; garbage with
    cycles there is freed later by the collector, in one pause on that loop."""
    gc.collect()
    gc.disable()
    try:
        counts = [len(runner.tokenize("Is it worth it? " + "x " * n)) for n in range(300)]
        left = gc.collect()
    finally:
        gc.enable()
    assert counts == sorted(counts) and counts[-1] > counts[0]
    assert left < 20


def test_a_prompt_longer_than_any_small_buffer_comes_back_whole(runner: LlamaRunner) -> None:
    text = " ".join(f"w{i}" for i in range(2_000))
    tokens = runner.tokenize(text, add_special=False)
    assert len(tokens) > 2_000
    assert b"".join(runner.piece(t) for t in tokens).decode() == text
