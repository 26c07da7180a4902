"""Open-loop benchmark of the serving engine against its anchors, same GGUF, same box.

Targets, each started here as a subprocess on a free loopback port and driven through
the same OpenAI-compatible streaming protocol:

* ``worthit``      ``worthit engine serve`` (this repository's engine), each request
  with ``deadline_ms`` (``--deadline-ms``, 800): admission control and deadline stops on
* ``worthit-nodl`` the same server, requests without a deadline
* ``worthit-before`` ``worthit`` from another checkout's ``src`` (``--before PATH``, put on
  PYTHONPATH): a change's before and after side by side in one run
* ``llama-server`` llama.cpp's own server (continuous batching, parallel slots, prompt
  cache), built from the llama.cpp vendored in the llama-cpp-python sdist:

      tar xzf llama_cpp_python-0.3.36.tar.gz -C /tmp
      cmake -S /tmp/llama_cpp_python-0.3.36/vendor/llama.cpp -B /tmp/llama-build \\
            -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF
      cmake --build /tmp/llama-build --target llama-server -j2

* ``llama_cpp``    ``python -m llama_cpp.server`` (needs the [server] extras; put them
  on PYTHONPATH with ``--anchor-pythonpath``)

The targets are started together and take turns, rate by rate (each target's first rate
is still the first traffic it sees after start): a target runs while the others are
stopped (SIGSTOP), so none of them uses a core during another's run, and a slow spell
of the machine, which on a shared 2-core host can last minutes and slow every step by
half, falls on neighbouring runs of every target rather than on one target's whole
sweep.

Workload: Poisson arrivals at each rate (open loop: latency counts from the scheduled
send time, not from when a client got round to sending), shopping questions about
Zipf-distributed products, so product-fact system prompts repeat as in real traffic;
48 output tokens, greedy. Goodput counts requests that completed (finish_reason stop or
length; a deadline cut does not count) with TTFT <= 400 ms and end-to-end <= 800 ms.

    .venv/bin/python bench/engine.py --rates 0.5,1,2,4 --duration 30 \\
        --targets worthit,llama_cpp,llama-server --llama-server /tmp/llama-build/bin/llama-server
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import random
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from worthit.engine.model_files import resolve_model_path

QUESTIONS = [
    "Is it worth buying?",
    "Should I wait for a sale?",
    "Is the price good right now?",
    "值不值得买?",
    "How does it compare with similar products?",
    "What do reviewers complain about?",
    "Is it a good gift?",
    "Give me one reason to buy it and one not to.",
]
CATEGORIES = ["headphones", "kettle", "backpack", "monitor", "blender", "running shoes"]


def product_prompt(i: int) -> str:
    rnd = random.Random(i)
    price = rnd.randint(20, 400)
    low = int(price * rnd.uniform(0.8, 1.0))
    return (
        "You explain a shopping verdict in two short sentences, using only these facts.\n"
        f"Product: {CATEGORIES[i % len(CATEGORIES)]} model P{i:03d}. Price {price} USD; "
        f"lowest in 90 days {low} USD; 30-day average {int(price * 1.05)} USD. "
        f"Rating {rnd.uniform(3.2, 4.9):.1f} of 5 from {rnd.randint(40, 5000)} reviews. "
        f"Stock: {rnd.choice(['in stock', 'low stock'])}. "
        f"Verdict: {rnd.choice(['good deal', 'fair price', 'wait for a sale'])}."
    )


def zipf_sampler(n: int, s: float, rnd: random.Random) -> list[float]:
    weights = [1.0 / (k**s) for k in range(1, n + 1)]
    total = sum(weights)
    return [w / total for w in weights]


@dataclass
class Result:
    scheduled: float
    ttft: float | None
    e2e: float | None
    tokens: int
    finish: str | None
    status: int
    refusal: str | None = None
    """A 503's error message: why the server refused (worthit says what it priced)."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_target(
    name: str, args: argparse.Namespace, model: Path, port: int
) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    if name in ("worthit", "worthit-nodl", "worthit-before"):
        cmd = [sys.executable, "-m", "worthit", "engine", "serve", "--host", "127.0.0.1",
               "--port", str(port), "--model", str(model), "--lora", "none",
               "--threads", str(args.threads)]  # fmt: skip
        if name == "worthit-before":
            if not args.before:
                raise SystemExit("--before PATH is needed for the worthit-before target")
            env["PYTHONPATH"] = args.before
        if args.default_deadline_ms:
            cmd += ["--default-deadline-ms", str(args.default_deadline_ms)]
        extra = (
            args.before_args
            if name == "worthit-before" and args.before_args is not None
            else args.worthit_args
        )
        cmd += ["--tpot-target-ms", str(args.tpot_target_ms), *extra.split()]
    elif name == "llama_cpp":
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host",
               "127.0.0.1", "--port", str(port), "--n_threads", str(args.threads),
               "--n_threads_batch", str(args.threads), "--n_ctx", "4096"]  # fmt: skip
        if args.anchor_pythonpath:
            env["PYTHONPATH"] = args.anchor_pythonpath
    elif name == "llama-server":
        if not args.llama_server:
            raise SystemExit("--llama-server PATH is needed for the llama-server target")
        cmd = [args.llama_server, "--model", str(model), "--host", "127.0.0.1", "--port",
               str(port), "-t", str(args.threads), "-tb", str(args.threads), "-c", "4096",
               "-np", str(args.slots)]  # fmt: skip
    else:
        raise SystemExit(f"unknown target {name}")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise SystemExit(f"{name} exited with {proc.returncode}")
        time.sleep(0.25)
    proc.kill()
    raise SystemExit(f"{name} did not come up")


