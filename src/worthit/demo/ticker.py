"""The demo ticker: changes, as they happen, to a market already in the store; what
`worthit simulate --live` and `worthit serve --live-rate N` publish.

It walks the catalogue in sweeps (every product once per sweep, in a seeded shuffled
order), so at N events a second every product hears from the feed about every
products × 1.3 / N seconds. A visit carries on from what the store holds for the
product and sends, stamped now:

- a stock reading, always (the feed's heartbeat): lower by the units sold since the last
  reading, at the product's own daily rate, and now and then restocked when low; with
  today's sales count raised by those units;
- a price move, one visit in 120 (about once an hour a product in the demo, a couple of
  price changes a second across the market): a mean-reverting walk of a fraction of a
  percent, kept within 2% of the price the feed first found, in cents, as the simulator
  prices. More often is not how retailers reprice, and every move sends the product's
  stored explanations, whose numbers are checked against the new facts, back to be
  rewritten;
- a review, one visit in 200 (a dozen a day a product): rated around the product's last
  30 days, in English or Chinese, from the simulator's sentences. A review moves the
  rating and its count, which explanations quote.

The first visit brings a product's data up to now: the demo market ends on the day it
was built, so its newest rows are hours old. The small, bounded moves keep the demo's
stories (simulator.py) true; only the new listing changes its answer, once ten
observations make its price judgeable. Every event has a fresh id, so a restarted feed
never collides with an earlier one.
"""

from __future__ import annotations

import asyncio
import math
import random
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta

from worthit.demo.simulator import _ASPECTS, _EN, _ZH, _poisson
from worthit.market.events import Event, PriceEvent, ReviewEvent, SalesEvent, StockEvent
from worthit.market.store import MarketStore
from worthit.text.time import DAY_MS, Clock, from_ms, now_ms

TICKER_SOURCE = "live"
PRICE_MOVE_CHANCE = 1 / 120
REVIEW_CHANCE = 1 / 200
RESTOCK_CHANCE = 0.1
PRICE_BAND = 0.02
"""How far (in log terms) a live price may wander from the price the feed first found."""
RECENT_DAYS = 30
TICK_S = 0.05
_DEFAULT_ASPECT = ("quality", "质量")


@dataclass
class _Product:
    """What the feed knows of one product between visits."""

    sku: str
    category: str
    rng: random.Random
    anchor: float | None
    price: float | None
    currency: str
    list_price: float | None
    level: float
    sigma: float
    stock: int | None
    capacity: int
    daily_units: float
    day: str
    sold_today: int
    quality: float
    zh_share: float
    last_ms: int


