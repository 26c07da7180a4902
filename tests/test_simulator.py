"""The demo market: deterministic, idempotent, and shaped the way the verdict rules expect."""

from __future__ import annotations

import random
import sqlite3
import statistics
from datetime import date, timedelta
from pathlib import Path

import pytest

from worthit.demo.names import Namer
from worthit.demo.simulator import UPCOMING_DAYS, SimulationSummary, generate, sale_events, simulate
from worthit.facts.builder import FactsBuilder
from worthit.market.categories import CATEGORIES
from worthit.market.records import ProductRecord, PromotionRecord
from worthit.market.store import MarketStore
from worthit.text.time import DAY_MS, date_to_ms

END = date(2025, 11, 30)
SKUS, DAYS, SEED = 60, 120, 11
AFTER_END_MS = date_to_ms(END + timedelta(days=1))

_TABLES = {
    "products": "sku",
    "prices": "sku, ts",
    "stock": "sku, ts",
    "reviews": "sku, review_id",
    "promotions": "sku, name, starts",
    "sales": "sku, day",
}


def _build(
    path: Path, *, skus: int = SKUS, days: int = DAYS, seed: int = SEED
) -> SimulationSummary:
    with MarketStore(path) as store:
        return simulate(store, skus=skus, days=days, seed=seed, end=END)


def _dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(path) as conn:
        return {
            table: conn.execute(f"SELECT * FROM {table} ORDER BY {key}").fetchall()
            for table, key in _TABLES.items()
        }


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SimulationSummary]:
    path = tmp_path_factory.mktemp("market") / "market.db"
    return path, _build(path)


@pytest.fixture()
def market_path(built: tuple[Path, SimulationSummary]) -> Path:
    return built[0]


@pytest.fixture()
def store(market_path: Path):
    with MarketStore(market_path) as opened:
        yield opened


# --- determinism and idempotence ----------------------------------------------------------


def test_same_seed_gives_identical_tables(market_path: Path, tmp_path: Path) -> None:
    _build(tmp_path / "again.db")
    assert _dump(tmp_path / "again.db") == _dump(market_path)


def test_another_seed_gives_another_market(market_path: Path, tmp_path: Path) -> None:
    _build(tmp_path / "other.db", seed=SEED + 1)
    other, ours = _dump(tmp_path / "other.db"), _dump(market_path)
    assert other["prices"] != ours["prices"]
    assert other["reviews"] != ours["reviews"]


def test_rerun_changes_nothing_and_reports_progress(tmp_path: Path) -> None:
    path = tmp_path / "twice.db"
    first = _build(path, skus=20, days=40)
    before = _dump(path)
    calls: list[tuple[int, int]] = []
    with MarketStore(path) as store:
        second = simulate(
            store, skus=20, days=40, seed=SEED, end=END, progress=lambda *a: calls.append(a)
        )
    assert _dump(path) == before
    assert first.written > 0
    assert second.written == 0
    assert second == SimulationSummary(**{**vars(first), "written": 0})
    assert calls == [(n, 20) for n in range(1, 21)]


def test_more_skus_only_append_products() -> None:
    def products(skus: int) -> list[ProductRecord]:
        return [r for r in generate(skus, 10, SEED, END) if isinstance(r, ProductRecord)]

    assert products(14)[:12] == products(12)


def test_summary_counts_match_the_store(built: tuple[Path, SimulationSummary]) -> None:
    path, summary = built
    tables = _dump(path)
    assert summary.end == END
    assert summary.products == len(tables["products"]) == SKUS
    assert summary.prices == len(tables["prices"])
    assert summary.stock == len(tables["stock"])
    assert summary.sales == len(tables["sales"])
    assert summary.reviews == len(tables["reviews"])
    assert summary.promotions == len(tables["promotions"])


# --- sizes and ranges -----------------------------------------------------------------------


def test_every_category_is_used(store: MarketStore) -> None:
    assert {name for name, _ in store.categories()} == {c.key for c in CATEGORIES}


def test_values_stay_in_range(market_path: Path) -> None:
    with sqlite3.connect(market_path) as conn:
        prices = conn.execute(
            "SELECT min(price), min(coalesce(list_price, 1)), count(DISTINCT currency) FROM prices"
        ).fetchone()
        ratings = conn.execute("SELECT min(rating), max(rating) FROM reviews").fetchone()
        quantity = conn.execute("SELECT min(quantity) FROM stock").fetchone()
        units = conn.execute("SELECT min(units), max(units) FROM sales").fetchone()
    assert prices[0] > 0 and prices[1] > 0 and prices[2] == 1
    assert ratings == (1, 5)
    assert quantity[0] == 0  # stockouts happen
    assert units[0] == 0 and units[1] > 0


