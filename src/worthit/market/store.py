"""The market store: embedded SQLite in WAL mode, or PostgreSQL (`--db postgresql://…`).

Writes are idempotent upserts: applying the same record twice changes nothing, not
even a product's revision, because an upsert only touches a row whose values differ.
The SQL is one text for both databases; the statement where they differ (a list
parameter) is `_SqliteQueries` and `_PostgresQueries`. Product search is not here: it is
an index the decide layer builds from `all_names` (decide/search_index.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from worthit.db.connection import Connection, Errors
from worthit.db.open import open_database
from worthit.market.entities import (
    PricePoint,
    Product,
    Promotion,
    Review,
    SalesDay,
    SearchHit,
    StockLevel,
)
from worthit.market.records import (
    PriceRecord,
    ProductRecord,
    PromotionRecord,
    Record,
    ReviewRecord,
    SalesRecord,
    StockRecord,
)
from worthit.market.schema import migrate


class UnknownSkuError(ValueError):
    """A record refers to a product the store has never seen."""

    def __init__(self, sku: str) -> None:
        super().__init__(f"unknown sku {sku!r}: import its product line first")
        self.sku = sku


@dataclass
class ApplyStats:
    """How many records changed the store; a re-import of the same data reports zero."""

    written: int = 0
    unchanged: int = 0


_UPSERT_PRODUCT = """
INSERT INTO products (sku, title, brand, category, attributes, aliases, revision)
VALUES (?, ?, ?, ?, ?, ?, 1)
ON CONFLICT (sku) DO UPDATE SET
    title = excluded.title, brand = excluded.brand, category = excluded.category,
    attributes = excluded.attributes, aliases = excluded.aliases,
    revision = products.revision + 1
WHERE (products.title, products.brand, products.category, products.attributes, products.aliases)
   IS DISTINCT FROM
   (excluded.title, excluded.brand, excluded.category, excluded.attributes, excluded.aliases)
"""
_UPSERT_PRICE = """
INSERT INTO prices (sku, ts, price, currency, list_price) VALUES (?, ?, ?, ?, ?)
ON CONFLICT (sku, ts) DO UPDATE SET
    price = excluded.price, currency = excluded.currency, list_price = excluded.list_price
WHERE (prices.price, prices.currency, prices.list_price)
   IS DISTINCT FROM (excluded.price, excluded.currency, excluded.list_price)
"""
_UPSERT_STOCK = """
INSERT INTO stock (sku, ts, quantity) VALUES (?, ?, ?)
ON CONFLICT (sku, ts) DO UPDATE SET quantity = excluded.quantity
WHERE stock.quantity IS DISTINCT FROM excluded.quantity
"""
_UPSERT_REVIEW = """
INSERT INTO reviews (sku, review_id, ts, rating, text, verified) VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (sku, review_id) DO UPDATE SET
    ts = excluded.ts, rating = excluded.rating, text = excluded.text, verified = excluded.verified
WHERE (reviews.ts, reviews.rating, reviews.text, reviews.verified)
   IS DISTINCT FROM (excluded.ts, excluded.rating, excluded.text, excluded.verified)
"""
_EARLIEST_ANNOUNCED = """CASE WHEN promotions.announced IS NULL
        OR excluded.announced < promotions.announced
    THEN excluded.announced ELSE promotions.announced END"""
"""A promotion sent again keeps the earliest announcement known: a redelivery, received
later, does not make it news again, and NULL (not known) gives way to a moment."""
_UPSERT_PROMOTION = f"""
INSERT INTO promotions
    (sku, name, starts, ends, kind, price, percent_off, threshold, save, min_spend, announced)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (sku, name, starts) DO UPDATE SET
    ends = excluded.ends, kind = excluded.kind, price = excluded.price,
    percent_off = excluded.percent_off, threshold = excluded.threshold,
    save = excluded.save, min_spend = excluded.min_spend, announced = {_EARLIEST_ANNOUNCED}
WHERE (promotions.ends, promotions.kind, promotions.price, promotions.percent_off,
       promotions.threshold, promotions.save, promotions.min_spend, promotions.announced)
   IS DISTINCT FROM (excluded.ends, excluded.kind, excluded.price, excluded.percent_off,
       excluded.threshold, excluded.save, excluded.min_spend, {_EARLIEST_ANNOUNCED})
