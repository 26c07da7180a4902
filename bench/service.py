"""The service over HTTP: time to the `verdict` event, to the first token, to `done`,
at 1, 10, 50 and 100 concurrent shoppers on loopback while the engine is generating.

Starts `worthit serve --demo` in a child process on a free port (the real server, the
bundled model), then runs closed-loop clients: each sends a question, reads the SSE
stream to the end, and asks again, for a fixed time per level.

    .venv/bin/python bench/service.py --db var/demo.db --seconds 30
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from worthit.facts.builder import FactsBuilder
from worthit.facts.rankings import Rankings
from worthit.market.store import MarketStore

HOT = 10
"""The best sellers `worthit serve` warms by default; their answers are counted apart."""

QUESTIONS = ["Is the {name} worth buying?", "Should I wait for a sale on the {name}?"]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


async def one(client: httpx.AsyncClient, question: str, stats: dict[str, list[float]],
              outcomes: collections.Counter[str],
              hot_outcomes: collections.Counter[str] | None = None) -> None:  # fmt: skip
    sent = time.perf_counter()
    first_token = None
    async with client.stream(
        "POST", "/v1/decide", json={"question": question},
        headers={"Accept": "text/event-stream"},
    ) as response:  # fmt: skip
        if response.status_code != 200:
            outcomes[f"http_{response.status_code}"] += 1
            return
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                now = (time.perf_counter() - sent) * 1000
                if event == "verdict":
                    stats["verdict"].append(now)
                elif event == "token" and first_token is None:
                    first_token = now
                    stats["ttft"].append(now)
                elif event == "done":
                    stats["e2e"].append(now)
                    done = json.loads(line[6:])
                    source = done.get("explanation_source")
                    outcome = source if source == "llm" else done.get("fallback_reason", "?")
                    outcomes[outcome] += 1
                    if hot_outcomes is not None:
                        hot_outcomes[outcome] += 1
                    stats[f"e2e:{outcome}"].append(now)
                    if "llm_estimate" in done.get("timings_ms", {}):
                        stats["refused_estimate"].append(done["timings_ms"]["llm_estimate"])


async def level(
    base: str, names: list[str], clients: int, seconds: float, seed: int, think_s: float
) -> dict:
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(names))]
    stats: dict[str, list[float]] = collections.defaultdict(list)
    outcomes: collections.Counter[str] = collections.Counter()
    stop_at = time.perf_counter() + seconds
    hot_outcomes: collections.Counter[str] = collections.Counter()
    limits = httpx.Limits(max_connections=clients + 5, max_keepalive_connections=clients + 5)

    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:

        async def shopper() -> None:
            if think_s:  # shoppers arrive spread out, not all in the same millisecond
                await asyncio.sleep(rng.uniform(0, think_s))
            while time.perf_counter() < stop_at:
                rank = rng.choices(range(len(names)), weights)[0]
                name = names[rank]
                try:
                    question = rng.choice(QUESTIONS).format(name=name)
                    hot = hot_outcomes if rank < HOT else None
                    await one(client, question, stats, outcomes, hot)
                except httpx.HTTPError as exc:
                    outcomes[f"transport:{type(exc).__name__}"] += 1
                if think_s:
                    await asyncio.sleep(rng.expovariate(1 / think_s))

        started = time.perf_counter()
        await asyncio.gather(*(shopper() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    completed = len(stats["e2e"])
    return {
        "clients": clients,
        "answers": completed,
        "answers_per_s": round(completed / elapsed, 2),
        **{
            f"{k}_p{p}": round(pct(stats[k], p), 1)
            for k in ("verdict", "ttft", "e2e")
            for p in (50, 95, 99)
        },
        "e2e_le_800ms": round(sum(v <= 800 for v in stats["e2e"]) / max(1, completed), 3),
        "outcomes": dict(outcomes.most_common()),
        "best_seller_outcomes": dict(hot_outcomes.most_common()),
        "refused_estimate_p50_ms": round(pct(stats["refused_estimate"], 50), 1),
        "e2e_p95_by_outcome": {
            k[4:]: round(pct(v, 95), 1) for k, v in stats.items() if k.startswith("e2e:")
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="var/demo.db")
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--levels", default="1,10,50,100")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--think-ms", type=float, default=0.0,
                        help="mean think time between a shopper's questions (exponential)")
    parser.add_argument("--serve-args", default="", help="extra `worthit serve` arguments")
    args = parser.parse_args()
    if not Path(args.db).exists():
        sys.exit(f"no market at {args.db}: run `worthit simulate --db {args.db}` first")
    store = MarketStore(args.db)
    titles = {hit.sku: hit.title for hit in store.all_names()}
    ranked = Rankings(FactsBuilder(store)).top(None, "sales", 7, len(titles))
    best = {item.sku for item in ranked}
    names = [item.title for item in ranked] + [t for s, t in titles.items() if s not in best]
    store.close()  # popularity (the Zipf rank) follows last week's sales
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "worthit", "serve", "--demo", "--db", args.db, "--port",
         str(port), "--threads", str(args.threads), *args.serve_args.split()],
        stderr=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(base + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        idle_since = time.monotonic()  # let the server finish warming its best sellers
        while time.monotonic() - idle_since < 120:
            health = httpx.get(base + "/healthz", timeout=5).json()
            if health["running"] == 0 and health["waiting"] == 0:
                break
            time.sleep(0.5)
        asyncio.run(level(base, names, 1, 5, 0, 0.0))  # warm up: calibrate, first prefixes
        think_s = args.think_ms / 1000
        for i, clients in enumerate(int(x) for x in args.levels.split(",")):
            result = asyncio.run(level(base, names, clients, args.seconds, i + 1, think_s))
            print(json.dumps(result, ensure_ascii=False), flush=True)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
