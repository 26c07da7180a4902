"""The fact cache: evicted at once by the bus's after-commit notice, the revision check
kept as the safety net for writers the bus does not see."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.facts.sheet import FactSheet
from worthit.market.bus import EventBus
from worthit.market.events import EventError, parse_event
from worthit.market.store import MarketStore
from worthit.service.build import build_answerer
from worthit.text.time import iso

from conftest import MARKET_NOW_MS, market_clock


@pytest.fixture
def store(small_market: Path, tmp_path: Path) -> MarketStore:
    shutil.copy(small_market, tmp_path / "m.db")
    return MarketStore(tmp_path / "m.db")


def test_evict_drops_only_the_named_sheets(store: MarketStore) -> None:
    cache = FactsCache(FactsBuilder(store, market_clock()))
    assert cache.get("S1") is not None and cache.get("S2") is not None
    assert cache.evict(["S1", "S404"]) == 1
    assert len(cache) == 1 and cache.evictions == 1
    cache.get("S2")
    assert cache.hits == 1
    cache.get("S1")
    assert cache.misses == 3


def test_a_writer_the_bus_does_not_see_is_caught_by_the_revision(store: MarketStore) -> None:
    cache = FactsCache(FactsBuilder(store, market_clock()))
    before = cache.get("S1")
    other_process = MarketStore(store.path)  # `worthit import` beside the server
    other_process.apply([parse_ok(price_event("x1", 123.45))])
    after = cache.get("S1")
    assert before is not None and after is not None
    assert after.current_price == 123.45 and after.version != before.version


def test_event_fed_sheets_say_so_and_plain_ones_do_not(store: MarketStore) -> None:
    cache = FactsCache(FactsBuilder(store, market_clock()))
    plain = cache.get("S1")
    assert plain is not None and plain.fed_by_events is False
    fed = FactsCache(FactsBuilder(store, market_clock()), fed_by_events=True).get("S1")
    assert fed is not None and fed.fed_by_events is True
    assert fed.version == plain.version  # the same facts, only judged against the objective


def test_the_bus_notice_evicts_and_queues_both_languages(store: MarketStore) -> None:
    answerer = build_answerer(store, None, clock=market_clock())
    before = answerer.facts.get("S1")
    assert before is not None
    new_price = round((before.current_price or 100.0) - 5.0, 2)

    async def run() -> None:
        bus = EventBus(store)
        bus.subscribe(answerer.facts_changed)
        bus.subscribe(answerer.facts_restated, restated_only=True)
        bus.start()
        await bus.submit([parse_ok(price_event("p1", new_price))])
        await bus.stop()

    asyncio.run(run())
    assert len(answerer.facts) == 0 and answerer.facts.evictions == 1
    assert {answerer.restated.pop(), answerer.restated.pop()} == {("S1", "en"), ("S1", "zh")}
    after = answerer.facts.get("S1")
    assert after is not None and after.current_price == new_price


def test_a_stock_reading_evicts_but_queues_no_rewrite(store: MarketStore) -> None:
    """The live feed's heartbeat changes the facts (stock), not what is explained."""
    answerer = build_answerer(store, None, clock=market_clock())
    assert answerer.facts.get("S1") is not None
    stock = {"type": "stock", "event_id": "st1", "source": "pos", "sku": "S1",
             "ts": "2026-09-20T12:00:00Z", "quantity": 7}  # fmt: skip

    async def run() -> None:
        bus = EventBus(store)
        bus.subscribe(answerer.facts_changed)
        bus.subscribe(answerer.facts_restated, restated_only=True)
        bus.start()
        await bus.submit([parse_ok(stock)])
        await bus.stop()

    asyncio.run(run())
    assert answerer.facts.evictions == 1
    assert answerer.restated.pop() is None


def price_event(event_id: str, value: float) -> dict[str, object]:
    return {"type": "price", "event_id": event_id, "source": "test", "sku": "S1",
            "ts": iso(MARKET_NOW_MS - 1000), "price": value}  # fmt: skip


def parse_ok(data: dict[str, object]):  # type: ignore[no-untyped-def]
    parsed = parse_event(data)
    assert not isinstance(parsed, EventError), parsed
    return parsed