async def one_request(
    client: httpx.AsyncClient, body: dict[str, object], scheduled: float
) -> Result:
    await asyncio.sleep(max(0.0, scheduled - time.monotonic()))
    ttft = None
    tokens = 0
    finish = None
    try:
        async with client.stream("POST", "/v1/chat/completions", json=body) as response:
            if response.status_code != 200:
                raw = await response.aread()
                try:
                    why = str(json.loads(raw)["error"]["message"])
                except (ValueError, KeyError, TypeError):
                    why = raw.decode(errors="replace")[:200]
                return Result(scheduled, None, None, 0, None, response.status_code, why)
            async for line in response.aiter_lines():
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[6:])
                for choice in chunk.get("choices") or []:
                    if choice.get("delta", {}).get("content"):
                        tokens += 1
                        if ttft is None:
                            ttft = time.monotonic() - scheduled
                    finish = choice.get("finish_reason") or finish
    except httpx.HTTPError as exc:
        return Result(scheduled, ttft, None, tokens, f"transport:{type(exc).__name__}", 0)
    return Result(scheduled, ttft, time.monotonic() - scheduled, tokens, finish, 200)


def metrics_text(port: int) -> str:
    return httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text


def step_model_ms(port: int, target: str) -> dict[str, float] | None:
    """A worthit target's step-time model as its /metrics shows it (ms): what its
    admission priced the run's requests with."""
    if not target.startswith("worthit"):
        return None
    text = metrics_text(port)
    terms = re.findall(r'^worthit_engine_step_model_seconds\{term="(\w+)"\} (\S+)$', text, re.M)
    return {term: round(float(value) * 1000, 2) for term, value in terms} or None


def prefix_cache(port: int, target: str) -> dict[str, float] | None:
    """A worthit target's prefix-cache counters from /metrics, running totals: prompt
    tokens looked up and found (either tier), prefixes restored from host RAM."""
    if not target.startswith("worthit"):
        return None
    text = metrics_text(port)
    names = {
        "queried_tokens": "worthit_engine_prefix_cache_queried_tokens_total",
        "hit_tokens": "worthit_engine_prefix_cache_hit_tokens_total",
        "host_restores": "worthit_engine_host_cache_restores_total",
    }
    found = {
        key: float(m.group(1))
        for key, name in names.items()
        for m in [re.search(rf"^{name} (\S+)$", text, re.M)]
        if m
    }
    return found or None


def served_model(port: int, target: str) -> str:
    """The id to send: worthit answers an id its /v1/models does not list with a 404, as
    OpenAI does; the llama.cpp servers serve their one model whatever the id says."""
    if not target.startswith("worthit"):
        return "m"
    listed = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=10).json()
    return str(listed["data"][0]["id"])


async def run_rate(port: int, rate: float, args: argparse.Namespace, target: str) -> list[Result]:
    rnd = random.Random(args.seed)
    model = served_model(port, target)
    probs = zipf_sampler(args.products, args.zipf, rnd)
    start = time.monotonic() + 0.5
    t = 0.0
    jobs = []
    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=1000)
    async with httpx.AsyncClient(
        base_url=f"http://127.0.0.1:{port}", timeout=60, limits=limits
    ) as client:
        while True:
            t += rnd.expovariate(rate)
            if t > args.duration:
                break
            product = rnd.choices(range(args.products), probs)[0]
            body: dict[str, object] = {
                "model": model,
                "messages": [
                    {"role": "system", "content": product_prompt(product)},
                    {"role": "user", "content": rnd.choice(QUESTIONS)},
                ],
                "max_tokens": args.max_tokens,
                "temperature": 0,
                "stream": True,
            }
            if target in ("worthit", "worthit-before") and args.deadline_ms:
                body["deadline_ms"] = args.deadline_ms
            jobs.append(asyncio.create_task(one_request(client, body, start + t)))
        return list(await asyncio.gather(*jobs))


