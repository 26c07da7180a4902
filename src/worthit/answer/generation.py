"""Best-of-k: one explanation for one product's inputs, tried until a candidate passes.

The first try is greedy (what a shopper waiting live gets); a candidate that fails the
guard or the wording checks is tried again with sampling, each try with its own fixed
seed, so a run is reproducible and the store can say how the kept text was drawn.
Every try is the model writing about this product's own inputs: no text is reused
across products.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from worthit.answer.on_demand import ENGINE_PROBLEMS, stream_explanation
from worthit.decide.verdict import Verdict
from worthit.engine.backend import EngineBackend
from worthit.engine.sequence import Priority, SamplingParams
from worthit.explain.explainer import (
    CJK_TOKEN_FACTOR,
    DEFAULT_MAX_TOKENS,
    Explanation,
    ExplanationRun,
    token_budget,
)
from worthit.facts.sheet import FactSheet

RETRY_TEMPERATURE = 0.7
DEFAULT_TRIES = 6
"""Tries in a round before a pair is left to the template. A refusal costs only the pairs
the model keeps failing, nearly all of them Chinese WAITs for a sale whose greedy text
says the sale's days twice ("15天后的Christmas Sale将在15天后开始"); the fifth and sixth
tries keep most of them at about 4 tries a rescued pair, where a pair at the end of the
demand walk costs 1.1 tries and weighs far less (docs/benchmarks.md)."""
MAX_TRIES = 4 * DEFAULT_TRIES
"""Tries of one pair's inputs over all its rounds. A failed pair is tried again
(`RETRY_FAILED_AFTER_MS`) with the seeds that follow its last round's: the same seeds
would write the same refused texts. The pairs that fail a round are few but best sellers
(a Chinese WAIT for a promotion weeks ahead), each asked by many shoppers; past this many
the inputs are taken as beyond the model, and the template stands until they change."""
SAMPLING_POLICY = (
    f"greedy, then temperature {RETRY_TEMPERATURE} with seeds 1, 2, ...; {DEFAULT_TRIES} "
    f"tries a round, at most {MAX_TRIES}; at most {DEFAULT_MAX_TOKENS} tokens "
    f"({CJK_TOKEN_FACTOR}x in Chinese and Japanese)"
)
"""Part of every stored explanation's key: a change of policy is a change of text."""


def try_params(i: int, language: str) -> SamplingParams:
    """The i-th try (0-based): greedy first, then seeded sampling."""
    tokens = token_budget(language)
    if i == 0:
        return SamplingParams(max_tokens=tokens, temperature=0.0)
    return SamplingParams(max_tokens=tokens, temperature=RETRY_TEMPERATURE, seed=i)


def describe(params: SamplingParams) -> str:
    if params.temperature == 0:
        return "greedy"
    return f"temperature {params.temperature}, seed {params.seed}"


@dataclass
class Generated:
    """What best-of-k produced: the kept explanation (None if no try passed) and why
    each try before it was refused."""

    explanation: Explanation | None
    tries: int
    """The pair's tries so far, earlier rounds' included: the kept try's number, or the
    last refused one's."""
    sampling: str
    outcomes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    completion_tokens: int = 0

    @property
    def engine_failed(self) -> bool:
        """No try got an answer from the engine: the inputs are not to blame."""
        return (
            self.explanation is None
            and bool(self.outcomes)
            and all(o in ENGINE_PROBLEMS or o.startswith("refused_") for o in self.outcomes)
        )


async def generate(
    engine: EngineBackend,
    sheet: FactSheet,
    verdict: Verdict,
    *,
    priority: Priority = Priority.BACKGROUND,
    tries: int = DEFAULT_TRIES,
    tried: int = 0,
) -> Generated:
    """Tries `tried + 1` to `tried + tries` (at most `MAX_TRIES`): `tried` is how many an
    earlier round spent on these inputs."""
    started = time.perf_counter()
    outcomes: list[str] = []
    tokens = 0
    for i in range(tried, min(tried + tries, MAX_TRIES)):
        run = ExplanationRun(sheet, verdict)
        params = try_params(i, run.inputs.language)
        final: Explanation | None = None
        async for item in stream_explanation(run, engine, params, priority=priority):
            if isinstance(item, Explanation):
                final = item
        assert final is not None
        tokens += final.tokens.get("completion", 0)
        if final.source == "llm":
            return Generated(
                final, i + 1, describe(params), outcomes, time.perf_counter() - started, tokens
            )
        reason = final.fallback_reason or "?"
        outcomes.append(reason)
        if reason in ENGINE_PROBLEMS or reason.startswith("refused_"):
            break
    return Generated(
        None, tried + len(outcomes), "", outcomes, time.perf_counter() - started, tokens
    )