def test_nothing_sells_on_a_stockout_day(market_path: Path) -> None:
    with sqlite3.connect(market_path) as conn:
        sold = conn.execute(
            "SELECT count(*), coalesce(sum(s.units), 0) FROM stock k JOIN sales s"
            " ON s.sku = k.sku AND s.day = date(k.ts / 1000, 'unixepoch') WHERE k.quantity = 0"
        ).fetchone()
    assert sold[0] > 0
    assert sold[1] == 0


def test_some_products_are_new_listings(market_path: Path) -> None:
    with sqlite3.connect(market_path) as conn:
        firsts = conn.execute("SELECT min(ts) FROM prices GROUP BY sku").fetchall()
    recent = [ts for (ts,) in firsts if ts >= AFTER_END_MS - 30 * DAY_MS]
    assert 2 <= len(recent) <= SKUS // 5


def test_upcoming_promotions_for_some_products(market_path: Path) -> None:
    with sqlite3.connect(market_path) as conn:
        upcoming = conn.execute(
            "SELECT DISTINCT sku FROM promotions WHERE starts >= ? AND starts < ?",
            (AFTER_END_MS, AFTER_END_MS + UPCOMING_DAYS * DAY_MS),
        ).fetchall()
    assert 1 < len(upcoming) < SKUS


def test_some_deals_are_offers_at_the_till_and_no_hero_gets_one(market_path: Path) -> None:
    with sqlite3.connect(market_path) as conn:
        kinds = dict(conn.execute("SELECT kind, count(*) FROM promotions GROUP BY kind").fetchall())
        heroes = conn.execute(
            "SELECT DISTINCT kind FROM promotions WHERE sku IN ('S1','S2','S3','S4','S5','S6')"
        ).fetchall()
    assert set(kinds) == {"price", "percent", "threshold", "coupon"}
    assert 0.4 < kinds["price"] / sum(kinds.values()) < 0.8
    assert heroes == [("price",)]


def test_an_offer_at_the_till_leaves_the_recorded_price_and_lowers_the_effective_one(
    store: MarketStore, market_path: Path
) -> None:
    with sqlite3.connect(market_path) as conn:
        sku, starts, ends, percent = conn.execute(
            "SELECT sku, starts, ends, percent_off FROM promotions WHERE kind = 'percent'"
            " AND ends <= ? ORDER BY sku, starts LIMIT 1",
            (AFTER_END_MS,),
        ).fetchone()
    builder = FactsBuilder(store)
    during = builder.build(sku, at_ms=ends - 1)
    before = builder.build(sku, at_ms=starts - 1)
    assert during is not None and before is not None
    assert during.current_price is not None and before.current_price is not None
    assert during.current_price > 0.9 * before.current_price  # no promotional price recorded
    (offer,) = (o for o in during.active_promotions if o.kind == "percent")
    assert offer.percent_off == percent and percent % 5 == 0
    assert during.effective_price == pytest.approx(
        during.current_price * (1 - percent / 100), abs=0.01
    )


def test_s1_newest_reviews_include_a_hostile_one(store: MarketStore) -> None:
    markers = ("nstruction", "指令", "SYSTEM:", "\u200b", "\u202e", "\u2066")
    last_day = [r for r in store.reviews("S1") if r.ts_ms >= AFTER_END_MS - DAY_MS]
    hostile = [r for r in last_day if any(m in r.text for m in markers)]
    assert len(hostile) == 1
    assert hostile[0].verified and hostile[0].rating == 5


def test_some_reviews_are_chinese(market_path: Path) -> None:
    with sqlite3.connect(market_path) as conn:
        texts = [row[0] for row in conn.execute("SELECT text FROM reviews")]
    chinese = [t for t in texts if any("\u4e00" <= ch <= "\u9fff" for ch in t)]
    assert 0.05 < len(chinese) / len(texts) < 0.5


# --- the hero products ----------------------------------------------------------------------


def test_s1_is_a_buy(store: MarketStore) -> None:
    product = store.product("S1")
    assert product is not None
    assert product.title == "Aurora NC700 Wireless Headphones"
    assert product.aliases == ("NC700", "极光NC700", "极光NC700降噪耳机")
    prices = store.prices("S1")
    assert len(prices) == DAYS
    assert prices[-1].price <= 1.05 * min(p.price for p in prices)
    assert store.promotions("S1", ending_after_ms=AFTER_END_MS) == []
    ratings = [r.rating for r in store.reviews("S1")]
    assert len(ratings) > 50 and statistics.mean(ratings) > 4.0


