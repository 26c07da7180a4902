"""The stores beside the market (API keys, watches, webhook sources, feedback), each on
SQLite and on PostgreSQL through the same interface, sharing one database with the market."""

from __future__ import annotations

import pytest

from worthit.decide.feedback import (
    Answered,
    BacktestTally,
    Feedback,
    FeedbackConflictError,
    FeedbackStore,
)
from worthit.market.ingest.webhook_sources import (
    SourceExistsError,
    SourceNotFoundError,
    SourceStore,
)
from worthit.market.records import ProductRecord
from worthit.market.store import MarketStore
from worthit.service.tenants import KeyNotFoundError, RevokedKeyError, TenantStore
from worthit.watches.store import Condition, Delivery, WatchState, WatchStore


def test_api_keys(market_db: str) -> None:
    store = TenantStore(market_db, cache_ttl=0.0)
    first, key = store.create("acme", "high", 600, 20_000)
    second, _ = store.create("globex", "low", 5, 50)
    assert store.authenticate(key).name == "acme"
    assert [info.key_id for info in store.list()] == [first, second]  # in the order issued
    assert store.revoke(first).revoked_at is not None
    with pytest.raises(RevokedKeyError):
        store.authenticate(key)
    with pytest.raises(KeyNotFoundError):
        store.revoke("wk_000000000000")
    store.close()
    again = TenantStore(market_db)  # migrated once, the keys kept
    assert [info.tenant for info in again.list()] == ["acme", "globex"]
    again.close()


def test_watches_fire_once_and_queue_one_delivery(market_db: str) -> None:
    store = WatchStore(market_db)
    hook = store.add("t", "S1", Condition.PRICE_AT_MOST, 249.0, Delivery.WEBHOOK,
                     "https://example.com/h", 1_000)  # fmt: skip
    sse = store.add("t", "S2", Condition.VERDICT_BUY, None, Delivery.SSE, None, 1_001)
    assert {w.watch_id for w in store.active(["S1", "S2", "S3"])} == {hook.watch_id, sse.watch_id}
    delivery = store.fire(hook.watch_id, {"price": 239.0, "note": "降价"}, 2_000)
    assert delivery and store.fire(hook.watch_id, {"price": 1.0}, 2_001) is None
    assert store.fire(sse.watch_id, {}, 2_002) == ""
    due = store.due(2_000, 10)
    assert [d.delivery_id for d in due] == [delivery] and store.next_due_ms() == 2_000
    store.retry(delivery, "HTTP 500", 5_000)
    assert store.due(4_999, 10) == [] and store.next_due_ms() == 5_000
    store.delivered(delivery)
    record = store.delivery(delivery)
    assert record is not None and record.attempts == 2 and record.last_error is None
    listed = store.list("t")
    assert [w.watch_id for w in listed] == [hook.watch_id, sse.watch_id]
    assert listed[0].notification == {"price": 239.0, "note": "降价"}
    assert listed[0].state is WatchState.FIRED and len(listed[0].deliveries) == 1
    renewed = store.renew("t", hook.watch_id)
    assert renewed is not None and renewed.state is WatchState.ACTIVE
    assert store.get("other", hook.watch_id) is None and store.count("t") == 2
    assert store.remove("t", hook.watch_id) and not store.remove("t", hook.watch_id)
    store.close()


def test_sources_and_their_delivery_ids(market_db: str) -> None:
    store = SourceStore(market_db)
    secret = store.add("pos")
    with pytest.raises(SourceExistsError):
        store.add("pos")
    assert store.secret("pos") == secret and [s.name for s in store.list()] == ["pos"]
    assert store.take("pos", "msg_1", expires_ms=10_000, now_ms=1_000)
    assert not store.take("pos", "msg_1", expires_ms=20_000, now_ms=2_000)
    assert store.seen("pos", "msg_1", 9_000) and not store.seen("pos", "msg_1", 10_001)
    assert store.take("pos", "msg_1", expires_ms=30_000, now_ms=10_001)  # expired: taken anew
    store.remove("pos")
    with pytest.raises(SourceNotFoundError):
        store.remove("pos")
    store.close()


def _feedback(outcome: str, request_id: str = "r1") -> Feedback:
    return Feedback("acme", request_id, outcome, Answered("BUY", "S1", "audio", 0.8, 1_000), 2_000)


def test_feedback_once_per_request_and_backtest_tallies(market_db: str) -> None:
    store = FeedbackStore(market_db)
    assert not store.record(_feedback("bought")).duplicate
    assert store.record(_feedback("bought")).duplicate
    assert store.record(_feedback("returned")).replaced == "bought"
    with pytest.raises(FeedbackConflictError):
        store.record(_feedback("waited"))
    store.record(_feedback("waited", "r2"))
    assert [(f.request_id, f.outcome) for f in store.all()] == [
        ("r1", "returned"),
        ("r2", "waited"),
    ]
    tally = BacktestTally("BUY", "audio", 0.8, True, 3)
    store.replace_backtest([tally, tally, BacktestTally("WAIT", "audio", 0.6, False, 1)])
    store.replace_backtest([tally, tally])  # replaced as a whole; equal keys add up
    assert store.backtest() == [BacktestTally("BUY", "audio", 0.8, True, 6)]
    store.close()


def test_every_store_shares_one_database_with_the_market(market_db: str) -> None:
    market = MarketStore(market_db)
    market.apply([ProductRecord(sku="S1", title="Aurora NC700")])
    for store in (TenantStore(market_db), WatchStore(market_db), SourceStore(market_db),
                  FeedbackStore(market_db)):  # fmt: skip
        store.close()
    market.close()
    reopened = MarketStore(market_db)
    assert reopened.count_products() == 1
    reopened.close()
