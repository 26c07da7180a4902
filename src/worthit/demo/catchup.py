"""Bringing a demo market up to today before it is served or asked.

The demo market ends on the day it was built, and a price older than the stale-price
limit (3 days by default) makes a product INSUFFICIENT_DATA. A demo built on Monday and
served on Friday would then answer that for nearly everything until the live ticker
happened to move each price. The demo is a simulation, so the days it was not running
are simulated (`simulator.extend`): the same seed gives the same days whenever, and in
whatever steps, they are caught up.

Only a market this package built is ever extended. The build is remembered beside the
market, in the `demo_market` table (this package's own): an imported market has no such
row and is never written here, so its stale prices show as they should. A demo built
before builds were marked is recognised by its hero S1: its title and every daily price
the simulator writes for it must be in the store, which no other market has. Nothing else
in the database (API keys, watches, feedback, explanations) is read or changed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import date, timedelta
from pathlib import Path

from worthit.db.connection import Store
from worthit.db.migrations import Migration, migrate_component
from worthit.db.open import open_database
from worthit.demo.simulator import HEROES_FROM_SKUS, extend, generate
from worthit.market.records import PriceRecord, ProductRecord
from worthit.market.store import MarketStore
from worthit.text.time import DAY_MS, date_to_ms, from_ms, to_ms

COMPONENT = "demo"
MIGRATIONS = (
    Migration(
        1,
        "the demo market's build",
        """
CREATE TABLE demo_market (
    id      INTEGER PRIMARY KEY CHECK (id = 1),
    skus    INTEGER NOT NULL,
    days    INTEGER NOT NULL,
    seed    INTEGER NOT NULL,
    end_day TEXT NOT NULL,
    through TEXT NOT NULL
);
""",
    ),
)

_UPSERT = (
    "INSERT INTO demo_market (id, skus, days, seed, end_day, through) VALUES (1, ?, ?, ?, ?, ?) "
    "ON CONFLICT (id) DO UPDATE SET skus = excluded.skus, days = excluded.days, "
    "seed = excluded.seed, end_day = excluded.end_day, through = excluded.through"
)


@dataclass(frozen=True)
class DemoBuild:
    """The arguments a demo market was simulated with, and how far it has been carried."""

    skus: int
    days: int
    seed: int
    end: date
    through: date
    """The last simulated day: `end` after the build, later once caught up."""


@dataclass(frozen=True)
class CaughtUp:
    through: date
    days: int
    seconds: float

    def line(self) -> str:
        days = f"{self.days} day" if self.days == 1 else f"{self.days} days"
        return f"demo market brought up to {self.through}: {days} simulated in {self.seconds:.1f} s"


def _open(path: str | Path) -> Store:
    return open_database(path, lambda conn: migrate_component(conn, COMPONENT, MIGRATIONS))


def remember(path: str | Path, build: DemoBuild) -> None:
    """Mark the market at `path` as this demo build (replacing an earlier mark)."""
    db = _open(path)
    try:
        with db.transaction() as conn:
            conn.execute(
                _UPSERT,
                (
                    build.skus,
                    build.days,
                    build.seed,
                    build.end.isoformat(),
                    build.through.isoformat(),
                ),
            )
    finally:
        db.close()


def recall(path: str | Path) -> DemoBuild | None:
    """The demo build the market at `path` holds; None for any other market."""
    db = _open(path)
    try:
        row = (
            db.connection()
            .execute("SELECT skus, days, seed, end_day, through FROM demo_market WHERE id = 1")
            .fetchone()
        )
    finally:
        db.close()
    if row is None:
        return None
    skus, days, seed, end, through = row
    return DemoBuild(
        int(skus), int(days), int(seed), date.fromisoformat(end), date.fromisoformat(through)
    )


def recognise(store: MarketStore, days: int, seed: int) -> DemoBuild | None:
    """The build of an unmarked market that is the demo simulated with `days` and `seed`
    (the window starts at the market's first price); None for any other market."""
    hero = store.product("S1")
    span = store.price_span()
    if hero is None or span is None:
        return None
    end = from_ms(span[0]).date() + timedelta(days=days - 1)
    records = generate(HEROES_FROM_SKUS, days, seed, end)
    first = next(records)
    if not isinstance(first, ProductRecord) or (first.sku, first.title) != ("S1", hero.title):
        return None
    expected = {
        to_ms(r.ts): r.price for r in records if isinstance(r, PriceRecord) and r.sku == "S1"
    }
    stored = {p.ts_ms: p.price for p in store.prices("S1", until_ms=date_to_ms(end) + DAY_MS)}
    if not expected or any(stored.get(ts) != price for ts, price in expected.items()):
        return None
    return DemoBuild(store.count_products(), days, seed, end, end)


def catch_up(
    store: MarketStore,
    today: date,
    *,
    unmarked: tuple[int, int] | None = None,
    progress: Callable[[int, int], None] | None = None,
    timer: Callable[[], float] = time.monotonic,
) -> CaughtUp | None:
    """Simulate a demo market's days after its last one through `today`; None when the
    market is not a demo build or is already there. `unmarked` is the (days, seed) a
    demo built before builds were marked would have: such a market is marked and caught
    up too."""
    build = recall(store.path)
    if build is None and unmarked is not None:
        build = recognise(store, *unmarked)
        if build is not None:
            remember(store.path, build)
    if build is None or build.through >= today:
        return None
    started = timer()
    extend(
        store,
        skus=build.skus,
        days=build.days,
        seed=build.seed,
        end=build.end,
        after=build.through,
        through=today,
        progress=progress,
    )
    remember(store.path, replace(build, through=today))
    return CaughtUp(today, (today - build.through).days, timer() - started)