def test_a_kept_sheet_ages_by_the_service_clock_not_the_cache_timer(store: MarketStore) -> None:
    """The data age an answer shows moves with the service's clock: pinned, it stays put
    however long the sheet sits in the cache (a refresh between an event and the next
    question used to add the real milliseconds it had waited)."""
    timer = [0.0]
    service_now = [MARKET_NOW_MS]
    cache = FactsCache(
        FactsBuilder(store, lambda: service_now[0]), max_age_s=60, clock=lambda: timer[0]
    )
    built = cache.get("S1")
    timer[0] += 5.0  # five seconds in the cache, the service clock pinned
    pinned = cache.get("S1")
    service_now[0] += 2_000
    later = cache.get("S1")
    assert built is not None and pinned is not None and later is not None
    assert cache.hits == 2
    assert pinned.data_age_ms == built.data_age_ms
    assert later.data_age_ms == built.data_age_ms + 2_000


def test_warm_builds_the_named_sheets_in_order_up_to_the_capacity(store: MarketStore) -> None:
    cache = FactsCache(FactsBuilder(store, market_clock()), capacity=3)
    assert cache.get("S2") is not None
    built = cache.warm(["S1", "S2", "S404", "S3", "S4", "S5"], budget_s=60)
    assert built == 2 and cache.warmed == 2  # S2 was there, S404 is no product, S4 is one too many
    assert len(cache) == 3
    hits = cache.hits
    assert cache.get("S1") is not None and cache.get("S3") is not None
    assert cache.hits == hits + 2


def test_warm_builds_each_sheet_once_though_the_feed_drops_it_meanwhile(
    store: MarketStore,
) -> None:
    """The answerer names best sellers, then every product: a best seller's sheet an event
    dropped mid-warm was built twice and counted twice (`warmed` 2,059 of 2,000)."""

    class FeedDuringWarm(FactsBuilder):
        def build(self, sku: str, at_ms: int | None = None) -> FactSheet | None:
            if sku == "S2":
                cache.evict(["S1"])  # an event about S1 arrives while S2 is built
            return super().build(sku, at_ms)

    cache = FactsCache(FeedDuringWarm(store, market_clock()))
    assert cache.warm(["S1", "S2", "S1", "S3"], budget_s=60) == 3
    assert cache.warmed == 3 and cache.refresh_pending == 1  # S1 waits for the refresher


def test_warm_stops_when_its_time_is_spent(store: MarketStore) -> None:
    now = [0.0]

    def clock() -> float:
        now[0] += 0.4  # each look at the clock is 0.4 s later
        return now[0]

    cache = FactsCache(FactsBuilder(store, market_clock()), clock=clock)
    built = cache.warm([f"S{i}" for i in range(1, 7)], budget_s=1.0)
    assert 0 < built < 6 and len(cache) == built


def test_the_answerer_warms_last_weeks_best_sellers_first(store: MarketStore) -> None:
    answerer = build_answerer(store, None, clock=market_clock())
    answerer.facts.capacity = 5
    assert answerer.warm(budget_s=60) == 5
    ranked = answerer.decider.rankings.top(None, "sales", 7, 5)
    hits = answerer.facts.hits
    for item in ranked:
        assert answerer.facts.get(item.sku) is not None
    assert answerer.facts.hits == hits + len(ranked)


def test_refresh_rebuilds_the_sheets_events_dropped_read_ones_first(store: MarketStore) -> None:
    cache = FactsCache(FactsBuilder(store, market_clock()))
    assert cache.warm(["S2"], budget_s=60) == 1  # built, never read
    assert cache.get("S1") is not None  # read
    assert cache.evict(["S2", "S1"]) == 2 and cache.refresh_pending == 2
    assert cache.refresh(budget_s=0) == 1  # one at least, however short the budget
    misses = cache.misses
    assert cache.get("S1") is not None and cache.misses == misses  # the read one came first
    assert cache.refresh(budget_s=60) == 1 and cache.refresh_pending == 0
    assert cache.get("S2") is not None and cache.misses == misses
    assert cache.refreshed == 2 and cache.refresh(budget_s=60) == 0


def test_refresh_skips_a_sheet_a_reader_built_again(store: MarketStore) -> None:
    cache = FactsCache(FactsBuilder(store, market_clock()))
    cache.get("S1")
    cache.evict(["S1"])
    cache.get("S1")  # the next question came before the refresh
    assert cache.refresh_pending == 0 and cache.refresh(budget_s=60) == 0


def test_refresh_queues_no_more_than_the_cache_holds(store: MarketStore) -> None:
    cache = FactsCache(FactsBuilder(store, market_clock()), capacity=2)
    for sku in ("S1", "S2", "S3", "S4"):
        cache.get(sku)
        cache.evict([sku])
    assert cache.refresh_pending == 2
    assert cache.refresh(budget_s=60) == 2
    misses = cache.misses
    cache.get("S4")
    cache.get("S3")
    assert cache.misses == misses  # the latest dropped kept their places
