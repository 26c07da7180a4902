"""Freshness: from sending an event to the next answer that shows it (P50, P95, P99),
embedded (POST /v1/events) and through Redis Streams, under a background load of live
events (design targets: P99 ≤ 100 ms embedded, ≤ 250 ms through Redis, at 1,000/s).

Each run starts the real server (`worthit serve --demo`, the bundled model, its
background generator off) in a child process on its own copy of the market, with the
background load from the live simulator: inside the server (`--live-rate`) for the
embedded run; for the Redis run, the server consumes a stream of its own
(`--redis --redis-stream`) and `worthit simulate --live --redis` publishes the load to it
from another process. After a warm-up, each probe picks a product at random, reads its
current price from an answer, moves it by a few cents (stamped now), sends that price
event (POST /v1/events, or XADD), then asks /v1/decide about the product again and
again (reading each SSE answer only as far as its `verdict` event) until an answer's
`current_price` is the new one. The probe's figure is the time from just before the
send to the end of that answer. A probe overtaken by a newer price from the load (it
then never shows) is counted apart after `--probe-timeout-s`.

The P99 is also given with its one-sided 95% upper bound (the order statistic the
binomial distribution names: with n ≥ 299 the largest value bounds it).

    .venv/bin/python bench/freshness.py --db var/demo.db --probes 300 --load 1000
    .venv/bin/python bench/freshness.py --db var/demo.db --modes redis --redis redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import redis

from worthit.market.ingest.redis_stream import EVENT_FIELD
from worthit.market.store import MarketStore
from worthit.text.time import from_ms, now_ms

ROOT = Path(__file__).parents[1]
WORTHIT = [sys.executable, "-m", "worthit"]


def stamp(ms: int) -> str:
    """To the millisecond, as the live simulator stamps its own events: a probe sent in
    the same second as a load event on its product must still be the newer one."""
    return from_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(p / 100 * len(ordered)) - 1)]


def upper_bound(values: list[float], p: float = 0.99, confidence: float = 0.95) -> float | None:
    """The smallest order statistic that is ≥ the p-quantile with `confidence`, or None
    when there are too few values to say."""
    n = len(values)
    ordered = sorted(values)
    below = 0.0
    for k in range(n):
        below += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        if below >= confidence:
            return ordered[k]
    return None


class Server:
    """`worthit serve --demo` in a child process, on a copy of the market."""

    def __init__(self, db: Path, extra: list[str]) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (the child writes to it until stop)
        self.process = subprocess.Popen(
            [
                *WORTHIT,
                "serve",
                "--demo",
                "--db",
                str(db),
                "--port",
                str(self.port),
                "--no-background",
                "--no-freshness",
                *extra,
            ],
            stdout=self.log,
            stderr=self.log,
            cwd=ROOT,
        )

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                self.log.seek(0)
                sys.exit(f"the server exited:\n{self.log.read().decode()[-3000:]}")
            try:
                body = httpx.get(self.base + "/readyz", timeout=2).json()
                redis_state = (body.get("events") or {}).get("redis") or {"state": "connected"}
                if body.get("ready") and redis_state["state"] == "connected":
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        sys.exit("the server did not become ready")

    def events(self) -> dict[str, Any]:
        return dict(httpx.get(self.base + "/readyz", timeout=5).json()["events"])

    def stop(self) -> None:
        stop(self.process)
        self.log.close()


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def current(client: httpx.AsyncClient, sku: str) -> dict[str, Any]:
    """The `verdict` event of one answer about `sku` (the rest of the stream is dropped)."""
    body = {"question": "Is it worth buying?", "sku": sku, "max_tokens": 1, "deadline_ms": 50}
    headers = {"Accept": "text/event-stream"}
    async with client.stream("POST", "/v1/decide", json=body, headers=headers) as response:
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event == "verdict":
                return dict(json.loads(line[5:]))
    raise RuntimeError(f"no verdict in the answer about {sku}")


async def probes(
    base: str, send: Any, skus: list[str], count: int, timeout_s: float, seed: int
) -> tuple[list[float], int]:
    rng = random.Random(seed)
    latencies: list[float] = []
    overtaken = 0
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        for n in range(count):
            sku = rng.choice(skus)
            before = (await current(client, sku))["facts"]["current_price"]
            if before is None:
                continue
            target = round(before + rng.choice((-1, 1)) * 0.01 * rng.randint(1, 9), 2)
            event = {"type": "price", "event_id": f"fresh-{uuid.uuid4().hex}", "source": "bench",
                     "sku": sku, "ts": stamp(now_ms()), "price": target}  # fmt: skip
            started = time.perf_counter()
            await send(client, event)
            while True:
                seen = (await current(client, sku))["facts"]["current_price"]
                elapsed = time.perf_counter() - started
                if seen == target:
                    latencies.append(elapsed * 1000)
                    break
                if elapsed > timeout_s:
                    overtaken += 1
                    break
            if (n + 1) % 50 == 0:
                print(f"  {n + 1} probes", file=sys.stderr)
            await asyncio.sleep(rng.uniform(0.02, 0.08))
    return latencies, overtaken


def catalogue(db: Path) -> list[str]:
    store = MarketStore(db)
    try:
        return [hit.sku for hit in store.all_names()]
    finally:
        store.close()


def run_mode(mode: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    db = folder / f"{mode}.db"
    shutil.copy(args.db, db)
    skus = catalogue(db)
    stream = f"worthit:bench:{uuid.uuid4().hex[:8]}"
    load: subprocess.Popen[bytes] | None = None
    if mode == "embedded":
        server = Server(db, ["--live-rate", str(args.load), *args.serve_args.split()])
    else:
        server = Server(
            db,
            ["--live-rate", "0", "--redis", args.redis, "--redis-stream", stream,
             *args.serve_args.split()],
        )  # fmt: skip
    client = redis.Redis.from_url(args.redis) if mode == "redis" else None
    try:
        server.wait_ready()
        if mode == "redis":
            load = subprocess.Popen(
                [
                    *WORTHIT,
                    "simulate",
                    "--live",
                    "--rate",
                    str(args.load),
                    "--db",
                    str(db),
                    "--redis",
                    args.redis,
                    "--redis-stream",
                    stream,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd=ROOT,
            )
        print(f"{mode}: warming up {args.warmup_s:g} s under the load", file=sys.stderr)
        time.sleep(args.warmup_s)

        async def post(http: httpx.AsyncClient, event: dict[str, Any]) -> None:
            r = await http.post("/v1/events", json={"events": [event]})
            assert r.json()["applied"] == [event["event_id"]], r.text

        async def xadd(_http: httpx.AsyncClient, event: dict[str, Any]) -> None:
            assert client is not None
            await asyncio.to_thread(client.xadd, stream, {EVENT_FIELD: json.dumps(event)})

        counter = "bus" if mode == "embedded" else "redis"
        applied_before = server.events()[counter]["applied"]
        started = time.monotonic()
        latencies, overtaken = asyncio.run(
            probes(
                server.base,
                post if mode == "embedded" else xadd,
                skus,
                args.probes,
                args.probe_timeout_s,
                args.seed,
            )
        )
        elapsed = time.monotonic() - started
        applied = server.events()[counter]["applied"] - applied_before
    finally:
        if load is not None:
            stop(load)
        server.stop()
        if client is not None:
            client.delete(stream, stream + ":dead")
            client.close()
    return {
        "mode": mode,
        "probes": len(latencies),
        "overtaken": overtaken,
        "load_events_per_s": round(applied / elapsed),
        "p50_ms": round(percentile(latencies, 50), 1),
        "p95_ms": round(percentile(latencies, 95), 1),
        "p99_ms": round(percentile(latencies, 99), 1),
        "p99_upper_95_ms": _rounded(upper_bound(latencies)),
        "max_ms": round(max(latencies), 1),
    }


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, default=ROOT / "var" / "demo.db",
                        help="the market to copy (built as the demo's when absent)")  # fmt: skip
    parser.add_argument("--modes", default="embedded,redis", help="embedded, redis or both")
    parser.add_argument("--probes", type=int, default=300, help="probes per mode")
    parser.add_argument("--load", type=float, default=1000.0, help="background events a second")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="for the redis mode")
    parser.add_argument("--warmup-s", type=float, default=8.0)
    parser.add_argument("--probe-timeout-s", type=float, default=3.0)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--json", action="store_true", help="one JSON object per mode")
    parser.add_argument("--serve-args", default="", help="extra `worthit serve` arguments")
    args = parser.parse_args()
    if not args.db.exists():
        print(f"no market at {args.db}: building the demo market", file=sys.stderr)
        args.db.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([*WORTHIT, "simulate", "--db", str(args.db)], check=True, cwd=ROOT)
    print(f"{os.cpu_count()} CPUs; {args.probes} probes a mode at {args.load:g} events/s of load")
    with tempfile.TemporaryDirectory() as folder:
        for mode in args.modes.split(","):
            result = run_mode(mode.strip(), args, Path(folder))
            if args.json:
                print(json.dumps(result))
            else:
                print(
                    f"{result['mode']:>9}: n={result['probes']} P50 {result['p50_ms']} ms, "
                    f"P95 {result['p95_ms']} ms, P99 {result['p99_ms']} ms (95% upper bound "
                    f"{result['p99_upper_95_ms']} ms), max {result['max_ms']} ms; "
                    f"load {result['load_events_per_s']} events/s applied; "
                    f"{result['overtaken']} probes overtaken"
                )


if __name__ == "__main__":
    main()
