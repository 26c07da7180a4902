"""Prefix warming after refusals (engine/warming.py), through PrefixWarmer itself."""

from __future__ import annotations

from worthit.engine.config import EngineConfig
from worthit.engine.timing.budget import PublishedBudget, StepBudget
from worthit.engine.warming import PrefixWarmer


def warmer(budget: StepBudget) -> tuple[PrefixWarmer, list[list[int]]]:
    queued: list[list[int]] = []
    config = EngineConfig()
    return (
        PrefixWarmer(
            config, PublishedBudget(budget), lambda: 0, lambda _id, tokens: queued.append(tokens)
        ),
        queued,
    )


def test_a_prompt_refused_once_on_an_idle_engine_is_warmed_at_once():
    """Idle prefixes live in host RAM (resident cells), so warming one displaces no
    popular prompt from the KV cells: the first refusal warms its full blocks."""
    w, queued = warmer(StepBudget(0.04))
    prompt = list(range(1, 21))  # 20 tokens: two full blocks of 8 before the last token
    assert w.after_refusal(prompt, cached=0)
    assert queued == [prompt[:16]]


def test_a_prompt_refused_once_while_busy_is_warmed_when_idle():
    w, queued = warmer(StepBudget(0.04, running=1))
    prompt = list(range(1, 21))
    assert not w.after_refusal(prompt, cached=0)
    assert queued == []
    assert w.warm_deferred(lambda tokens: 0)
    assert queued == [prompt[:16]]