class MarketTicker:
    """Realistic changes to the products in `store`, one product's visit at a time."""

    def __init__(
        self,
        store: MarketStore,
        *,
        seed: int = 7,
        clock: Clock = now_ms,
        source: str = TICKER_SOURCE,
    ) -> None:
        self.store = store
        self.seed = seed
        self.clock = clock
        self.source = source
        self._rng = random.Random(f"worthit-live:{seed}:sweeps")
        self._run = uuid.uuid4().hex[:12]
        self._sent = 0
        self._sweep: list[str] = []
        self._products: dict[str, _Product] = {}

    def visit(self) -> list[Event]:
        """The next product's changes (empty for a product with nothing to move yet)."""
        if not self._sweep:
            skus = [hit.sku for hit in self.store.all_names()]
            self._rng.shuffle(skus)
            self._sweep = skus
            if not skus:
                return []
        sku = self._sweep.pop()
        product = self._products.get(sku) or self._load(sku)
        if product is None:
            return []
        self._products[sku] = product
        now = max(self.clock(), product.last_ms + 1)
        events: list[Event] = []
        events += self._stock(product, now)
        if product.price is not None and product.rng.random() < PRICE_MOVE_CHANCE:
            events += self._price(product, now)
        if product.rng.random() < REVIEW_CHANCE:
            events.append(self._review(product, now))
        product.last_ms = now
        return events

    def _id(self) -> str:
        self._sent += 1
        return f"live-{self._run}-{self._sent}"

    def _load(self, sku: str) -> _Product | None:
        """Where the feed carries on from: the newest rows up to now."""
        record = self.store.product(sku)
        if record is None:
            return None
        now = self.clock()
        prices = self.store.prices(sku, since_ms=now - 90 * DAY_MS, until_ms=now)
        stock = self.store.latest_stock(sku, until_ms=now)
        today = from_ms(now).date()
        week = self.store.sales(sku, (today - timedelta(days=7)).isoformat(), today.isoformat())
        earlier_n, earlier_sum, recent_n, recent_sum, newest_review = self.store.rating_split(
            sku, now - RECENT_DAYS * DAY_MS, now
        )
        count, total = earlier_n + recent_n, earlier_sum + recent_sum
        quality = recent_sum / recent_n if recent_n >= 5 else total / count if count else 4.0
        latest = prices[-1] if prices else None
        daily = sum(day.units for day in week) / 7
        rng = random.Random(f"worthit-live:{self.seed}:{sku}")
        return _Product(
            sku=sku,
            category=record.category,
            rng=rng,
            anchor=latest.price if latest else None,
            price=latest.price if latest else None,
            currency=latest.currency if latest else "USD",
            list_price=latest.list_price if latest else None,
            level=0.0,
            sigma=rng.uniform(0.002, 0.006),
            stock=stock.quantity if stock else None,
            capacity=max(5, round(daily * rng.uniform(18, 45)), stock.quantity if stock else 0),
            daily_units=daily,
            day=today.isoformat(),
            sold_today=sum(day.units for day in week if day.day == today.isoformat()),
            quality=quality,
            zh_share=rng.uniform(0.1, 0.4),
            last_ms=max(latest.ts_ms if latest else 0, stock.ts_ms if stock else 0, newest_review),
        )

    def _stock(self, product: _Product, now: int) -> list[Event]:
        if product.stock is None:
            return []
        day = from_ms(now).date()
        if day.isoformat() != product.day:
            product.day, product.sold_today = day.isoformat(), 0
        elapsed_days = max(0, now - product.last_ms) / DAY_MS
        sold = min(product.stock, _poisson(product.rng, product.daily_units * elapsed_days))
        product.stock -= sold
        if product.stock <= product.capacity // 4 and product.rng.random() < RESTOCK_CHANCE:
            product.stock = product.capacity
        events: list[Event] = [
            StockEvent(
                type="stock",
                event_id=self._id(),
                source=self.source,
                sku=product.sku,
                ts=from_ms(now),
                quantity=product.stock,
            )
        ]
        if sold:
            product.sold_today += sold
            events.append(
                SalesEvent(
                    type="sales",
                    event_id=self._id(),
                    source=self.source,
                    sku=product.sku,
                    date=day,
                    units=product.sold_today,
                )
            )
        return events

    def _price(self, product: _Product, now: int) -> list[Event]:
        assert product.anchor is not None and product.price is not None
        step = 0.8 * product.level + product.rng.gauss(0.0, product.sigma)
        product.level = max(-PRICE_BAND, min(PRICE_BAND, step))
        price = max(0.5, round(product.anchor * math.exp(product.level), 2))
        if price == product.price:
            return []
        product.price = price
        if product.list_price is not None:
            product.list_price = round(max(product.list_price, price * 1.05), 2)
        return [
            PriceEvent(
                type="price",
                event_id=self._id(),
                source=self.source,
                sku=product.sku,
                ts=from_ms(now),
                price=price,
                currency=product.currency,
                list_price=product.list_price,
            )
        ]

    def _review(self, product: _Product, now: int) -> ReviewEvent:
        rng = product.rng
        rating = min(5, max(1, round(rng.gauss(product.quality, 0.8))))
        mood = "positive" if rating >= 4 else "mixed" if rating == 3 else "negative"
        chinese = rng.random() < product.zh_share
        en_aspect, zh_aspect = rng.choice(_ASPECTS.get(product.category, (_DEFAULT_ASPECT,)))
        template = rng.choice((_ZH if chinese else _EN)[mood])
        return ReviewEvent(
            type="review",
            event_id=self._id(),
            source=self.source,
            sku=product.sku,
            review_id=f"{product.sku}-L{now:x}",
            ts=from_ms(now),
            rating=rating,
            text=template.format(aspect=zh_aspect if chinese else en_aspect),
            verified=rng.random() < 0.9,
        )


async def run_ticker(
    market: MarketTicker,
    publish: Callable[[Event], Awaitable[None]],
    rate: float,
    *,
    duration_s: float | None = None,
) -> int:
    """Publish about `rate` events a second until cancelled (or for `duration_s`);
    returns how many were published. `publish` may wait: the feed then slows down."""
    loop = asyncio.get_running_loop()
    started = last = loop.time()
    credit = 0.0
    sent = 0
    while duration_s is None or loop.time() - started < duration_s:
        await asyncio.sleep(TICK_S)
        now = loop.time()
        credit = min(credit + (now - last) * rate, max(rate, 1.0))
        last = now
        visits = 0
        while credit >= 1 and visits < max(16, int(rate)):
            visits += 1
            for event in market.visit():
                await publish(event)
                credit -= 1
                sent += 1
    return sent
