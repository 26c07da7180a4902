"""How often the model's explanation survives the guard, over simulated questions.

Asks N questions about Zipf-weighted products of the demo market (English and Chinese)
through the answer flow `/v1/decide` serves (`Answerer.ask` on the batching engine, the
same prompt, guard and wording checks), without a deadline so that every question gets
the model's text to judge, and counts how many explanations were kept ("llm") and why
the others fell back to the template.

    .venv/bin/python bench/guard.py --db var/demo.db --questions 200
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sys
from pathlib import Path

from worthit.answer.answerer import Answerer
from worthit.answer.events import Finished
from worthit.cli.engine_host import run_with_engine
from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.model_files import resolve_model_path
from worthit.engine.runner import LlamaRunner
from worthit.market.simulator import simulate
from worthit.market.store import MarketStore

EN = ["Is the {name} worth buying?", "Should I buy the {name} now or wait?"]
ZH = ["{name}值不值得买？", "{name}现在买还是等等？"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="var/demo.db")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--seed", type=int, default=2)
    parser.add_argument("--model", default=None)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--samples", type=Path, default=None, help="write each answer here")
    args = parser.parse_args()
    if not Path(args.db).exists():
        print("building the demo market …", file=sys.stderr)
        Path(args.db).parent.mkdir(parents=True, exist_ok=True)
        simulate(MarketStore(args.db), skus=2000, days=180, seed=7)
    store = MarketStore(args.db)
    config = EngineConfig(n_threads=args.threads)
    engine = Engine(LlamaRunner(resolve_model_path(args.model), config), config)
    answerer = Answerer(store, engine)
    run_with_engine(engine, lambda: ask_all(answerer, store, args))


async def ask_all(answerer: Answerer, store: MarketStore, args: argparse.Namespace) -> None:
    rng = random.Random(args.seed)
    names = store.all_names()
    weights = [1.0 / (rank + 1) for rank in range(len(names))]
    outcomes: collections.Counter[str] = collections.Counter()
    by_language: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    totals = []
    samples = []
    for i in range(args.questions):
        hit = rng.choices(names, weights)[0]
        zh = i % 4 == 3
        template = rng.choice(ZH if zh else EN)
        question = template.format(
            name=hit.aliases[1] if zh and len(hit.aliases) > 1 else hit.title
        )
        finished = None
        async for event in answerer.ask(question, sku=hit.sku):
            if isinstance(event, Finished):
                finished = event
        assert finished is not None and finished.explanation is not None
        explanation = finished.explanation
        outcome = "llm" if explanation.source == "llm" else explanation.fallback_reason or "?"
        outcomes[outcome] += 1
        by_language["zh" if zh else "en"][outcome] += 1
        totals.append(finished.timings_ms.get("llm_total", 0.0))
        samples.append(
            {
                "question": question,
                "verdict": finished.decision.verdict.kind.value
                if finished.decision.verdict
                else None,
                "outcome": outcome,
                "model_text": explanation.streamed or explanation.text,
                "ungrounded": list(explanation.ungrounded),
            }
        )
        print(f"{i + 1:4d} {outcome:20s} {question}", file=sys.stderr)
    n = sum(outcomes.values())
    print(f"questions: {n}")
    print(f"kept (llm): {outcomes['llm']} = {100 * outcomes['llm'] / n:.1f}%")
    for outcome, count in outcomes.most_common():
        print(f"  {outcome:20s} {count:4d}  {100 * count / n:5.1f}%")
    for language, counter in sorted(by_language.items()):
        total = sum(counter.values())
        print(f"  {language}: kept {counter['llm']}/{total}")
    print(f"explanation time: median {statistics.median(totals):.0f} ms")
    if args.samples:
        args.samples.write_text(
            "\n".join(json.dumps(s, ensure_ascii=False) for s in samples) + "\n"
        )


if __name__ == "__main__":
    main()
