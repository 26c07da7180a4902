"""Answers under a live feed: how often a question finds its product's fact sheet built,
and what the verdict costs when it does not, with the idle-time refresher and without.

Each arm starts `worthit serve --demo` on a copy of the market (no background generator,
the live simulator at `--live-rate` events a second, each event dropping its product's
sheet), lets the feed run for `--warmup-s` under the same questions, then sends
questions open-loop for `--seconds`: Poisson arrivals at `--rate` a second, products by
popularity (Zipf over last week's sales rank, as bench/service.py), each on a fresh
connection, its deadline under the engine's margin so every answer is the template. It
reports the time to each answer's `verdict` event, the `facts` stage inside it (from the
event's `timings_ms`), the share of reads the fact cache missed (`/readyz`), and the
server's CPU time over the window (cores, from /proc: the feed and the rebuilding too).

An arm is `NAME=SERVE-ARGS`; `--code DIR` among the arguments serves that arm from
another checkout's `src` (the commit before, for a side-by-side run). The arms run
interleaved, `--rounds` times, so a burst of the host's other work falls on all.

    .venv/bin/python bench/live_cache.py --db var/demo.db \
        --arm "refresh=" --arm "off=--refresh-share 0" --arm "before=--code /tmp/wt_before"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import uvloop

from peak import cpu_seconds, requests
from service import free_port, fresh_copy, pct, stop_server, wait_ready

SERVE = ["--no-background"]


async def verdict_of(port: int, request: bytes) -> tuple[float, float] | None:
    """One question on a fresh connection: ms to its `verdict` event, and the event's
    `facts` stage in ms; None for an answer without one (an ambiguous name is answered
    with candidates, in one JSON body)."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(request)
        head = await reader.readuntil(b"\r\n\r\n")
        if b"transfer-encoding: chunked" not in head.lower():
            return None
        buffer = b""
        while (at := buffer.find(b"event: verdict")) < 0 or b"\n\n" not in buffer[at:]:
            data = await reader.read(65536)
            if not data:
                raise ConnectionError("server closed the connection mid-stream")
            buffer += data
        elapsed = (time.perf_counter() - started) * 1000
    finally:
        writer.close()
    line = buffer[at:].split(b"data: ", 1)[1].split(b"\n", 1)[0]
    return elapsed, float(json.loads(line)["timings_ms"]["facts"])


async def open_loop(
    port: int, pool: list[bytes], rate: float, seconds: float
) -> list[tuple[float, float]]:
    rng = random.Random(5)
    tasks = []
    stop_at = time.perf_counter() + seconds
    k = 0
    while time.perf_counter() < stop_at:
        tasks.append(asyncio.create_task(verdict_of(port, pool[k % len(pool)])))
        k += 1
        await asyncio.sleep(rng.expovariate(rate))
    return [answer for answer in await asyncio.gather(*tasks) if answer is not None]


def facts(base: str) -> dict[str, int]:
    return dict(httpx.get(base + "/readyz", timeout=10).json()["facts"])


def run_arm(args: argparse.Namespace, name: str, serve_args: list[str]) -> dict[str, Any]:
    env = {**os.environ, "NO_COLOR": "1"}
    if "--code" in serve_args:
        at = serve_args.index("--code")
        env["PYTHONPATH"] = str(Path(serve_args[at + 1]) / "src")
        serve_args = serve_args[:at] + serve_args[at + 2 :]
    db = fresh_copy(Path(args.db), "worthit-live-cache-")
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "worthit", "serve", "--demo", "--db", str(db), "--port",
         str(port), *SERVE, "--live-rate", str(args.live_rate), *serve_args],
        stderr=subprocess.DEVNULL, env=env, cwd=db.parent,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base + "/readyz", server, within_s=120)
        pool = requests(db, port, 20_000, seed=3)
        uvloop.run(open_loop(port, pool, args.rate, args.warmup_s))
        before = facts(base)
        cpu_before = cpu_seconds(server.pid)
        answers = uvloop.run(open_loop(port, pool, args.rate, args.seconds))
        cpu = cpu_seconds(server.pid) - cpu_before
        after = facts(base)
    finally:
        stop_server(server)
        shutil.rmtree(db.parent, ignore_errors=True)
    hits = after["hits"] - before["hits"]
    misses = after["misses"] - before["misses"]
    verdicts = [v for v, _ in answers]
    stages = [f for _, f in answers]
    return {
        "arm": name,
        "answers": len(answers),
        "verdict_p50_ms": pct(verdicts, 50),
        "verdict_p99_ms": pct(verdicts, 99),
        "facts_p50_ms": pct(stages, 50),
        "facts_p99_ms": pct(stages, 99),
        "miss_share": round(misses / max(1, hits + misses), 4),
        "cached_at_end": after["cached"],
        "server_cpu_share": round(cpu / args.seconds, 3),
        "refreshed": after.get("refreshed", 0) - before.get("refreshed", 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="var/demo.db")
    parser.add_argument("--arm", action="append", required=True, help="NAME=SERVE-ARGS")
    parser.add_argument("--rate", type=float, default=50.0, help="questions a second")
    parser.add_argument("--live-rate", type=float, default=80.0, help="events a second")
    parser.add_argument("--warmup-s", type=float, default=30.0)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    if not Path(args.db).exists():
        sys.exit(f"no market at {args.db}: run `worthit simulate --db {args.db}` first")
    arms = [(name, rest.split()) for name, _, rest in (a.partition("=") for a in args.arm)]
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in arms}
    for _ in range(args.rounds):
        for name, serve_args in arms:
            result = run_arm(args, name, serve_args)
            print(json.dumps(result), flush=True)
            results[name].append(result)
    for name, runs in results.items():
        medians = {
            key: statistics.median(run[key] for run in runs)
            for key in ("verdict_p50_ms", "verdict_p99_ms", "facts_p50_ms", "facts_p99_ms",
                        "miss_share", "server_cpu_share")
        }  # fmt: skip
        print(json.dumps({"arm": name, "median_of_rounds": medians}), flush=True)


if __name__ == "__main__":
    main()
