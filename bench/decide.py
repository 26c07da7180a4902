"""Question → verdict, in-process, over many questions (no LLM; design budget ≤ 5 ms P99).

Runs the same question stream twice in one process: through the facts and rankings
caches (how the service runs) and with both bypassed (every question rebuilds its fact
sheet or ranking from SQLite, and its verdict from the rules), and reports both and
their ratio.

    .venv/bin/python bench/decide.py --db var/demo.db --questions 10000
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from worthit.decide.decider import Decider
from worthit.decide.resolve import ProductResolver
from worthit.decide.verdict_cache import VerdictCache
from worthit.demo.simulator import simulate
from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.facts.rankings import Rankings
from worthit.market.categories import CATEGORIES
from worthit.market.entities import SearchHit
from worthit.market.store import MarketStore

EN = [
    "Is the {name} worth buying?",
    "Should I buy the {name}?",
    "Should I wait for the sale on the {name}?",
    "{name} or {other}?",
]
ZH = ["{name}值不值得买？", "{name}现在买还是等等？", "{name}和{other}哪个好"]
TOP = [
    "top 3 {cat} by sales in the last 3 days",
    "highest rated {cat} this week",
    "最近三天销量TOP3的{zh}",
]


def questions(store: MarketStore, n: int, seed: int) -> list[str]:
    """Zipf-weighted products by last week's sales, as traffic concentrates on best-sellers."""
    rng = random.Random(seed)
    names = by_sales(store)
    weights = [1.0 / (rank + 1) for rank in range(len(names))]
    out = []
    for _ in range(n):
        roll = rng.random()
        if roll < 0.1:
            cat = rng.choice(CATEGORIES)
            out.append(rng.choice(TOP).format(cat=cat.en, zh=cat.zh))
            continue
        hit, other = rng.choices(names, weights, k=2)
        zh_alias = next((a for a in hit.aliases if any("\u4e00" <= c <= "\u9fff" for c in a)), None)
        if roll < 0.3 and zh_alias:
            out.append(rng.choice(ZH).format(name=zh_alias, other=other.title))
        else:
            name = rng.choice(
                [hit.title, f"{hit.brand} {hit.aliases[0]}" if hit.aliases else hit.title]
            )
            out.append(rng.choice(EN).format(name=name, other=other.title))
    return out


def by_sales(store: MarketStore) -> list[SearchHit]:
    """Every product, best seller of the last 7 days first (then the unsold, by sku)."""
    names = store.all_names()
    ranked = Rankings(FactsBuilder(store)).top(None, "sales", 7, len(names))
    order = {item.sku: i for i, item in enumerate(ranked)}
    return sorted(names, key=lambda hit: order.get(hit.sku, len(order)))


def run(decider: Decider, qs: list[str]) -> tuple[list[float], dict[str, int]]:
    latencies = []
    statuses: dict[str, int] = {}
    for q in qs:
        start = time.perf_counter()
        decision = decider.decide(q)
        latencies.append((time.perf_counter() - start) * 1000)
        statuses[decision.status.value] = statuses.get(decision.status.value, 0) + 1
    return latencies, statuses


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(p * 10) - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="var/demo.db")
    parser.add_argument("--questions", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    fresh = not Path(args.db).exists()
    Path(args.db).parent.mkdir(parents=True, exist_ok=True)
    store = MarketStore(args.db)
    if fresh:
        print("building the demo market …", file=sys.stderr)
        simulate(store, skus=2000, days=180, seed=7)
    qs = questions(store, args.questions, args.seed)
    resolver = ProductResolver(store)
    cached = Decider(FactsCache(FactsBuilder(store)), resolver)
    uncached = Decider(
        FactsCache(FactsBuilder(store), max_age_s=0.0), resolver, verdicts=VerdictCache(0)
    )
    uncached.rankings.max_age_s = 0.0  # the anchor recomputes rankings too
    run(cached, qs[:200])  # warm the resolver cache and SQLite pages for both runs alike
    results = {}
    for label, decider in (("cached facts", cached), ("facts rebuilt per question", uncached)):
        latencies, statuses = run(decider, qs)
        results[label] = latencies
        print(
            f"{label:28s} n={len(latencies)}  P50 {pct(latencies, 50):.3f} ms  "
            f"P99 {pct(latencies, 99):.3f} ms  max {max(latencies):.3f} ms  {statuses}"
        )
    a, b = results["cached facts"], results["facts rebuilt per question"]
    p50, p99 = pct(a, 50) / pct(b, 50), pct(a, 99) / pct(b, 99)
    print(f"ratio cached/rebuilt: P50 {p50:.2f}  P99 {p99:.2f}")


if __name__ == "__main__":
    main()
