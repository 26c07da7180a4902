"""Product search and resolution: accuracy on a labelled query set, latency, side by side.

For each market (the demo of `worthit simulate`, the 100,000-product one of
`worthit simulate --skus 100000`, and a small shop of long Japanese and English titles,
bench/search_catalogue.jsonl) and each arm (this checkout; another checkout's `src`, the
commit before, with --baseline), a child process builds the resolver and answers every
question of bench/search_queries.jsonl the way the answer flow does (intent, then each
mention resolved), then times the two searches a shopper causes: the search box's
(`/v1/products?q=`: `ProductResolver.suggest` here, `MarketStore.suggest` before) and the
answer's resolution of each mention, uncached.

A question is right when every product it names is resolved to the labelled SKU, or,
labelled ambiguous (a model code several brands share), when it is reported ambiguous
with a labelled SKU among the candidates. A bare model code is labelled from the market
it is asked in (it may be unique among 2,000 products and shared among 100,000); other
labels are the 2,000-product demo's SKUs and count at 100,000 only where that SKU has the
same title there.

    git worktree add ../before <commit>
    nice .venv/bin/python bench/search.py --db var/demo.db --db var/demo-100k.db \\
        --baseline ../before/src [--baseline-db var/demo-v5.db --baseline-db ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent
QUERIES = HERE / "search_queries.jsonl"
CATALOGUE = HERE / "search_catalogue.jsonl"
LANGUAGES = ("en", "zh", "ja")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", action="append", default=[], help="a demo market (repeat)")
    parser.add_argument("--baseline", help="another checkout's src directory, to compare")
    parser.add_argument(
        "--baseline-db",
        action="append",
        default=[],
        help="the market the baseline reads, one per --db (a copy at its schema version)",
    )
    parser.add_argument("--passes", type=int, default=3, help="timed passes over the set")
    parser.add_argument("--json", help="write the raw results here")
    parser.add_argument("--arm", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.arm:
        print(json.dumps(run_arm(args.arm, args.passes)))
        return
    arms = {"now": str(HERE.parent / "src")}
    if args.baseline:
        arms = {"before": str(Path(args.baseline).resolve()), **arms}
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        baseline = dict(zip(args.db, args.baseline_db, strict=False))
        markets = {"shop": "", **market_names(args.db)}
        for market, db in markets.items():
            for arm, src in arms.items():
                read = baseline.get(db, db) if arm == "before" else db
                if market == "shop":
                    read = str(Path(tmp) / f"shop-{arm}.db")
                results.setdefault(market, {})[arm] = child(src, read, market, args.passes)
                print(f"{market} {arm}: done", file=sys.stderr)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    print(report(results))


def market_names(dbs: list[str]) -> dict[str, str]:
    return {f"demo-{Path(db).stem}": db for db in dbs}


def child(src: str, db: str, market: str, passes: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": src}
    spec = json.dumps({"db": db, "market": market})
    out = subprocess.run(
        [sys.executable, __file__, "--arm", spec, "--passes", str(passes)],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


# --- one arm, in its own process (its own `worthit`) ------------------------------------------


def run_arm(spec_text: str, passes: int) -> dict[str, Any]:
    from worthit.decide.intent import parse_intent
    from worthit.decide.resolve import ProductResolver
    from worthit.market.records import ProductRecord
    from worthit.market.store import MarketStore

    spec = json.loads(spec_text)
    shop = spec["market"] == "shop"
    store = MarketStore(spec["db"])
    if shop:
        lines = CATALOGUE.read_text(encoding="utf-8").splitlines()
        store.apply([ProductRecord.model_validate_json(line) for line in lines if line])
    started = time.perf_counter()
    resolver = ProductResolver(store)
    build_s = time.perf_counter() - started
    names = {hit.sku: hit for hit in store.all_names()}
    items = [json.loads(line) for line in QUERIES.read_text(encoding="utf-8").splitlines()]
    items = [i for i in items if (i["market"] == "real") == shop]
    labels = relabelled(items, names, shop)

    scored: list[dict[str, Any]] = []
    for item, label in zip(items, labels, strict=True):
        if label is None:
            continue
        resolutions = [resolver.resolve(m) for m in parse_intent(item["q"]).mentions]
        scored.append({**item, "expect": label, "right": right(item["status"], label, resolutions)})

    cache = resolver._cache  # the arms' resolvers both keep one; timed without it
    suggest = getattr(resolver, "suggest", None) or store.suggest
    texts = [i["q"] for i in items]
    mentions = [m for t in texts for m in parse_intent(t).mentions]
    timings: dict[str, list[float]] = defaultdict(list)
    for _ in range(passes):
        for text in texts:
            timed(timings, "suggest", partial(suggest, text, 8))
        for mention in mentions:
            cache.clear()
            timed(timings, "resolve", partial(resolver.resolve, mention))
    return {
        "products": len(names),
        "build_s": round(build_s, 2),
        "scored": scored,
        **{key: quantiles(values) for key, values in timings.items()},
    }


def timed(timings: dict[str, list[float]], key: str, call: Any) -> None:
    """Wall time, and the thread's CPU time: on a shared machine the wall time's tail is
    mostly other processes' turns, which CPU time leaves out."""
    wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
    call()
    timings[f"{key}_ms"].append((time.perf_counter_ns() - wall) / 1e6)
    timings[f"{key}_cpu_ms"].append((time.thread_time_ns() - cpu) / 1e6)


