"""The service over HTTP: for each answer, where its explanation came from (the model's
text from the store, written live, or the template), and the time to the `verdict`
event, to the first explanation text and to `done`, at several numbers of concurrent
shoppers on loopback, English and Chinese reported apart.

Starts `worthit serve --demo` in a child process on a free port (the real server, the
bundled model, its background generator writing explanations behind the traffic), then
runs closed-loop shoppers: each asks a question about a product drawn by popularity
(Zipf over last week's sales rank), in Chinese one time in four, reads the SSE stream to
the end, thinks, and asks again.

    .venv/bin/python bench/service.py --db var/demo.db --levels 50 --think-ms 1000
    .venv/bin/python bench/service.py --db var/demo.db --fresh-store --fill-s 300 --levels 50

Template text only (the decision path's capacity: no model text, no engine work), an empty
store, no background generator, no live feed, each question's deadline under the
engine's finishing margin:

    .venv/bin/python bench/service.py --db var/demo.db --fresh-store --deadline-ms 100 \
        --think-ms 0 --serve-args "--no-background --live-rate 0"
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from worthit.facts.builder import FactsBuilder
from worthit.facts.rankings import Rankings
from worthit.market.store import MarketStore

QUESTIONS = {
    "en": ["Is the {name} worth buying?", "Should I wait for a sale on the {name}?"],
    "zh": ["{name}值不值得买？", "{name}现在买还是等等？"],
}
EXPLAINED_BY_MODEL = ("stored", "live")


@dataclass(frozen=True)
class Product:
    title: str
    zh_name: str


@dataclass
class Answer:
    language: str
    source: str
    """"stored" or "live" (the model's text) or "template:<why>", or "error:<what>"."""
    verdict_ms: float | None = None
    decided_ms: float | None = None
    """The server's own time from the question to its verdict (`timings_ms.to_verdict`):
    what `verdict_ms` spends beyond it waited in a queue, the server's or the shopper's."""
    first_text_ms: float | None = None
    done_ms: float | None = None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def fresh_copy(db: Path, prefix: str) -> Path:
    """A copy of the market at `db` in a new scratch folder, its explanation store empty."""
    scratch = Path(tempfile.mkdtemp(prefix=prefix))
    shutil.copy(db, scratch / "market.db")
    with sqlite3.connect(scratch / "market.db") as conn:
        if conn.execute("SELECT name FROM sqlite_master WHERE name = 'explanations'").fetchone():
            conn.execute("DELETE FROM explanations")
    return scratch / "market.db"


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """SIGINT, as Ctrl-C would (the server drains and closes its stores), then a kill
    after a minute."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()


def wait_ready(url: str, process: subprocess.Popen[bytes], within_s: float = 120) -> None:
    """Until `url` answers 200; exits the benchmark when the server dies or never does."""
    give_up = time.monotonic() + within_s
    while time.monotonic() < give_up:
        if process.poll() is not None:
            sys.exit(f"{url}: the server exited ({process.returncode})")
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.1)
    sys.exit(f"{url}: no answer within {within_s:.0f} s")


def wait_workers(url: str, workers: int, within_s: float = 120) -> None:
    """Until `/readyz` at `url` has answered from `workers` distinct workers (fresh
    connections, which the port spreads over the workers listening): a worker still
    starting does not listen yet, and a warm-up sent before it does misses it."""
    seen: set[int] = set()
    give_up = time.monotonic() + within_s
    while len(seen) < workers:
        if time.monotonic() > give_up:
            sys.exit(f"{url}: {len(seen)} of {workers} workers ready within {within_s:.0f} s")
        try:
            body = httpx.get(url, timeout=2, headers={"connection": "close"}).json()
            seen.add(int(body["worker"]["index"]))
        except (httpx.HTTPError, KeyError, ValueError):
            pass
        time.sleep(0.02)


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))], 1)


async def one(
    client: httpx.AsyncClient, question: str, language: str, deadline_ms: int | None = None
) -> Answer:
    sent = time.perf_counter()
    answer = Answer(language, "error:no_done")
    body: dict[str, object] = {"question": question}
    if deadline_ms is not None:
        body["deadline_ms"] = deadline_ms
    async with client.stream(
        "POST", "/v1/decide", json=body,
        headers={"Accept": "text/event-stream"},
    ) as response:  # fmt: skip
        if response.status_code != 200:
            answer.source = f"error:http_{response.status_code}"
            return answer
        if response.headers.get("content-type", "").startswith("application/json"):
            body = json.loads(await response.aread())  # no verdict to stream: candidates
            answer.source = str(body.get("status", "error:json"))
            answer.done_ms = answer.verdict_ms = (time.perf_counter() - sent) * 1000
            return answer
        event = None
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: "):
                now = (time.perf_counter() - sent) * 1000
                if event == "verdict":
                    answer.verdict_ms = now
                    answer.decided_ms = json.loads(line[6:])["timings_ms"].get("to_verdict")
                elif event == "token" and answer.first_text_ms is None:
                    answer.first_text_ms = now
                elif event == "done":
                    answer.done_ms = now
                    done = json.loads(line[6:])
                    if done.get("explanation_source") == "llm":
                        answer.source = "stored" if done.get("cached") else "live"
                    else:
                        answer.source = f"template:{done.get('fallback_reason', '?')}"
                elif event == "error":
                    answer.source = "error:sse"
    return answer


def summary(answers: list[Answer]) -> dict[str, object]:
    done = [a for a in answers if a.done_ms is not None and a.source != "ambiguous"]
    explained = [a for a in done if a.source in EXPLAINED_BY_MODEL]
    return {
        "answers": len(answers),
        "errors": dict(
            collections.Counter(a.source[6:] for a in answers if a.source.startswith("error:"))
        ),
        "ambiguous": sum(a.source == "ambiguous" for a in answers),
        "explained_by_model": round(len(explained) / len(done), 3) if done else None,
        "stored": sum(a.source == "stored" for a in done),
        "live": sum(a.source == "live" for a in done),
        "template": dict(
            collections.Counter(a.source[9:] for a in done if a.source.startswith("template:"))
        ),
        **{
            f"verdict_p{p}": pct([a.verdict_ms for a in done if a.verdict_ms], p)
            for p in (50, 95, 99)
        },
        **{
            f"decided_p{p}": pct([a.decided_ms for a in done if a.decided_ms is not None], p)
            for p in (50, 99)
        },
        **{
            f"first_text_p{p}": pct([a.first_text_ms for a in done if a.first_text_ms], p)
            for p in (50, 95)
        },
        **{f"done_p{p}": pct([a.done_ms for a in done if a.done_ms], p) for p in (50, 95, 99)},
        "done_le_800ms": round(sum(a.done_ms <= 800 for a in done if a.done_ms) / len(done), 3)
        if done
        else None,
    }


async def level(
    base: str, products: list[Product], clients: int, seconds: float, seed: int, think_s: float,
    zh_share: float, deadline_ms: int | None = None,
) -> dict[str, object]:  # fmt: skip
    rng = random.Random(seed)
    weights = [1.0 / (rank + 1) for rank in range(len(products))]
    answers: list[Answer] = []
    stop_at = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=clients + 5, max_keepalive_connections=clients + 5)

    async with httpx.AsyncClient(base_url=base, timeout=60, limits=limits) as client:

        async def shopper() -> None:
            if think_s:  # shoppers arrive spread out, not all in the same millisecond
                await asyncio.sleep(rng.uniform(0, think_s))
            while time.perf_counter() < stop_at:
                product = rng.choices(products, weights)[0]
                language = "zh" if rng.random() < zh_share else "en"
                name = product.zh_name if language == "zh" else product.title
                question = rng.choice(QUESTIONS[language]).format(name=name)
                try:
                    answers.append(await one(client, question, language, deadline_ms))
                except httpx.HTTPError as exc:
                    answers.append(Answer(language, f"error:{type(exc).__name__}"))
                if think_s:
                    await asyncio.sleep(rng.expovariate(1 / think_s))

        started = time.perf_counter()
        await asyncio.gather(*(shopper() for _ in range(clients)))
        elapsed = time.perf_counter() - started
    return {
        "clients": clients,
        "answers_per_s": round(len(answers) / elapsed, 2),
        "all": summary(answers),
        **{lang: summary([a for a in answers if a.language == lang]) for lang in ("en", "zh")},
    }


def by_popularity(db: Path) -> list[Product]:
    """Every product, best sellers of last week first (the Zipf rank follows sales)."""
    store = MarketStore(db)
    names = {hit.sku: hit for hit in store.all_names()}
    ranked = [i.sku for i in Rankings(FactsBuilder(store)).top(None, "sales", 7, len(names))]
    order = ranked + [sku for sku in names if sku not in set(ranked)]
    store.close()
    return [
        Product(
            names[s].title, names[s].aliases[1] if len(names[s].aliases) > 1 else names[s].title
        )
        for s in order
    ]


def store_state(base: str) -> object:
    return httpx.get(base + "/readyz", timeout=10).json().get("explanations")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default="var/demo.db")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--levels", default="1,10,50")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--think-ms",
        type=float,
        default=1000.0,
        help="mean think time between a shopper's questions (exponential)",
    )
    parser.add_argument(
        "--zh-share", type=float, default=0.25, help="share of questions asked in Chinese"
    )
    parser.add_argument(
        "--fresh-store",
        action="store_true",
        help="serve a copy of the market with an empty explanation store",
    )
    parser.add_argument(
        "--fill-s",
        type=float,
        default=0.0,
        help="let the server fill its store this long before measuring",
    )
    parser.add_argument("--serve-args", default="", help="extra `worthit serve` arguments")
    parser.add_argument(
        "--deadline-ms",
        type=int,
        default=None,
        help="deadline_ms sent with each question (100: template text on a store miss)",
    )
    args = parser.parse_args()  # fmt: skip
    db = Path(args.db)
    if not db.exists():
        sys.exit(f"no market at {db}: run `worthit simulate --db {db}` first")
    products = by_popularity(db)
    scratch = None
    if args.fresh_store:
        db = fresh_copy(db, "worthit-bench-")
        scratch = db.parent
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "worthit", "serve", "--demo", "--db", str(db), "--port",
         str(port), "--threads", str(args.threads), *args.serve_args.split()],
        stderr=subprocess.DEVNULL, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        wait_ready(base + "/readyz", server)
        time.sleep(args.fill_s)
        print(
            json.dumps({"store_at_start": httpx.get(base + "/readyz").json().get("explanations")})
        )
        think_s = args.think_ms / 1000
        for i, clients in enumerate(int(x) for x in args.levels.split(",")):
            shoppers = level(
                base, products, clients, args.seconds, i + 1, think_s, args.zh_share,
                args.deadline_ms,
            )  # fmt: skip
            result = asyncio.run(shoppers)
            print(json.dumps(result, ensure_ascii=False), flush=True)
        print(json.dumps({"store_at_end": store_state(base)}))
    finally:
        stop_server(server)
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
