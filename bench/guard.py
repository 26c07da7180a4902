"""How often the model's explanation survives the guard, as the service writes them.

Draws N (product, language) pairs of the demo market (products Zipf-weighted by last
week's sales, Chinese one time in four) and has the model write each one's explanation
exactly as the service does for its store: the prompt built from the explanation's
inputs, best-of-k (greedy first, then seeded sampling), every try through the grounding
guard and the wording checks. Counts what the first (greedy) try kept, which is what a
shopper gets when the model writes live, what best-of-k kept, how many tries it needed,
and why the refused tries were refused.

    .venv/bin/python bench/guard.py --db var/demo.db --pairs 200 --samples samples.jsonl
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import random
import statistics
import sys
from pathlib import Path

from worthit.answer.answerer import Answerer
from worthit.answer.background import QUESTIONS
from worthit.answer.generation import DEFAULT_TRIES, Generated, generate
from worthit.cli.engine_host import run_with_engine
from worthit.cli.explain import WARM_PARALLEL, warm_engine_config
from worthit.demo.simulator import simulate
from worthit.engine.engine import Engine
from worthit.engine.model_files import resolve_lora_path, resolve_model_path
from worthit.engine.runner import LlamaRunner
from worthit.engine.weights import weights_for
from worthit.explain.adapter import bundled_adapter_path
from worthit.explain.templates import leading_reasons
from worthit.market.store import MarketStore
from worthit.service.build import build_answerer

Pair = tuple[str, str, str, tuple[str, ...], Generated]
"""A written pair: product, language, verdict, its leading reasons, what the model wrote."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="var/demo.db")
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--tries", type=int, default=DEFAULT_TRIES)
    parser.add_argument(
        "--parallel", type=int, default=WARM_PARALLEL, help="explanations written at once"
    )
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--model", default=None)
    parser.add_argument(
        "--lora", default=None, help="an adapter GGUF, or 'none' (default: as `worthit serve`)"
    )
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=Path, default=None, help="write each pair here")
    parser.add_argument(
        "--lead",
        default=None,
        metavar="CODE",
        help="draw only products whose verdict's first reason has this code (one reason's "
        "wording measured on its own)",
    )
    args = parser.parse_args()
    if not Path(args.db).exists():
        print("building the demo market …", file=sys.stderr)
        Path(args.db).parent.mkdir(parents=True, exist_ok=True)
        simulate(MarketStore(args.db), skus=2000, days=180, seed=7)
    config = warm_engine_config(args.threads, args.parallel)
    source = resolve_model_path(args.model)
    lora = resolve_lora_path(args.lora, source, bundled_adapter_path())
    model, runtime_lora = weights_for(source, lora)
    engine = Engine(LlamaRunner(model, config, runtime_lora), config)
    answerer = build_answerer(MarketStore(args.db), engine)
    results = run_with_engine(engine, lambda: write_all(answerer, engine, args))
    report(results, args)


async def write_all(answerer: Answerer, engine: Engine, args: argparse.Namespace) -> list[Pair]:
    rng = random.Random(args.seed)
    ranked = answerer.decider.rankings.top(None, "sales", 7, 10_000)
    skus = [item.sku for item in ranked]
    if args.lead:
        skus = [sku for sku in skus if _lead_code(answerer, sku) == args.lead]
        if not skus:
            raise SystemExit(f"no product's verdict leads with {args.lead!r}")
    weights = [1.0 / (rank + 1) for rank in range(len(skus))]
    pairs = [(rng.choices(skus, weights)[0], "zh" if i % 4 == 3 else "en")
             for i in range(args.pairs)]  # fmt: skip
    gate = asyncio.Semaphore(args.parallel)
    done = 0

    async def one(sku: str, language: str) -> Pair:
        nonlocal done
        decision = answerer.decider.decide(QUESTIONS[language], sku=sku, language=language)
        assert decision.sheet is not None and decision.verdict is not None
        async with gate:
            generated = await generate(engine, decision.sheet, decision.verdict, tries=args.tries)
        done += 1
        kept = "kept" if generated.explanation else "failed"
        print(f"{done:4d} {kept} after {generated.tries} {language} {sku}", file=sys.stderr)
        reasons = tuple(r.text for r in leading_reasons(decision.verdict))
        return sku, language, decision.verdict.kind.value, reasons, generated

    return await asyncio.gather(*(one(sku, language) for sku, language in pairs))


def _lead_code(answerer: Answerer, sku: str) -> str | None:
    verdict = answerer.decider.decide(QUESTIONS["en"], sku=sku, language="en").verdict
    return verdict.reasons[0].code if verdict is not None and verdict.reasons else None


def report(results: list[Pair], args: argparse.Namespace) -> None:
    n = len(results)
    first = sum(1 for *_, g in results if g.explanation is not None and g.tries == 1)
    kept = sum(1 for *_, g in results if g.explanation is not None)
    tries = collections.Counter(g.tries for *_, g in results if g.explanation is not None)
    refusals = collections.Counter(o for *_, g in results for o in g.outcomes)
    print(f"pairs: {n} ({args.tries} tries at most)")
    print(f"kept by the first, greedy try: {first} = {100 * first / n:.1f}%")
    print(f"kept by best-of-{args.tries}: {kept} = {100 * kept / n:.1f}%")
    print(
        "tries a kept explanation needed: "
        + ", ".join(f"{k}: {v}" for k, v in sorted(tries.items()))
    )
    print("why tries were refused:")
    for outcome, count in refusals.most_common():
        print(f"  {outcome:22s} {count:4d}")
    for language in ("en", "zh"):
        mine = [g for _, lang, *_, g in results if lang == language]
        greedy = sum(1 for g in mine if g.explanation is not None and g.tries == 1)
        best = sum(1 for g in mine if g.explanation is not None)
        print(
            f"  {language}: first try {greedy}/{len(mine)}, best-of-{args.tries} {best}/{len(mine)}"
        )
    seconds = [g.seconds for *_, g in results]
    print(f"time to a stored explanation: median {statistics.median(seconds):.2f} s")
    if args.samples:
        args.samples.write_text(
            "".join(
                json.dumps({"sku": sku, "language": lang, "verdict": verdict, "reasons": reasons,
                            "kept": g.explanation.text if g.explanation else None,
                            "tries": g.tries, "refused": g.outcomes}, ensure_ascii=False) + "\n"
                for sku, lang, verdict, reasons, g in results
            )
        )  # fmt: skip


if __name__ == "__main__":
    main()