"""
_CLAIM_EVENT = """
INSERT INTO applied_events (event_id, source, applied_ms) VALUES (?, ?, ?)
ON CONFLICT (source, event_id) DO NOTHING
"""
_UPSERT_SALES = """
INSERT INTO sales (sku, day, units) VALUES (?, ?, ?)
ON CONFLICT (sku, day) DO UPDATE SET units = excluded.units
WHERE sales.units IS DISTINCT FROM excluded.units
"""


T = TypeVar("T")


class _SqliteQueries:
    current_prices = (
        "SELECT j.value, (SELECT price FROM prices WHERE sku = j.value AND ts <= ?"
        " ORDER BY ts DESC LIMIT 1) FROM json_each(?) AS j"
    )


class _PostgresQueries:
    current_prices = (
        "SELECT j.value, (SELECT price FROM prices WHERE sku = j.value AND ts <= ?"
        " ORDER BY ts DESC LIMIT 1) FROM json_array_elements_text(CAST(? AS json)) AS j(value)"
    )


class MarketStore:
    """Products and their time series; the only module that speaks SQL."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._known_skus: set[str] | None = None
        self._db = open_database(path, migrate)
        self._queries = _SqliteQueries if self._db.dialect == "sqlite" else _PostgresQueries

    @property
    def errors(self) -> Errors:
        """The exceptions of this store's database (one row's, or the whole write's)."""
        return self._db.errors

    def _conn(self) -> Connection:
        return self._db.connection()

    def close(self) -> None:
        """Close every thread's connection; a later call opens afresh."""
        self._db.close()

    def __enter__(self) -> MarketStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """One write transaction; a failed one also forgets the skus it may have added."""
        try:
            with self._db.transaction() as conn:
                yield conn
        except BaseException:
            self._known_skus = None
            raise

    def write(self, work: Callable[[Connection], T]) -> T:
        """`work` in one transaction, run again when a concurrent writer made PostgreSQL
        roll it back (so `work` must start afresh each time); SQLite runs it once."""
        try:
            return self._db.write(work)
        except BaseException:
            self._known_skus = None
            raise

    def savepoint(self) -> AbstractContextManager[Connection]:
        """Inside :meth:`transaction`: a failing block undoes only its own writes."""
        return self._db.savepoint()

    # --- writes -------------------------------------------------------------------

    def apply(self, records: Iterable[Record]) -> ApplyStats:
        """Apply records in one transaction; an unknown sku aborts the whole batch."""
        batch = list(records)

        def work(conn: Connection) -> ApplyStats:
            stats = ApplyStats()
            for record in batch:
                if self.apply_one(conn, record):
                    stats.written += 1
                else:
                    stats.unchanged += 1
            return stats

        return self.write(work)

    def apply_one(self, conn: Connection, record: Record) -> bool:
        """Write one record inside an open transaction; True when the store changed."""
        if not isinstance(record, ProductRecord) and not self.has_sku(record.sku):
            raise UnknownSkuError(record.sku)
        changed = conn.execute(*_upsert(record)).rowcount > 0
        if isinstance(record, ProductRecord):
            self._skus().add(record.sku)
        return changed

    def apply_records(self, conn: Connection, records: Sequence[Record]) -> list[bool]:
        """:meth:`apply_one` for each, in order, pipelined (on PostgreSQL one round trip
        for them all); which changed the store. A refused one fails the whole call."""
        products: set[str] = set()
        for record in records:
            if isinstance(record, ProductRecord):
                products.add(record.sku)
            elif record.sku not in products and not self.has_sku(record.sku):
                raise UnknownSkuError(record.sku)
        with self._db.pipeline():
            cursors = [conn.execute(*_upsert(record)) for record in records]
        self._skus().update(r.sku for r in records if isinstance(r, ProductRecord))
        return [cursor.rowcount > 0 for cursor in cursors]

    def apply_many(self, conn: Connection, records: Iterable[Record]) -> int:
        """Write series records inside an open transaction, one `executemany` per kind
        (on PostgreSQL one round trip for them all, not one each); how many changed the
        store. Kinds go to different tables, so only the order within a kind is kept."""
        runs: dict[str, list[tuple[object, ...]]] = {}
        for record in records:
            if isinstance(record, ProductRecord):
                raise TypeError("apply_many takes series records; products go first")
            if not self.has_sku(record.sku):
                raise UnknownSkuError(record.sku)
            sql, args = _series_upsert(record)
            runs.setdefault(sql, []).append(args)
        return sum(max(conn.executemany(sql, rows).rowcount, 0) for sql, rows in runs.items())

    def claim_events(
        self, conn: Connection, events: Sequence[tuple[str, str]], applied_ms: int
    ) -> list[bool]:
        """:meth:`claim_event` for each (event id, source), pipelined; which were new."""
        with self._db.pipeline():
            cursors = [conn.execute(_CLAIM_EVENT, (e, s, applied_ms)) for e, s in events]
        return [cursor.rowcount > 0 for cursor in cursors]

    def claim_event(self, conn: Connection, event_id: str, source: str, applied_ms: int) -> bool:
        """Inside a transaction: note `source`'s `event_id` as applied; False when it
        already was. Ids are unique per source, so one source cannot claim another's.

        Written in the transaction of the event's effect, so the id and the effect commit
        or vanish together, and a redelivery after a crash finds exactly one of both.
        """
        return conn.execute(_CLAIM_EVENT, (event_id, source, applied_ms)).rowcount > 0

    def applied_event_count(self) -> int:
        """How many distinct (source, event id) pairs this store has applied."""
        return int(self._conn().execute("SELECT count(*) FROM applied_events").fetchone()[0])

    def has_sku(self, sku: str) -> bool:
        """Known to this process, or written since by another one (checked on a miss)."""
        known = self._skus()
        if sku in known:
            return True
        row = self._conn().execute("SELECT 1 FROM products WHERE sku = ?", (sku,)).fetchone()
        if row is not None:
            known.add(sku)
        return row is not None

    def _skus(self) -> set[str]:
        if self._known_skus is None:
            rows = self._conn().execute("SELECT sku FROM products").fetchall()
            self._known_skus = {row[0] for row in rows}
        return self._known_skus

    # --- reads --------------------------------------------------------------------

    def product(self, sku: str) -> Product | None:
        row = (
            self._conn()
            .execute(
                "SELECT sku, title, brand, category, attributes, aliases, revision, last_input_ms"
                " FROM products WHERE sku = ?",
                (sku,),
            )
            .fetchone()
        )
        return None if row is None else _product(row)

    def revision(self, sku: str) -> tuple[int, int] | None:
        """(revision, last_input_ms): the cheap check a facts cache revalidates with."""
        row = (
            self._conn()
            .execute("SELECT revision, last_input_ms FROM products WHERE sku = ?", (sku,))
            .fetchone()
        )
        return None if row is None else (int(row[0]), int(row[1]))

    def prices(self, sku: str, since_ms: int = 0, until_ms: int | None = None) -> list[PricePoint]:
        rows = (
            self._conn()
            .execute(
                "SELECT ts, price, currency, list_price FROM prices"
                " WHERE sku = ? AND ts >= ? AND ts <= ? ORDER BY ts",
                (sku, since_ms, until_ms if until_ms is not None else 2**62),
            )
            .fetchall()
        )
        return [PricePoint(*row) for row in rows]

    def current_prices(self, skus: Iterable[str], until_ms: int) -> dict[str, float]:
        """Each product's latest price at `until_ms` (one index probe each, in one statement);
        a product with no price yet is left out."""
        rows = (
            self._conn()
            .execute(self._queries.current_prices, (until_ms, json.dumps(list(skus))))
            .fetchall()
        )
        return {row[0]: float(row[1]) for row in rows if row[1] is not None}

    def latest_stock(self, sku: str, until_ms: int | None = None) -> StockLevel | None:
        row = (
            self._conn()
            .execute(
                "SELECT ts, quantity FROM stock WHERE sku = ? AND ts <= ? ORDER BY ts DESC LIMIT 1",
                (sku, until_ms if until_ms is not None else 2**62),
            )
            .fetchone()
        )
        return None if row is None else StockLevel(*row)

    def stock_levels(self, sku: str, until_ms: int | None = None) -> list[StockLevel]:
        """The whole stock series up to `until_ms`: what a replay cuts in memory."""
        rows = (
            self._conn()
            .execute(
                "SELECT ts, quantity FROM stock WHERE sku = ? AND ts <= ? ORDER BY ts",
                (sku, until_ms if until_ms is not None else 2**62),
            )
            .fetchall()
        )
        return [StockLevel(*row) for row in rows]

    def price_span(self) -> tuple[int, int] | None:
        """(first, last) price observation over the whole market, None when there is none:
        the moments an as-of answer or a replay can stand on. Two index probes a product."""
        row = (
            self._conn()
            .execute(
                "SELECT min(f), max(l) FROM (SELECT"
                " (SELECT min(ts) FROM prices WHERE sku = p.sku) AS f,"
                " (SELECT max(ts) FROM prices WHERE sku = p.sku) AS l FROM products p) AS spans"
            )
            .fetchone()
        )
        return None if row is None or row[0] is None else (int(row[0]), int(row[1]))

    def reviews(self, sku: str, until_ms: int | None = None) -> list[Review]:
        rows = (
            self._conn()
            .execute(
                "SELECT review_id, ts, rating, text, verified FROM reviews"
                " WHERE sku = ? AND ts <= ? ORDER BY ts",
                (sku, until_ms if until_ms is not None else 2**62),
            )
            .fetchall()
        )
        return [Review(r[0], r[1], r[2], r[3], bool(r[4])) for r in rows]

    def rating_split(
        self, sku: str, split_ms: int, until_ms: int
    ) -> tuple[int, int, int, int, int]:
        """(earlier count, earlier sum, recent count, recent sum, newest ts) around `split_ms`.

        Aggregated in SQL so the hot path never reads review text it does not show.
        """
        row = (
            self._conn()
            .execute(
                "SELECT coalesce(sum(CASE WHEN ts < ? THEN 1 ELSE 0 END), 0),"
                " coalesce(sum(CASE WHEN ts < ? THEN rating END), 0),"
                " coalesce(sum(CASE WHEN ts >= ? THEN 1 ELSE 0 END), 0),"
                " coalesce(sum(CASE WHEN ts >= ? THEN rating END), 0),"
                " coalesce(max(ts), 0)"
                " FROM reviews WHERE sku = ? AND ts <= ?",
                (split_ms, split_ms, split_ms, split_ms, sku, until_ms),
            )
            .fetchone()
        )
        return int(row[0]), int(row[1]), int(row[2]), int(row[3]), int(row[4])

    def promotions(self, sku: str, ending_after_ms: int = 0) -> list[Promotion]:
        rows = (
            self._conn()
            .execute(
                "SELECT name, starts, ends, price, kind, percent_off, threshold, save, min_spend,"
                " announced FROM promotions"
                " WHERE sku = ? AND ends > ? ORDER BY starts",
                (sku, ending_after_ms),
            )
            .fetchall()
        )
        return [Promotion(*row) for row in rows]

    def sales(self, sku: str, since_day: str, until_day: str = "9999-12-31") -> list[SalesDay]:
        rows = (
            self._conn()
            .execute(
                "SELECT day, units FROM sales WHERE sku = ? AND day >= ? AND day <= ? ORDER BY day",
                (sku, since_day, until_day),
            )
            .fetchall()
        )
        return [SalesDay(*row) for row in rows]

    def category_stats(self, category: str, until_ms: int | None = None) -> tuple[int, float]:
        """(reviews, mean rating) over a category's reviews written by `until_ms`: the
        prior for Bayesian averages."""
        row = (
            self._conn()
            .execute(
                "SELECT count(*), coalesce(avg(r.rating), 0) FROM reviews r"
                " JOIN products p ON p.sku = r.sku WHERE p.category = ? AND r.ts <= ?",
                (category, until_ms if until_ms is not None else 2**62),
            )
            .fetchone()
        )
        return int(row[0]), float(row[1])

    def categories(self) -> list[tuple[str, int]]:
        rows = (
            self._conn()
            .execute("SELECT category, count(*) FROM products GROUP BY category ORDER BY category")
            .fetchall()
        )
        return [(row[0], int(row[1])) for row in rows]

    def top_by_sales(
        self, category: str | None, since_day: str, until_day: str, limit: int
    ) -> list[tuple[str, int]]:
        rows = (
            self._conn()
            .execute(
                "SELECT s.sku, sum(s.units) AS total FROM sales s JOIN products p ON p.sku = s.sku"
                " WHERE (CAST(? AS TEXT) IS NULL OR p.category = ?) AND s.day >= ? AND s.day <= ?"
                " GROUP BY s.sku ORDER BY total DESC, s.sku LIMIT ?",
                (category, category, since_day, until_day, limit),
            )
            .fetchall()
        )
        return [(row[0], int(row[1])) for row in rows]

    def ratings_in_window(
        self, category: str | None, since_ms: int, until_ms: int
    ) -> list[tuple[str, int, float]]:
        """(sku, count, sum) of ratings per product in a window, for top-by-rating."""
        rows = (
            self._conn()
            .execute(
                "SELECT r.sku, count(*), sum(r.rating)"
                " FROM reviews r JOIN products p ON p.sku = r.sku"
                " WHERE (CAST(? AS TEXT) IS NULL OR p.category = ?) AND r.ts >= ? AND r.ts <= ?"
                " GROUP BY r.sku",
                (category, category, since_ms, until_ms),
            )
            .fetchall()
        )
        return [(row[0], int(row[1]), float(row[2])) for row in rows]

    def titles(self, skus: list[str]) -> dict[str, str]:
        if not skus:
            return {}
        marks = ",".join("?" * len(skus))
        rows = (
            self._conn()
            .execute(f"SELECT sku, title FROM products WHERE sku IN ({marks})", skus)
            .fetchall()
        )
        return {row[0]: row[1] for row in rows}

    def all_names(self) -> list[SearchHit]:
        rows = (
            self._conn()
            .execute("SELECT sku, title, brand, category, aliases FROM products ORDER BY sku")
            .fetchall()
        )
        return [_hit(row) for row in rows]

    def count_products(self) -> int:
        return int(self._conn().execute("SELECT count(*) FROM products").fetchone()[0])