async def single_stream(
    ports: dict[str, int], trials: int, fill: int = 0
) -> dict[str, dict[str, object]]:
    """One request at a time on idle servers, the targets taking turns trial by trial
    (so a slow spell of the machine hits all alike): TTFT of a product prompt never
    seen (cold), of the same product with another question (warm: the facts prefix is
    cached), and the time per output token of a long answer (decode speed). `fill`:
    first ask about that many other products, one token each, so the trials run with
    a prompt cache as full as traffic leaves it rather than on a fresh server."""
    samples: dict[str, dict[str, list[float]]] = {
        t: {"cold": [], "warm": [], "tpot": []} for t in ports
    }
    clients = {
        t: httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60)
        for t, port in ports.items()
    }
    models = {t: served_model(port, t) for t, port in ports.items()}

    async def ask(target: str, product: int, question: str, max_tokens: int) -> Result:
        body = {
            "model": models[target],
            "messages": [
                {"role": "system", "content": product_prompt(product)},
                {"role": "user", "content": question},
            ],
            "max_tokens": max_tokens,
            "temperature": 0,
            "stream": True,
        }
        return await one_request(clients[target], body, time.monotonic())

    try:
        for product in range(20_000, 20_000 + fill):
            for target in ports:
                await ask(target, product, QUESTIONS[0], 1)
        for trial in range(trials):
            product = 10_000 + trial  # never part of the Poisson phase
            for target in ports:
                first = await ask(target, product, QUESTIONS[0], 4)
                second = await ask(target, product, QUESTIONS[1], 4)
                long = await ask(target, product, "Write a long, detailed review of it.", 128)
                got = samples[target]
                if first.ttft is not None and second.ttft is not None:
                    got["cold"].append(first.ttft)
                    got["warm"].append(second.ttft)
                if long.ttft is not None and long.e2e is not None and long.tokens > 16:
                    got["tpot"].append((long.e2e - long.ttft) / (long.tokens - 1))
    finally:
        for client in clients.values():
            await client.aclose()
    ms = lambda v: round(statistics.median(v) * 1000, 1) if v else None  # noqa: E731
    return {
        t: {
            "cold_ttft_ms": ms(got["cold"]),
            "warm_ttft_ms": ms(got["warm"]),
            "decode_tpot_ms": ms(got["tpot"]),
            "trials": len(got["tpot"]),
        }
        for t, got in samples.items()
    }


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]


