"""The market store on SQLite and on PostgreSQL, side by side, on this machine.

For each database, a new empty market:

- simulate: the simulator's records written through `MarketStore.apply_one`, a
  transaction per `BATCH_PRODUCTS` products (records/s);
- events: `--events` feed events (prices, stock, sales, reviews, each a new id) through
  the one apply path, `--batch` per transaction (events/s);
- facts: a fact sheet built from the store for every product, over and over for
  `--facts-s` seconds, no cache in front (sheets/s).

    .venv/bin/python bench/store.py --postgres postgresql://postgres@127.0.0.1/test

The PostgreSQL run works in a schema of its own, dropped after.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any

from worthit.demo.simulator import simulate
from worthit.facts.builder import FactsBuilder
from worthit.market.apply import Outcome, apply_events
from worthit.market.store import MarketStore
from worthit.text.time import date_to_ms

sys.path.insert(0, str(Path(__file__).parent))
from ingest import batches, parse_ok, raw_events

END = date(2026, 9, 20)


@contextmanager
def sqlite_market() -> Iterator[str]:
    with tempfile.TemporaryDirectory() as tmp:
        yield str(Path(tmp) / "bench.db")


@contextmanager
def postgres_market(url: str) -> Iterator[str]:
    import psycopg

    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


def measure(target: str, args: argparse.Namespace) -> dict[str, Any]:
    store = MarketStore(target)
    started = time.perf_counter()
    summary = simulate(store, skus=args.skus, days=args.days, seed=args.seed, end=END)
    simulate_s = time.perf_counter() - started
    records = summary.products + summary.prices + summary.stock + summary.sales
    records += summary.reviews + summary.promotions

    skus = [hit.sku for hit in store.all_names()]
    events = [
        parse_ok(raw | {"sku": skus[int(str(raw["sku"])[1:])]})  # onto the simulated products
        for raw in raw_events("apply", args.events, len(skus), args.seed)
    ]
    started = time.perf_counter()
    applied = 0
    for batch in batches(events, args.batch):
        report = apply_events(store, batch)
        applied += report.count(Outcome.APPLIED)
    events_s = time.perf_counter() - started

    builder = FactsBuilder(store, lambda: date_to_ms(END) + 86_399_000)
    sheets = 0
    started = time.perf_counter()
    while time.perf_counter() - started < args.facts_s:
        for sku in skus:
            builder.build(sku)
            sheets += 1
    facts_s = time.perf_counter() - started
    store.close()
    return {
        "simulate_records": records,
        "simulate_records_per_s": round(records / simulate_s),
        "events": len(events),
        "events_applied": applied,
        "events_per_s": round(len(events) / events_s),
        "facts_sheets": sheets,
        "facts_per_s": round(sheets / facts_s),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1/test",
                        help="a PostgreSQL database to make a schema in")  # fmt: skip
    parser.add_argument("--skus", type=int, default=100)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=500, help="events per transaction")
    parser.add_argument("--facts-s", type=float, default=5.0, help="seconds of fact sheets")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()

    results: dict[str, dict[str, Any]] = {}
    with sqlite_market() as target:
        results["sqlite"] = measure(target, args)
    with postgres_market(args.postgres) as target:
        results["postgresql"] = measure(target, args)
    if args.json:
        print(json.dumps({"args": vars(args), "results": results}))
        return
    print(f"{args.skus} products x {args.days} days; {args.events} events in batches of "
          f"{args.batch}; fact sheets for {args.facts_s:g} s")  # fmt: skip
    print(f"{'':28}{'SQLite':>12}{'PostgreSQL':>14}")
    for label, key in (
        ("simulate, records/s", "simulate_records_per_s"),
        ("events applied/s", "events_per_s"),
        ("fact sheets built/s", "facts_per_s"),
    ):
        print(f"{label:28}{results['sqlite'][key]:>12,}{results['postgresql'][key]:>14,}")


if __name__ == "__main__":
    main()
