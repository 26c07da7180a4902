"""The audit log: leaves appended per second, proof time at a million leaves, time on the caller.

Three measurements on one fresh log file (in --dir, a temporary folder by default):

- throughput: --leaves answer leaves appended as fast as one thread can (`block=True`, so
  the caller waits whenever the writer is a reservation behind), from the first append to
  the last leaf committed by the writer's batches (design target ≥ 50,000/s);
- proofs at that size: --proofs inclusion and consistency proofs for random indexes and
  sizes, each read from the stored subtree hashes (target ≤ 1 ms), and their verification;
- the caller's cost: appends paced at --rate per second for --seconds, as the answer path
  makes them, the writer committing behind them; P50/P99/max of `append()` itself.

    .venv/bin/python bench/audit.py --leaves 1000000 --proofs 2000 --rate 2000 --seconds 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from worthit.audit.log import AuditLog, CheckpointPolicy
from worthit.audit.merkle import leaf_hash
from worthit.audit.proofs import verify_consistency, verify_inclusion
from worthit.audit.record import AuditRecord


def answer(i: int, rng: random.Random) -> AuditRecord:
    """A leaf like the answer path's: raw question, fact sheet dict and explanation, hashed."""
    to_verdict = rng.lognormvariate(2.0, 0.5)
    return AuditRecord.for_answer(
        request_id=f"req-{i:08d}",
        question=f"Is the Aurora NC{i % 997} worth buying?",
        tenant=f"tenant-{i % 7}",
        facts={"sku": f"S{i % 997}", "price": 199.0, "low_90d": 179.0, "version": "v7"},
        facts_version="v7",
        verdict="buy",
        explanation="It is 3% above its 90-day low of 179.00; buying now is reasonable.",
        explanation_source="store",
        model="smollm2-135m-instruct-q8_0",
        timings_ms={
            "intent": 0.2,
            "resolve": 0.4,
            "facts": 0.3,
            "verdict": 0.1,
            "to_verdict": to_verdict,
            "total": to_verdict + rng.lognormvariate(5, 0.4),
        },
        sku=f"S{i % 997}",
        language="en",
        priority="medium",
        status="answered",
    )


def pct(values: list[float], p: float) -> float:
    return statistics.quantiles(values, n=1000, method="inclusive")[int(p * 10) - 1]


def throughput(log: AuditLog, n: int, rng: random.Random) -> float:
    records = [answer(i, rng) for i in range(min(n, 10_000))]
    start = time.perf_counter()
    for i in range(n):
        log.append(records[i % len(records)], block=True)
        if i % 100_000 == 99_999:
            print(f"  {i + 1:,} appended", file=sys.stderr)
    log.flush()
    return n / (time.perf_counter() - start)


def proofs(log: AuditLog, count: int, rng: random.Random) -> dict[str, list[float]]:
    size = log.size
    roots = {size: log.root(size)}
    times: dict[str, list[float]] = {"inclusion": [], "consistency": [], "verify": []}
    for _ in range(count):
        index = rng.randrange(size)
        start = time.perf_counter()
        path = log.inclusion_proof(index, size)
        times["inclusion"].append((time.perf_counter() - start) * 1000)
        leaf = log.leaf_bytes(index)
        start = time.perf_counter()
        verify_inclusion(leaf_hash(leaf), index, size, path, roots[size])
        times["verify"].append((time.perf_counter() - start) * 1000)
        first = rng.randrange(1, size)
        start = time.perf_counter()
        consistency = log.consistency_proof(first, size)
        times["consistency"].append((time.perf_counter() - start) * 1000)
        if len(times["consistency"]) <= 20:  # check a few; roots cost O(log n) reads each
            verify_consistency(first, size, log.root(first), roots[size], consistency)
    return times


def caller_cost(log: AuditLog, rate: float, seconds: float, rng: random.Random) -> list[float]:
    records = [answer(i, rng) for i in range(1000)]
    costs = []
    period = 1.0 / rate
    next_at = time.perf_counter()
    for i in range(int(rate * seconds)):
        while time.perf_counter() < next_at:
            time.sleep(max(0.0, next_at - time.perf_counter() - 0.0002))
        next_at += period
        start = time.perf_counter_ns()
        log.append(records[i % len(records)])
        costs.append((time.perf_counter_ns() - start) / 1000)
    log.flush()
    return costs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--leaves", type=int, default=1_000_000)
    parser.add_argument("--proofs", type=int, default=2_000)
    parser.add_argument("--rate", type=float, default=2_000.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    with tempfile.TemporaryDirectory(dir=args.dir) as folder:
        path = Path(folder) / "bench.audit.db"
        log = AuditLog(path, policy=CheckpointPolicy())
        try:
            rate = throughput(log, args.leaves, rng)
            print(
                f"append, batched: {args.leaves:,} leaves at {rate:,.0f} leaves/s "
                f"({len(log.checkpoints())} checkpoints signed)"
            )
            times = proofs(log, args.proofs, rng)
            for kind, values in times.items():
                print(
                    f"{kind:12s} at {log.size:,} leaves: n={len(values)}  "
                    f"P50 {pct(values, 50):.3f} ms  P99 {pct(values, 99):.3f} ms  "
                    f"max {max(values):.3f} ms"
                )
            costs = caller_cost(log, args.rate, args.seconds, rng)
            print(
                f"append() on the caller at {args.rate:,.0f}/s: n={len(costs)}  "
                f"P50 {pct(costs, 50):.1f} µs  P99 {pct(costs, 99):.1f} µs  "
                f"max {max(costs):.1f} µs"
            )
            size_mb = sum(p.stat().st_size for p in Path(folder).iterdir()) / 1e6
            print(f"files: {size_mb:,.0f} MB for {log.size:,} leaves")
        finally:
            log.close()


if __name__ == "__main__":
    main()
