"""Failover: kill one of two engine replicas under load; count answers lost, time to eject.

Starts two `worthit engine serve` replicas (bundled SmolLM2, one thread each) and routes
explanations to them through `worthit.engine.remote.router.Router`, as `worthit serve --engine
URL --engine URL` does: `--shoppers` closed-loop shoppers, each asking about a random one
of 40 products with a `--deadline-ms` objective, pausing `--think-ms` on average.
After `--kill-after` seconds replica B gets SIGKILL. An answer is lost when the flow
raised or ended without an explanation (target 0: a dead replica's answers fall back to
the template). Time to eject runs from the kill to the router marking B ejected
(consecutive failures of requests and probes).

    .venv/bin/python bench/failover.py --seconds 12 --kill-after 4 --shoppers 6
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from worthit.answer.on_demand import explain_on_demand
from worthit.decide.decider import Decision, DecisionStatus
from worthit.decide.intent import parse_intent
from worthit.engine.remote.router import Router
from worthit.explain.explainer import Explanation

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from factories import make_sheet, make_verdict


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_replica(log: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    with log.open("wb") as out:
        process = subprocess.Popen(
            [sys.executable, "-m", "worthit", "engine", "serve", "--port", str(port),
             "--threads", "1", "--context", "2048", "--max-sequences", "8"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
    return process, f"http://127.0.0.1:{port}/v1"


def wait_ready(url: str, process: subprocess.Popen[bytes]) -> None:
    give_up = time.monotonic() + 180
    while time.monotonic() < give_up and process.poll() is None:
        try:
            if httpx.get(url + "/models", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"replica {url} did not start")


def decision(i: int) -> Decision:
    title = f"Aurora NC{700 + 10 * i} Headphones"
    return Decision(
        question=f"Is the {title} worth buying?",
        intent=parse_intent(f"Is the {title} worth buying?"),
        status=DecisionStatus.ANSWERED,
        verdict=make_verdict(),
        sheet=make_sheet(title=title, sku=f"NC{700 + 10 * i}"),
    )


async def drive(args: argparse.Namespace, urls: list[str], kill: object) -> dict[str, object]:
    router = Router(urls, probe_interval_s=args.probe_interval)
    await router.start()
    outcomes: collections.Counter[str] = collections.Counter()
    by_phase: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    lost = 0
    killed_at: float | None = None
    ejected_at: float | None = None
    stop_at = time.monotonic() + args.seconds
    rng = random.Random(7)

    async def shopper() -> None:
        nonlocal lost
        while time.monotonic() < stop_at:
            phase = (
                "before" if killed_at is None else ("ejecting" if ejected_at is None else "after")
            )
            final = None
            try:
                async for item in explain_on_demand(
                    decision(rng.randrange(40)), router, deadline_s=args.deadline_ms / 1000
                ):
                    final = item
            except Exception as exc:
                print("lost:", repr(exc), file=sys.stderr)
            if not isinstance(final, Explanation):
                lost += 1
                continue
            label = "llm" if final.source == "llm" else f"template:{final.fallback_reason}"
            outcomes[label] += 1
            by_phase[phase][label] += 1
            await asyncio.sleep(rng.expovariate(1000 / args.think_ms))

    async def killer() -> None:
        nonlocal killed_at, ejected_at
        await asyncio.sleep(args.kill_after)
        killed_at = time.monotonic()
        kill.kill()  # type: ignore[attr-defined]
        while ejected_at is None and time.monotonic() < stop_at + 30:
            if not router.status().replicas[1].healthy:
                ejected_at = time.monotonic()
            await asyncio.sleep(0.005)

    await asyncio.gather(killer(), *(shopper() for _ in range(args.shoppers)))
    status = router.status()
    await router.aclose()
    return {
        "answers": sum(outcomes.values()) + lost,
        "lost": lost,
        "outcomes": dict(outcomes.most_common()),
        "by_phase": {k: dict(v.most_common()) for k, v in by_phase.items()},
        "eject_ms": None if ejected_at is None or killed_at is None
        else round((ejected_at - killed_at) * 1000, 1),
        "replicas": [{"url": r.url, "healthy": r.healthy, "ejections": r.ejections}
                     for r in status.replicas],
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--seconds", type=float, default=12.0)
    parser.add_argument("--kill-after", type=float, default=4.0)
    parser.add_argument("--shoppers", type=int, default=6)
    parser.add_argument("--deadline-ms", type=float, default=2000.0)
    parser.add_argument("--probe-interval", type=float, default=1.0)
    parser.add_argument("--think-ms", type=float, default=300.0, help="mean pause between asks")
    args = parser.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="worthit-failover-"))
    (a, url_a), (b, url_b) = start_replica(logs / "a.log"), start_replica(logs / "b.log")
    try:
        wait_ready(url_a, a)
        wait_ready(url_b, b)
        report = asyncio.run(drive(args, [url_a, url_b], b))
    finally:
        for process in (a, b):
            if process.poll() is None:
                process.kill()
                process.wait()
    print(json.dumps({"args": vars(args), **report}, indent=2))


if __name__ == "__main__":
    main()
