"""Warm the prefix cache with the explanation prompts of the best sellers.

A cold explanation prompt (instructions, facts, verdict: ~550 tokens on SmolLM2) takes
longer to prefill on a small CPU than a whole answer may take, so admission control
refuses it and the shopper gets template text. Most questions are about a few popular
products; with their prompts already in the KV cache, a question about one of them
prefills only its own ~40 tokens and the LLM explanation fits in the deadline.
"""

from __future__ import annotations

from worthit.answer.live import needs_no_model
from worthit.decide.decider import Decider
from worthit.engine.engine import Engine
from worthit.explain.explainer import ExplanationRun
from worthit.explain.prompt import prompt_reviews
from worthit.market.store import MarketStore

WARM_QUESTION = {"en": "Is it worth buying?", "zh": "值得买吗？"}
SALES_WINDOW_DAYS = 7


def warm_best_sellers(
    engine: Engine, decider: Decider, store: MarketStore, n: int, language: str = "en"
) -> list[str]:
    """Queue prefix warming for the n products that sold most in the last week, in
    ``language``; the skus queued (already-cached ones are skipped)."""
    queued = []
    for item in decider.rankings.top(None, "sales", SALES_WINDOW_DAYS, n):
        decision = decider.decide(WARM_QUESTION[language], sku=item.sku, language=language)
        if needs_no_model(decision) or decision.sheet is None or decision.verdict is None:
            continue
        reviews = prompt_reviews(store, decision.sheet)
        run = ExplanationRun(decision.sheet, reviews, decision.verdict, decision.question)
        if engine.warm(run.messages, answer_prefix=run.prefix):
            queued.append(item.sku)
    return queued
