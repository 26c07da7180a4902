"""A stale price over HTTP: asked 100 days after the small market's last prices, /v1/decide
answers INSUFFICIENT_DATA naming the age, and its facts say the price is stale; with a
threshold past that age (`ServiceSettings.stale_price_days`) the same question is judged."""

from __future__ import annotations

from pathlib import Path

import httpx

from worthit.text.time import DAY_MS, fixed_clock

from conftest import MARKET_END, MARKET_NOW_MS
from service_fixtures import market_copy, serving

__all__ = ["market_copy"]

QUESTION = {"question": "Is the Aurora NC700 worth buying?"}
LATER = fixed_clock(MARKET_NOW_MS + 100 * DAY_MS)


def test_a_product_whose_feed_stopped_gets_no_price_verdict(market_copy: Path) -> None:
    with serving(market_copy, clock=LATER, auth=False) as server:
        r = httpx.post(server.base_url + "/v1/decide", json=QUESTION)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["verdict"] == "INSUFFICIENT_DATA"
    reason = body["reasons"][0]
    assert reason["code"] == "stale_price"
    age = reason["numbers"]["age_days"]
    assert age >= 100 and f"{age} days old" in reason["text"]
    assert reason["numbers"]["last_price_at"] <= MARKET_END.isoformat()
    assert body["facts"]["price_stale"] is True and body["facts"]["price_age_days"] == age


def test_a_threshold_past_the_age_judges_the_price(market_copy: Path) -> None:
    with serving(market_copy, clock=LATER, auth=False, stale_price_days=365.0) as server:
        r = httpx.post(server.base_url + "/v1/decide", json=QUESTION)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["verdict"] in ("BUY", "WAIT") and body["facts"]["price_stale"] is False
    assert "stale_price" not in {reason["code"] for reason in body["reasons"]}