def relabelled(items: list[dict[str, Any]], names: dict[str, Any], shop: bool) -> list[Any]:
    """Each item's expected SKUs in this market, or None where the label does not carry."""
    owners: dict[str, list[str]] = defaultdict(list)
    for hit in names.values():
        if hit.aliases:
            owners[hit.aliases[0].casefold()].append(hit.sku)
    labels: list[Any] = []
    for item in items:
        code = item.get("code")
        if shop:
            labels.append(item["expect"])
        elif code:
            found = owners.get(code.casefold(), [])
            item["status"] = "resolved" if len(found) == 1 else "ambiguous"
            labels.append(found or None)
        else:
            same = all(
                sku in names and names[sku].title == title
                for sku, title in zip(item["expect"], item["titles"], strict=True)
            )
            labels.append(item["expect"] if same else None)
    return labels


def right(status: str, expect: list[str], resolutions: list[Any]) -> bool:
    if not resolutions:
        return False
    if status == "ambiguous":
        return any(
            r.status.value == "ambiguous" and {c.sku for c in r.candidates} & set(expect)
            for r in resolutions
        )
    resolved = [r.sku for r in resolutions if r.status.value == "resolved"]
    return len(resolved) == len(resolutions) and set(resolved) == set(expect)


def quantiles(values: list[float]) -> dict[str, float]:
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {
        "n": len(values),
        "p50": round(statistics.median(values), 3),
        "p99": round(cuts[98], 3),
        "max": round(max(values), 3),
    }


# --- the report -------------------------------------------------------------------------------


def report(results: dict[str, dict[str, Any]]) -> str:
    lines = [
        "| market | arm | products | index build s | n | en | zh | ja | all |"
        " suggest p50 / p99 ms (CPU p99) | resolve p50 / p99 ms (CPU p99) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for market, arms in results.items():
        for arm, r in arms.items():
            scored = r["scored"]
            cells = [accuracy([s for s in scored if s["lang"] == lang]) for lang in LANGUAGES]
            lines.append(
                f"| {market} | {arm} | {r['products']:,} | {r['build_s']} | {len(scored)} | "
                + " | ".join(cells)
                + f" | {accuracy(scored)} | {latency(r, 'suggest')} | {latency(r, 'resolve')} |"
            )
    lines.append("")
    lines.append("Wrong now (market: question → expected):")
    for market, arms in results.items():
        for s in arms.get("now", {}).get("scored", []):
            if not s["right"]:
                lines.append(f"- {market}: {s['q']} → {s['status']} {s['expect']}")
    return "\n".join(lines)


def latency(r: dict[str, Any], key: str) -> str:
    wall, cpu = r[f"{key}_ms"], r[f"{key}_cpu_ms"]
    return f"{wall['p50']} / {wall['p99']} ({cpu['p99']})"


def accuracy(scored: list[dict[str, Any]]) -> str:
    if not scored:
        return "-"
    return f"{100 * sum(s['right'] for s in scored) / len(scored):.1f} %"


if __name__ == "__main__":
    main()
