"""What sharing state through Redis costs on the answer's path, per call, in process.

A fact sheet from each tier: the in-memory hit every answer after the first takes (the
revision check included), the Redis tier's GET + PTTL and decode on an in-memory miss,
and a build from the store, the cost the tier saves the other workers. And a rate-limit
admission: in process, and one EVALSHA of the Lua script, sync and asyncio.

    .venv/bin/python bench/shared_state.py --db var/demo.db --redis redis://127.0.0.1:6379/0
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import redis

from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.facts.redis_tier import RedisSheetTier, sync_client
from worthit.market.store import MarketStore
from worthit.service.ratelimit import Limits, TenantLimiter
from worthit.service.redis_limiter import RedisLimiter


def per_call_us(call: Callable[[], object], n: int) -> tuple[float, float]:
    """(median, p99) of `n` timed calls, in µs."""
    times = []
    for _ in range(n):
        start = time.perf_counter_ns()
        call()
        times.append((time.perf_counter_ns() - start) / 1000)
    times.sort()
    return statistics.median(times), times[int(0.99 * (n - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument("-n", type=int, default=2000)
    args = parser.parse_args()
    prefix = f"worthit:bench:{uuid.uuid4().hex[:8]}:"
    store = MarketStore(args.db)
    skus = [hit.sku for hit in store.all_names()][:200]
    client = sync_client(args.redis)
    builder = FactsBuilder(store)
    writer = FactsCache(builder, tier=RedisSheetTier(client, prefix))
    for sku in skus:
        writer.get(sku)
    reader = FactsCache(builder, tier=RedisSheetTier(client, prefix))
    memory = FactsCache(builder)
    for sku in skus:
        memory.get(sku)
    tier = reader.tier
    revisions = {sku: revision[0] for sku in skus if (revision := store.revision(sku))}
    turn = iter(range(10**9))

    def next_sku() -> str:
        return skus[next(turn) % len(skus)]

    def tier_load() -> object:
        sku = next_sku()
        return tier.load(sku, revisions[sku])

    rows = [
        ("sheet: in-memory hit", per_call_us(lambda: memory.get(next_sku()), args.n)),
        ("sheet: Redis tier load (GET+PTTL, decode)", per_call_us(tier_load, args.n)),
        ("sheet: build from the store", per_call_us(lambda: builder.build(next_sku()), 500)),
    ]
    limits = Limits(10**9, 10**9)
    local = TenantLimiter()
    rows.append(("limit: in process", per_call_us(lambda: local.admit("t", limits), args.n)))
    shared = RedisLimiter(args.redis, prefix=prefix)
    rows.append(("limit: Redis, sync", per_call_us(lambda: shared.admit("t", limits), args.n)))

    async def async_admits() -> tuple[float, float]:
        times = []
        for _ in range(args.n):
            start = time.perf_counter_ns()
            await shared.admit_async("t", limits)
            times.append((time.perf_counter_ns() - start) / 1000)
        times.sort()
        await shared.aclose()
        return statistics.median(times), times[int(0.99 * (args.n - 1))]

    rows.append(("limit: Redis, asyncio", asyncio.run(async_admits())))
    for name, (median, p99) in rows:
        print(f"{name:45s} median {median:8.1f} µs   p99 {p99:8.1f} µs")
    cleanup = redis.Redis.from_url(args.redis)
    keys = list(cleanup.scan_iter(match=prefix + "*"))
    if keys:
        cleanup.delete(*keys)


if __name__ == "__main__":
    main()
