"""Peak load on the decision path: a burst of simultaneous questions, and the answers a
second at zero think time, with template text (no model text, so what is measured is
the service around the verdict, not the engine).

Starts `worthit serve --demo` on a copy of the market (empty explanation store, no
background generator, no live feed; each question's deadline is under the engine's
finishing margin, so every answer is the template), then

- burst: `--burst` questions sent at once on fresh connections, `--rounds` times; the
  time from sending to each answer's `verdict` event and to its `done`;
- capacity: `--clients` closed-loop clients on kept-alive connections, each asking again
  the moment its answer is done, for `--seconds`; answers a second, and the server's CPU
  time per answer (all its processes, from /proc), which a busy machine moves far less
  than the wall clock (the bursts' CPU per answer too: the steadier figure of the two).

The client is asyncio streams on uvloop with the requests encoded in advance, so that it
costs the two cores as little as it can (against a server that answers at once, a burst's
p99 was 32 ms with the plain asyncio loop and 16 ms on uvloop: the client's own floor).
`--code DIR` runs the server from another checkout's `src` (for a side-by-side run
against an older commit).

    .venv/bin/python bench/peak.py --db var/demo.db
    .venv/bin/python bench/peak.py --db var/demo.db --serve-args "--workers 2"
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import uvloop

from service import by_popularity, free_port, fresh_copy, pct, stop_server, wait_ready, wait_workers

TEMPLATE_ONLY = ["--no-background", "--live-rate", "0"]
WARM_S = 8.0
"""Questions asked before measuring, so no worker's caches are cold when the bursts come."""


def requests(db: Path, port: int, n: int, seed: int) -> list[bytes]:
    """`n` questions about products drawn as shoppers draw them (Zipf over last week's
    sales rank, as bench/service.py), encoded once."""
    products = by_popularity(db)
    weights = [1.0 / (rank + 1) for rank in range(len(products))]
    rng = random.Random(seed)
    out = []
    for product in rng.choices(products, weights, k=n):
        body = json.dumps(
            {"question": f"Is the {product.title} worth buying?", "deadline_ms": 50}
        ).encode()
        out.append(
            b"POST /v1/decide HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: text/event-stream\r\n"
            b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
            % (port, len(body), body)
        )
    return out


async def ask(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes
) -> tuple[float, float]:
    """One question on an open connection: seconds to its `verdict` event and to the
    response's end (the chunked stream's last chunk, or a plain body's last byte: an
    ambiguous question is answered with candidates, not a stream)."""
    started = time.perf_counter()
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.decode(errors="replace"))
    lowered = head.lower()
    if b"transfer-encoding: chunked" not in lowered:
        length = int(lowered.split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
        await reader.readexactly(length)
        done_at = time.perf_counter()
        return done_at - started, done_at - started
    buffer = b""
    verdict_at = None
    while not buffer.endswith(b"\r\n0\r\n\r\n") and buffer != b"0\r\n\r\n":
        data = await reader.read(65536)
        if not data:
            raise ConnectionError("server closed the connection")
        buffer += data
        if verdict_at is None and b"event: verdict" in buffer:
            verdict_at = time.perf_counter()
    done_at = time.perf_counter()
    return (verdict_at or done_at) - started, done_at - started


async def burst(port: int, batch: list[bytes]) -> tuple[list[float], list[float]]:
    async def one(request: bytes) -> tuple[float, float]:
        started = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        connected = time.perf_counter() - started
        verdict, done = await ask(reader, writer, request)
        writer.close()
        return verdict + connected, done + connected

    results = await asyncio.gather(*(one(r) for r in batch))
    return [v * 1000 for v, _ in results], [d * 1000 for _, d in results]


async def capacity(port: int, pool: list[bytes], clients: int, seconds: float) -> list[float]:
    verdicts: list[float] = []
    stop_at = time.perf_counter() + seconds

    async def client(i: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        k = i
        while time.perf_counter() < stop_at:
            verdict, _ = await ask(reader, writer, pool[k % len(pool)])
            verdicts.append(verdict * 1000)
            k += clients
        writer.close()

    await asyncio.gather(*(client(i) for i in range(clients)))
    return verdicts


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and every process below it."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    pending = [pid]
    while pending:
        p = pending.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            children = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except (OSError, IndexError):
            continue
        pending += [int(c) for c in children]
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="var/demo.db")
    parser.add_argument("--burst", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--serve-args", default="", help="extra `worthit serve` arguments")
    parser.add_argument("--code", default=None, help="serve from this checkout's src")
    parser.add_argument("--label", default="")
    parser.add_argument(
        "--idle-s", type=float, default=0.0,
        help="seconds without questions between the warm-up and the bursts (a sale's first "
        "burst after a quiet spell: the fact sheets of 30 s TTL have expired)",
    )  # fmt: skip
    args = parser.parse_args()
    source = Path(args.db)
    if not source.exists():
        sys.exit(f"no market at {source}: run `worthit simulate --db {source}` first")
    db = fresh_copy(source, "worthit-peak-")
    scratch = db.parent
    port = free_port()
    env = {**os.environ, "NO_COLOR": "1"}
    if args.code:
        env["PYTHONPATH"] = str(Path(args.code) / "src")
    server = subprocess.Popen(
        [sys.executable, "-m", "worthit", "serve", "--demo", "--db", str(db), "--port",
         str(port), *TEMPLATE_ONLY, *args.serve_args.split()],
        stderr=subprocess.DEVNULL, env=env, cwd=scratch,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base + "/readyz", server, within_s=120)
        serve_args = args.serve_args.split()
        if "--workers" in serve_args:
            wait_workers(base + "/readyz", int(serve_args[serve_args.index("--workers") + 1]))
        pool = requests(db, port, 4000, seed=1)
        uvloop.run(capacity(port, pool, 8, WARM_S))  # every worker's sheets, verdicts, runs
        time.sleep(args.idle_s)
        verdicts: list[float] = []
        dones: list[float] = []
        burst_cpu = cpu_seconds(server.pid)
        for r in range(args.rounds):
            batch = pool[r * args.burst : (r + 1) * args.burst]
            v, d = uvloop.run(burst(port, batch))
            verdicts += v
            dones += d
        cpu_before = cpu_seconds(server.pid)
        burst_cpu = cpu_before - burst_cpu
        started = time.perf_counter()
        answered = uvloop.run(capacity(port, pool, args.clients, args.seconds))
        elapsed = time.perf_counter() - started
        cpu = cpu_seconds(server.pid) - cpu_before
        print(
            json.dumps(
                {
                    "label": args.label or args.serve_args or "default",
                    "burst": args.burst,
                    "burst_verdict_p50_ms": pct(verdicts, 50),
                    "burst_verdict_p99_ms": pct(verdicts, 99),
                    "burst_done_p99_ms": pct(dones, 99),
                    "burst_server_cpu_ms_per_answer": round(burst_cpu / len(verdicts) * 1000, 3),
                    "clients": args.clients,
                    "answers_per_s": round(len(answered) / elapsed, 1),
                    "verdict_p99_ms": pct(answered, 99),
                    "server_cpu_ms_per_answer": round(cpu / max(1, len(answered)) * 1000, 3),
                }
            ),
            flush=True,
        )
    finally:
        stop_server(server)
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