def summarise(results: list[Result], duration: float) -> dict[str, object]:
    """Rates are per second of the span from the first scheduled send to the last
    completion (not of the arrival window): an overloaded server that drains its
    backlog long after arrivals stop does not get credit for the drain time."""
    ok = [r for r in results if r.status == 200 and r.e2e is not None]
    ends = [r.scheduled + r.e2e for r in ok if r.e2e is not None]
    first = min((r.scheduled for r in results), default=0.0)
    span = max(duration, max(ends, default=first) - first)
    ttft = [r.ttft for r in ok if r.ttft is not None]
    tpot = [(r.e2e - r.ttft) / (r.tokens - 1) for r in ok
            if r.ttft is not None and r.e2e is not None and r.tokens > 1]  # fmt: skip
    completed = [r for r in ok if r.finish in ("stop", "length")]
    good = [r for r in completed if r.ttft is not None and r.ttft <= 0.4 and r.e2e <= 0.8]  # type: ignore[operator]
    ms = lambda v: None if v is None else round(v * 1000, 1)  # noqa: E731
    outcomes: dict[str, int] = {}
    for r in results:
        key = f"{r.status}:{r.finish}"
        outcomes[key] = outcomes.get(key, 0) + 1
    priced = [float(m.group(1)) for r in results if r.refusal
              for m in [re.search(r"needs ~(\d+) ms", r.refusal)] if m]  # fmt: skip
    return {
        "outcomes": outcomes,
        "refused_priced_p50_ms": pct(priced, 0.5),
        "refused_priced_min_ms": min(priced, default=None),
        "sent": len(results),
        "refused": sum(1 for r in results if r.status == 503),
        "completed": len(completed),
        "deadline_cut": sum(1 for r in ok if r.finish in ("deadline", "expired")),
        "ttft_p50_ms": ms(pct(ttft, 0.5)),
        "ttft_p95_ms": ms(pct(ttft, 0.95)),
        "ttft_p99_ms": ms(pct(ttft, 0.99)),
        "tpot_mean_ms": ms(statistics.fmean(tpot)) if tpot else None,
        "e2e_p50_ms": ms(pct([r.e2e for r in ok if r.e2e is not None], 0.5)),
        "e2e_p95_ms": ms(pct([r.e2e for r in ok if r.e2e is not None], 0.95)),
        "span_s": round(span, 1),
        "throughput_rps": round(len(completed) / span, 3),
        "tokens_per_s": round(sum(r.tokens for r in ok) / span, 1),
        "goodput_rps": round(len(good) / span, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--model", default=None)
    parser.add_argument("--targets", default="worthit,llama_cpp")
    parser.add_argument("--rates", default="0.5,1,2")
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--products", type=int, default=50)
    parser.add_argument("--zipf", type=float, default=1.1)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--slots", type=int, default=8, help="llama-server parallel slots")
    parser.add_argument("--deadline-ms", type=float, default=800.0,
                        help="deadline_ms sent to worthit (0: none)")  # fmt: skip
    parser.add_argument("--default-deadline-ms", type=float, default=None)
    parser.add_argument("--tpot-target-ms", type=float, default=40.0,
                        help="worthit's TPOT target, held by its batch window")  # fmt: skip
    parser.add_argument("--worthit-args", default="", help="extra worthit engine serve args")
    parser.add_argument("--before-args", default=None,
                        help="worthit-before's extra args instead of --worthit-args "
                             "(a flag the code before does not know)")  # fmt: skip
    parser.add_argument("--llama-server", default=None)
    parser.add_argument("--anchor-pythonpath", default=None)
    parser.add_argument(
        "--before", default=None, help="another checkout's src folder: the worthit-before target"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", default=None, help="write all results as JSON here")
    parser.add_argument("--single-trials", type=int, default=9,
                        help="cold/warm TTFT and decode-speed trials before the sweep")  # fmt: skip
    parser.add_argument("--single-fill", type=int, default=0,
                        help="products asked about, one token each, before them")  # fmt: skip
    args = parser.parse_args()
    model = resolve_model_path(args.model)
    rates = [float(r) for r in args.rates.split(",")]
    report: dict[str, dict[str, object]] = {}
    targets = args.targets.split(",")
    if args.single_trials:
        ports = {t: free_port() for t in targets}
        procs = [start_target(t, args, model, ports[t]) for t in targets]
        try:
            single = asyncio.run(single_stream(ports, args.single_trials, args.single_fill))
        finally:
            for proc in procs:
                proc.terminate()
                proc.wait(timeout=30)
        for target, figures in single.items():
            report.setdefault(target, {})["single"] = figures
            print(json.dumps({"target": target, "single_stream": figures}), flush=True)
    ports = {t: free_port() for t in targets}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for target in targets:
            procs[target] = start_target(target, args, model, ports[target])
            procs[target].send_signal(signal.SIGSTOP)
        for rate in rates:
            for target in targets:
                procs[target].send_signal(signal.SIGCONT)
                time.sleep(1.0)
                try:
                    model_before = step_model_ms(ports[target], target)
                    cache_before = prefix_cache(ports[target], target)
                    results = asyncio.run(run_rate(ports[target], rate, args, target))
                    model_after = step_model_ms(ports[target], target)
                    cache_after = prefix_cache(ports[target], target)
                finally:
                    procs[target].send_signal(signal.SIGSTOP)
                summary = summarise(results, args.duration)
                if model_after is not None:
                    summary["step_model_ms"] = {"before": model_before, "after": model_after}
                if cache_after is not None:
                    summary["prefix_cache"] = {
                        key: value - (cache_before or {}).get(key, 0.0)
                        for key, value in cache_after.items()
                    }
                summary["raw"] = [vars(r) for r in results]
                report.setdefault(target, {})[str(rate)] = summary
                shown = {k: v for k, v in summary.items() if k != "raw"}
                print(json.dumps({"target": target, "rate": rate, **shown}), flush=True)
    finally:
        for proc in procs.values():
            proc.send_signal(signal.SIGCONT)
            proc.terminate()
            proc.wait(timeout=30)
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "report": report}, indent=2))
    best = {t: max(s["goodput_rps"] for k, s in r.items() if k != "single")  # type: ignore[type-var]
            for t, r in report.items()}  # fmt: skip
    print(json.dumps({"best_goodput": best}))


if __name__ == "__main__":
    main()
