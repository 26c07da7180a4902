"""The fact cache under load: one build per missed key, unknown products kept off the
store, expiries spread out and refreshed early, and never a sheet older than the store."""

from __future__ import annotations

import asyncio
import itertools
import random
import shutil
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import JITTER, REFRESH_LEAD, FactsCache, xfetch_probability
from worthit.facts.sheet import FactSheet
from worthit.market.bus import EventBus
from worthit.market.events import Event, EventError, parse_event
from worthit.market.store import MarketStore
from worthit.text.time import iso

from conftest import MARKET_NOW_MS, market_clock

_ids = itertools.count()


class CountingStore(MarketStore):
    """The real store, counting the per-read revision lookups that reach it."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.revision_reads = 0

    def revision(self, sku: str) -> tuple[int, int] | None:
        self.revision_reads += 1
        return super().revision(sku)


class CountingBuilder(FactsBuilder):
    """Counts builds; may hold each build at a gate, or advance a fake clock by its cost."""

    def __init__(
        self,
        store: MarketStore,
        gate: threading.Event | None = None,
        clock: FakeClock | None = None,
        cost_s: float = 0.0,
    ) -> None:
        super().__init__(store, market_clock())
        self.builds = 0
        self.gate = gate
        self.fake = clock
        self.cost_s = cost_s
        self._count = threading.Lock()

    def build(self, sku: str, at_ms: int | None = None) -> FactSheet | None:
        with self._count:
            self.builds += 1
        if self.gate is not None:
            assert self.gate.wait(10)
        if self.fake is not None:
            self.fake.now += self.cost_s
        return super().build(sku, at_ms)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def store(small_market: Path, tmp_path: Path) -> CountingStore:
    shutil.copy(small_market, tmp_path / "m.db")
    return CountingStore(tmp_path / "m.db")


def test_concurrent_misses_build_once(store: CountingStore) -> None:
    gate = threading.Event()
    builder = CountingBuilder(store, gate=gate)
    cache = FactsCache(builder)
    readers = 16
    results: list[FactSheet | None] = []
    lock = threading.Lock()

    def read() -> None:
        sheet = cache.get("S1")
        with lock:
            results.append(sheet)

    threads = [threading.Thread(target=read) for _ in range(readers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while cache.misses < readers and time.monotonic() < deadline:
        time.sleep(0.005)
    gate.set()
    for thread in threads:
        thread.join(10)
    assert builder.builds == 1
    assert cache.misses == readers and cache.coalesced == readers - 1
    assert len({sheet.version for sheet in results if sheet}) == 1 and None not in results


def test_unknown_skus_never_reach_the_store(store: CountingStore) -> None:
    builder = CountingBuilder(store)
    cache = FactsCache(builder)
    reads = store.revision_reads
    for _ in range(50):
        assert cache.get("NO-SUCH-SKU") is None
    assert cache.bloom_rejects == 50
    assert store.revision_reads == reads and builder.builds == 0


def test_a_sku_past_the_filter_is_remembered_as_absent(store: CountingStore) -> None:
    clock = FakeClock()
    cache = FactsCache(CountingBuilder(store), clock=clock, negative_ttl_s=5.0)
    cache.evict(["GHOST"])  # an event named it, so the filter lets it through
    reads = store.revision_reads
    for _ in range(10):
        assert cache.get("GHOST") is None
    assert store.revision_reads == reads + 1 and cache.negative_hits == 9
    clock.now += 5.0
    assert cache.get("GHOST") is None
    assert store.revision_reads == reads + 2


def test_a_new_product_event_makes_its_sku_known(store: CountingStore) -> None:
    cache = FactsCache(CountingBuilder(store))
    cache.evict(["N1"])
    assert cache.get("N1") is None  # now negatively cached
    product = {"type": "product", "event_id": "n1", "source": "test", "sku": "N1",
               "title": "Nimbus Kettle", "brand": "Nimbus", "category": "kitchen"}  # fmt: skip
    price = {"type": "price", "event_id": "n1p", "source": "test", "sku": "N1",
             "ts": iso(MARKET_NOW_MS - 1000), "price": 39.0}  # fmt: skip

    async def run() -> None:
        bus = EventBus(store)
        bus.subscribe(cache.evict)
        bus.start()
        await bus.submit([parse_ok(product), parse_ok(price)])
        await bus.stop()

    asyncio.run(run())
    sheet = cache.get("N1")
    assert sheet is not None and sheet.current_price == 39.0


def test_a_product_the_bus_did_not_see_is_found_once_the_filter_reloads(
    store: CountingStore,
) -> None:
    clock = FakeClock()
    cache = FactsCache(CountingBuilder(store), clock=clock, bloom_refresh_s=60.0)
    assert cache.get("N2") is None
    other_process = MarketStore(store.path)
    other_process.apply([parse_ok({"type": "product", "event_id": "n2", "source": "t",
                                   "sku": "N2", "title": "Nimbus Toaster",
                                   "brand": "Nimbus", "category": "kitchen"})])  # fmt: skip
    assert cache.get("N2") is None
    clock.now += 60.0
    assert cache.get("N2") is not None


def test_ttl_jitter_stays_within_ten_percent_and_spreads(store: CountingStore) -> None:
    skus = [hit.sku for hit in store.all_names()]
    max_age = 30.0

    def warmed() -> tuple[FactsCache, FakeClock]:
        clock = FakeClock()
        cache = FactsCache(CountingBuilder(store), max_age, rng=random.Random(3), clock=clock)
        for sku in skus:
            cache.get(sku)
        return cache, clock

    cache, clock = warmed()
    clock.now += max_age * (1 - JITTER) - 0.01
    for sku in skus:
        cache.get(sku)
    assert cache.hits == len(skus) and cache.early_refreshes == 0

    cache, clock = warmed()
    clock.now += max_age
    for sku in skus:
        cache.get(sku)
    assert 0 < cache.hits < len(skus)

    cache, clock = warmed()
    clock.now += max_age * (1 + JITTER) + 0.01
    for sku in skus:
        cache.get(sku)
    assert cache.hits == 0 and cache.misses == 2 * len(skus)


@given(
    remaining=st.floats(0.0, 100.0),
    more=st.floats(0.001, 100.0),
    delta=st.floats(0.001, 10.0),
    longer=st.floats(0.001, 10.0),
)
def test_xfetch_probability_rises_as_expiry_nears(
    remaining: float, more: float, delta: float, longer: float
) -> None:
    p = xfetch_probability(remaining, delta)
    assert 0.0 <= p <= 1.0
    assert xfetch_probability(remaining + more, delta) <= p
    assert xfetch_probability(remaining, delta + longer) >= p
    assert xfetch_probability(0.0, delta) == 1.0


def test_a_hot_key_is_refreshed_before_it_expires(store: CountingStore) -> None:
    clock = FakeClock()
    builder = CountingBuilder(store, clock=clock, cost_s=2.0)
    cache = FactsCache(builder, 30.0, rng=random.Random(11), clock=clock)
    first = clock.now
    cache.get("S1")
    while cache.early_refreshes == 0 and clock.now < first + 40:
        clock.now += 0.1
        assert cache.get("S1") is not None
    assert cache.early_refreshes == 1 and cache.misses == 1 and builder.builds == 2
    assert clock.now - 2.0 < first + 30 * (1 + JITTER)


def test_refresh_rebuilds_the_sheets_about_to_expire_read_ones_first(
    store: CountingStore,
) -> None:
    clock = FakeClock()
    builder = CountingBuilder(store)
    cache = FactsCache(builder, 30.0, rng=random.Random(2), clock=clock)
    cache.warm(["S2"], budget_s=60)  # built, never read
    cache.get("S1")
    clock.now += 10
    assert cache.refresh(budget_s=60) == 0  # nothing near its expiry yet
    clock.now += 30 * (1 + JITTER) - 10 - 30 * REFRESH_LEAD + 0.01
    assert cache.refresh(budget_s=0) == 1 and cache.refresh_pending == 1
    hits = cache.hits
    clock.now += 30 * REFRESH_LEAD
    assert cache.get("S1") is not None and cache.hits == hits + 1  # the read one came first
    assert cache.refresh(budget_s=60) == 1 and builder.builds == 4
    clock.now += 40  # a quiet spell: every sheet held is kept built, read or not
    assert cache.refresh(budget_s=60) == 2 and cache.misses == 2


def test_an_unread_sheet_near_expiry_waits_for_an_empty_queue(store: CountingStore) -> None:
    clock = FakeClock()
    cache = FactsCache(CountingBuilder(store), 30.0, rng=random.Random(4), clock=clock)
    cache.warm(["S2", "S3"], budget_s=60)  # never read
    cache.get("S1")
    cache.evict(["S3"])  # a live feed's work waits
    clock.now += 30 * (1 + JITTER) - 30 * REFRESH_LEAD + 0.01
    assert cache.refresh(budget_s=60) == 2  # S1 (read, near expiry) and S3 (dropped)
    assert cache.refresh_pending == 0
    clock.now += 30 * REFRESH_LEAD  # the next scan finds the queue empty
    assert cache.refresh(budget_s=60) == 1  # S2


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(st.tuples(st.sampled_from(["get", "evict", "write"]),
                              st.sampled_from(["S1", "S2", "S3"])), max_size=20))  # fmt: skip
def test_after_a_full_refresh_every_dropped_sheet_is_a_hit(
    store: CountingStore, ops: list[tuple[str, str]]
) -> None:
    clock = FakeClock()
    cache = FactsCache(CountingBuilder(store), 30.0, rng=random.Random(0), clock=clock)
    held: set[str] = set()
    for op, sku in ops:
        if op == "get":
            cache.get(sku)
            held.add(sku)
        else:
            if op == "write":
                store.apply([parse_ok(price_event(sku))])
            cache.evict([sku])
    cache.refresh(budget_s=60)
    assert cache.refresh_pending == 0
    misses = cache.misses
    for sku in held:
        sheet = cache.get(sku)
        current = store.revision(sku)
        assert sheet is not None and current is not None and sheet.revision == current[0]
    assert cache.misses == misses


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("get"), st.sampled_from(["S1", "S2", "S3"])),
        st.tuples(st.just("evict"), st.sampled_from(["S1", "S2", "S3"])),
        st.tuples(st.just("write"), st.sampled_from(["S1", "S2", "S3"])),
        st.tuples(st.just("unseen_write"), st.sampled_from(["S1", "S2", "S3"])),
        st.tuples(st.just("tick"), st.floats(0.0, 20.0)),
        st.tuples(st.just("refresh"), st.floats(0.0, 1.0)),
    ),
    max_size=30,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(ops=OPS, seed=st.integers(0, 2**16))
def test_no_read_is_older_than_the_store(
    store: CountingStore, ops: list[tuple[str, object]], seed: int
) -> None:
    clock = FakeClock()
    cache = FactsCache(CountingBuilder(store), 30.0, rng=random.Random(seed), clock=clock)
    for op, arg in ops:
        if op == "tick":
            assert isinstance(arg, float)
            clock.now += arg
            continue
        if op == "refresh":
            assert isinstance(arg, float)
            cache.refresh(arg)
            continue
        sku = str(arg)
        if op == "get":
            current = store.revision(sku)
            sheet = cache.get(sku)
            assert sheet is not None and current is not None
            assert sheet.revision >= current[0]
        elif op == "evict":
            cache.evict([sku])
        else:
            store.apply([parse_ok(price_event(sku))])
            if op == "write":
                cache.evict([sku])


def test_threads_reading_while_a_writer_commits_never_see_an_older_sheet(
    store: CountingStore,
) -> None:
    cache = FactsCache(CountingBuilder(store), rng=random.Random(5))
    stop = threading.Event()
    failures: list[str] = []

    def read() -> None:
        while not stop.is_set():
            for sku in ("S1", "S2"):
                current = store.revision(sku)
                sheet = cache.get(sku)
                if sheet is None or current is None or sheet.revision < current[0]:
                    failures.append(sku)

    readers = [threading.Thread(target=read) for _ in range(4)]
    for thread in readers:
        thread.start()
    for i in range(20):
        sku = ("S1", "S2")[i % 2]
        store.apply([parse_ok(price_event(sku))])
        cache.evict([sku])
    stop.set()
    for thread in readers:
        thread.join(10)
    assert failures == []


def price_event(sku: str) -> dict[str, object]:
    n = next(_ids)
    return {"type": "price", "event_id": f"w{n}", "source": "test", "sku": sku,
            "ts": iso(MARKET_NOW_MS - 1000 + n), "price": 100.0 + n % 97}  # fmt: skip


def parse_ok(data: Mapping[str, object]) -> Event:
    parsed = parse_event(data)
    assert not isinstance(parsed, EventError), parsed
    return parsed