def test_s2_is_a_fake_discount_worth_waiting_for(store: MarketStore) -> None:
    prices = store.prices("S2")
    current = prices[-1]
    last_90 = [p.price for p in prices if p.ts_ms >= AFTER_END_MS - 90 * DAY_MS]
    assert current.price > 1.1 * statistics.mean(last_90)
    assert current.list_price is not None and current.list_price > 1.4 * current.price
    upcoming = [p for p in store.promotions("S2") if p.starts_ms >= AFTER_END_MS]
    assert upcoming and upcoming[0].price < 0.85 * current.price


@pytest.mark.parametrize(
    ("end", "sales"),
    [
        (END, ("Double 12", "Double 12")),
        (date(2026, 11, 25), ("Double 12", "Double 12")),  # Black Friday starts too soon
        (date(2026, 6, 19), ("Lumina Brand Days", "Kestrel Brand Days")),  # none in reach
    ],
)
def test_s2_and_s5_announce_a_sale_3_to_21_days_ahead(end: date, sales: tuple[str, str]) -> None:
    """Within the rules' 21-day horizon from `end` on, and still ahead two days later."""
    ahead = [
        r
        for r in generate(8, 60, SEED, end)
        if isinstance(r, PromotionRecord) and r.sku in ("S2", "S5") and r.starts.date() > end
    ]
    assert [(r.sku, r.name) for r in ahead] == list(zip(("S2", "S5"), sales, strict=True))
    assert all(3 <= (r.starts.date() - end).days <= 21 for r in ahead)


def test_s3_ratings_have_collapsed(store: MarketStore) -> None:
    reviews = store.reviews("S3")
    recent = [r.rating for r in reviews if r.ts_ms >= AFTER_END_MS - 30 * DAY_MS]
    earlier = [r.rating for r in reviews if r.ts_ms < AFTER_END_MS - 45 * DAY_MS]
    assert len(recent) >= 20
    assert statistics.mean(recent) < statistics.mean(earlier) - 1.5


def test_s4_has_too_little_history(store: MarketStore) -> None:
    assert len(store.prices("S4")) < 10


def test_s5_and_s6_are_comparable_headphones(store: MarketStore) -> None:
    pair = [store.product("S5"), store.product("S6")]
    assert [p.title for p in pair if p] == [
        "Kestrel Q5 Noise Cancelling Headphones",
        "Nordvik Aria ANC Headphones",
    ]
    assert all(p and p.category == "headphones" and p.attributes["noise_cancelling"] for p in pair)
    assert all(len(store.prices(sku)) == DAYS for sku in ("S5", "S6"))


def test_no_heroes_in_a_tiny_market() -> None:
    titles = [r.title for r in generate(5, 3, SEED, END) if isinstance(r, ProductRecord)]
    assert "Aurora NC700 Wireless Headphones" not in titles


# --- names and the sales calendar ---------------------------------------------------------


def test_names_are_unique_within_a_catalogue() -> None:
    namer = Namer(random.Random(1))
    names = [namer.name("headphones") for _ in range(3000)]
    assert len({(n.brand.en, n.model) for n in names}) == len(names)
    first = names[0]
    assert first.aliases == [
        first.model,
        f"{first.brand.zh}{first.model}",
        f"{first.brand.zh}{first.model}{first.kind.zh}",
    ]


def test_a_sale_always_starts_within_the_upcoming_horizon() -> None:
    events = sale_events(date(2024, 1, 1), date(2027, 2, 1))
    day = date(2024, 1, 1)
    while day < date(2027, 1, 1):
        assert any(day < e.starts <= day + timedelta(days=UPCOMING_DAYS) for e in events), day
        day += timedelta(days=1)


def test_the_big_sales_fall_on_their_days() -> None:
    starts = {e.name: e.starts for e in sale_events(date(2025, 1, 1), date(2025, 12, 31))}
    assert starts["618"] <= date(2025, 6, 18)
    assert starts["Double 11"] <= date(2025, 11, 11)
    assert starts["Black Friday"] == date(2025, 11, 28)
    assert date(2025, 7, 8) <= starts["Prime Day"] <= date(2025, 7, 14)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError, match="days"):
        list(generate(1, 0, SEED, END))
    with pytest.raises(ValueError, match="skus"):
        list(generate(-1, 1, SEED, END))
