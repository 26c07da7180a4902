"""Events into the embedded SQLite store, sustained (design target ≥ 20,000 events/s).

Four runs over the same catalogue, each of `--events` events in the mix a retailer's feed
sends (prices, stock levels, sales counts, reviews), every one with a new id so that it
writes:

- apply: validated events straight into the one apply path, `--batch` per transaction;
- json + apply: the same from JSON text, validated first, as a stream consumer does;
- bus: published into the embedded bus, its consumer batching and applying them (time
  from the first publish until the last commit);
- redelivery: the bus run's events sent again: every one a duplicate, nothing written.

    .venv/bin/python bench/ingest.py --events 200000 --batch 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from worthit.market.apply import Outcome, apply_events
from worthit.market.bus import EventBus
from worthit.market.events import Event, EventError, parse_event, parse_json_event
from worthit.market.store import MarketStore
from worthit.text.time import iso

START_MS = 1_790_000_000_000


def catalogue(skus: int) -> list[Event]:
    return [
        parse_ok(
            {
                "type": "product",
                "event_id": f"p{n}",
                "source": "bench",
                "sku": f"B{n}",
                "title": f"Bench product {n}",
                "category": "headphones",
            }
        )
        for n in range(skus)
    ]


def raw_events(run: str, n: int, skus: int, seed: int) -> Iterator[dict[str, object]]:
    """`n` feed events for run `run`: ids and times unique to it, so every one writes."""
    rng = random.Random(f"{seed}:{run}")
    offset = {"apply": 0, "json": 1, "bus": 2}[run] * n
    for i in range(n):
        sku = f"B{rng.randrange(skus)}"
        ts = iso(START_MS + (offset + i) * 1000)
        base: dict[str, object] = {"event_id": f"{run}-{i}", "source": "bench", "sku": sku}
        roll = rng.random()
        if roll < 0.4:
            price = round(rng.uniform(20, 500), 2)
            yield base | {"type": "price", "ts": ts, "price": price, "list_price": price * 1.2}
        elif roll < 0.75:
            yield base | {"type": "stock", "ts": ts, "quantity": rng.randrange(200)}
        elif roll < 0.9:
            day = iso(START_MS + (offset + i) * 86_400_000)[:10]
            yield base | {"type": "sales", "date": day, "units": rng.randrange(50)}
        else:
            yield base | {
                "type": "review",
                "review_id": f"{run}-r{i}",
                "ts": ts,
                "rating": rng.randint(1, 5),
                "text": "Works as described, the battery life stands out.",
                "verified": rng.random() < 0.9,
            }


def parse_ok(data: dict[str, object]) -> Event:
    event = parse_event(data)
    assert not isinstance(event, EventError), event
    return event


def batches(events: list[Event], size: int) -> Iterator[list[Event]]:
    for begin in range(0, len(events), size):
        yield events[begin : begin + size]


def run_apply(store: MarketStore, events: list[Event], size: int) -> tuple[float, int]:
    started = time.perf_counter()
    written = 0
    for batch in batches(events, size):
        report = apply_events(store, batch)
        written += report.count(Outcome.APPLIED)
    return time.perf_counter() - started, written


def run_json(store: MarketStore, lines: list[str], size: int) -> tuple[float, int]:
    started = time.perf_counter()
    written = 0
    for begin in range(0, len(lines), size):
        parsed = [parse_json_event(line) for line in lines[begin : begin + size]]
        report = apply_events(store, [e for e in parsed if not isinstance(e, EventError)])
        written += report.count(Outcome.APPLIED)
    return time.perf_counter() - started, written


async def run_bus(store: MarketStore, events: list[Event], size: int) -> tuple[float, int, int]:
    bus = EventBus(store, batch_size=size)
    bus.start()
    started = time.perf_counter()
    for event in events:
        await bus.publish(event)
    await bus.join()
    elapsed = time.perf_counter() - started
    await bus.stop()
    return elapsed, bus.stats.applied, bus.stats.duplicates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=200_000, help="events per run")
    parser.add_argument("--skus", type=int, default=2000, help="products in the catalogue")
    parser.add_argument("--batch", type=int, default=1000, help="events per transaction")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--db", type=Path, help="store to write (default: a temporary file)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        store = MarketStore(args.db or Path(tmp) / "ingest.db")
        apply_events(store, catalogue(args.skus))
        figures: dict[str, dict[str, float]] = {}

        events = [parse_ok(d) for d in raw_events("apply", args.events, args.skus, args.seed)]
        elapsed, written = run_apply(store, events, args.batch)
        figures["apply"] = {"events": written, "seconds": elapsed}

        lines = [json.dumps(d) for d in raw_events("json", args.events, args.skus, args.seed)]
        elapsed, written = run_json(store, lines, args.batch)
        figures["json + apply"] = {"events": written, "seconds": elapsed}

        events = [parse_ok(d) for d in raw_events("bus", args.events, args.skus, args.seed)]
        elapsed, written, _ = asyncio.run(run_bus(store, events, args.batch))
        figures["bus"] = {"events": written, "seconds": elapsed}

        elapsed, written, duplicates = asyncio.run(run_bus(store, events, args.batch))
        assert written == 0, "a redelivered event was applied again"
        figures["redelivery"] = {"events": duplicates, "seconds": elapsed}
        applied_ids = store.applied_event_count()
        store.close()

    for figure in figures.values():
        figure["per_second"] = round(figure["events"] / figure["seconds"])
        figure["seconds"] = round(figure["seconds"], 3)
    if args.json:
        print(json.dumps({"args": vars(args) | {"db": str(args.db)}, "runs": figures}))
        return
    print(f"{args.events} events per run, {args.skus} products, {args.batch} per transaction")
    for name, figure in figures.items():
        print(f"  {name:<13} {figure['per_second']:>9,} events/s  ({figure['seconds']} s)")
    print(f"  applied ids in the store: {applied_ids:,}")
    if figures["bus"]["per_second"] < 20_000:
        print("below the 20,000 events/s target", file=sys.stderr)


if __name__ == "__main__":
    main()