def _upsert(record: Record) -> tuple[str, tuple[object, ...]]:
    """The upsert of a record and its parameters."""
    if isinstance(record, ProductRecord):
        return _UPSERT_PRODUCT, (
            record.sku,
            record.title,
            record.brand,
            record.category,
            json.dumps(record.attributes, sort_keys=True, ensure_ascii=False),
            json.dumps(list(record.aliases), ensure_ascii=False),
        )
    return _series_upsert(record)


def _series_upsert(record: Record) -> tuple[str, tuple[object, ...]]:
    """The upsert of a series record and its parameters."""
    if isinstance(record, PriceRecord):
        args: tuple[object, ...] = (
            record.sku,
            record.ts_ms,
            record.price,
            record.currency,
            record.list_price,
        )
        sql = _UPSERT_PRICE
    elif isinstance(record, StockRecord):
        args, sql = (record.sku, record.ts_ms, record.quantity), _UPSERT_STOCK
    elif isinstance(record, ReviewRecord):
        args = (
            record.sku,
            record.review_id,
            record.ts_ms,
            record.rating,
            record.text,
            int(record.verified),
        )
        sql = _UPSERT_REVIEW
    elif isinstance(record, PromotionRecord):
        args = (
            record.sku,
            record.name,
            record.starts_ms,
            record.ends_ms,
            record.kind,
            record.price,
            record.percent_off,
            record.threshold,
            record.save,
            record.min_spend,
            record.announced_ms,
        )
        sql = _UPSERT_PROMOTION
    elif isinstance(record, SalesRecord):
        args, sql = (record.sku, record.date.isoformat(), record.units), _UPSERT_SALES
    else:  # pragma: no cover - the union is closed
        raise TypeError(f"not a market record: {record!r}")
    return sql, args


def _product(row: tuple[object, ...]) -> Product:
    return Product(
        sku=str(row[0]),
        title=str(row[1]),
        brand=str(row[2]),
        category=str(row[3]),
        attributes=json.loads(str(row[4])),
        aliases=tuple(json.loads(str(row[5]))),
        revision=int(row[6]),  # type: ignore[call-overload]
        last_input_ms=int(row[7]),  # type: ignore[call-overload]
    )


def _hit(row: tuple[object, ...]) -> SearchHit:
    return SearchHit(
        sku=str(row[0]),
        title=str(row[1]),
        brand=str(row[2]),
        category=str(row[3]),
        aliases=tuple(json.loads(str(row[4]))),
    )
