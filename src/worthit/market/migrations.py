"""Versioned schema migrations for the embedded SQLite store.

`PRAGMA user_version` holds the schema version; each migration runs once, in order,
inside one transaction, so a store opened by a newer worthit is upgraded in place
and a half-applied migration never persists.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


_V1_BASE = """
CREATE TABLE products (
    sku        TEXT PRIMARY KEY,
    title      TEXT NOT NULL,
    brand      TEXT NOT NULL DEFAULT '',
    category   TEXT NOT NULL DEFAULT '',
    attributes TEXT NOT NULL DEFAULT '{}',
    aliases    TEXT NOT NULL DEFAULT '[]'
);
CREATE INDEX products_category ON products(category);

CREATE TABLE prices (
    sku        TEXT NOT NULL REFERENCES products(sku),
    ts         INTEGER NOT NULL,
    price      REAL NOT NULL,
    currency   TEXT NOT NULL,
    list_price REAL,
    PRIMARY KEY (sku, ts)
) WITHOUT ROWID;

CREATE TABLE stock (
    sku      TEXT NOT NULL REFERENCES products(sku),
    ts       INTEGER NOT NULL,
    quantity INTEGER NOT NULL,
    PRIMARY KEY (sku, ts)
) WITHOUT ROWID;

CREATE TABLE reviews (
    sku       TEXT NOT NULL REFERENCES products(sku),
    review_id TEXT NOT NULL,
    ts        INTEGER NOT NULL,
    rating    INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    text      TEXT NOT NULL DEFAULT '',
    verified  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (sku, review_id)
);
CREATE INDEX reviews_sku_ts ON reviews(sku, ts);

CREATE TABLE promotions (
    sku     TEXT NOT NULL REFERENCES products(sku),
    name    TEXT NOT NULL,
    starts  INTEGER NOT NULL,
    ends    INTEGER NOT NULL,
    price   REAL NOT NULL,
    PRIMARY KEY (sku, name, starts)
) WITHOUT ROWID;
CREATE INDEX promotions_sku_ends ON promotions(sku, ends);

CREATE TABLE sales (
    sku   TEXT NOT NULL REFERENCES products(sku),
    day   TEXT NOT NULL,
    units INTEGER NOT NULL,
    PRIMARY KEY (sku, day)
) WITHOUT ROWID;
CREATE INDEX sales_day ON sales(day);
"""

# v2: full-text search and a per-product revision that every input bumps, so the
# facts version can change whenever any input to it changes without rescanning.
_V2_SEARCH_AND_REVISIONS = """
ALTER TABLE products ADD COLUMN revision INTEGER NOT NULL DEFAULT 0;
ALTER TABLE products ADD COLUMN last_input_ms INTEGER NOT NULL DEFAULT 0;

UPDATE products SET
    revision = 1
        + (SELECT count(*) FROM prices p WHERE p.sku = products.sku)
        + (SELECT count(*) FROM stock s WHERE s.sku = products.sku)
        + (SELECT count(*) FROM reviews r WHERE r.sku = products.sku)
        + (SELECT count(*) FROM promotions m WHERE m.sku = products.sku)
        + (SELECT count(*) FROM sales d WHERE d.sku = products.sku),
    last_input_ms = max(
        coalesce((SELECT max(ts) FROM prices p WHERE p.sku = products.sku), 0),
        coalesce((SELECT max(ts) FROM stock s WHERE s.sku = products.sku), 0),
        coalesce((SELECT max(ts) FROM reviews r WHERE r.sku = products.sku), 0));

CREATE VIRTUAL TABLE product_search USING fts5(
    sku UNINDEXED, title, brand, aliases, tokenize = 'trigram'
);
INSERT INTO product_search (sku, title, brand, aliases)
    SELECT sku, title, brand,
           (SELECT coalesce(group_concat(value, ' '), '') FROM json_each(products.aliases))
    FROM products;

CREATE TRIGGER products_search_insert AFTER INSERT ON products BEGIN
    INSERT INTO product_search (sku, title, brand, aliases) VALUES (
        NEW.sku, NEW.title, NEW.brand,
        (SELECT coalesce(group_concat(value, ' '), '') FROM json_each(NEW.aliases)));
END;
CREATE TRIGGER products_search_update AFTER UPDATE OF title, brand, aliases ON products BEGIN
    DELETE FROM product_search WHERE sku = OLD.sku;
    INSERT INTO product_search (sku, title, brand, aliases) VALUES (
        NEW.sku, NEW.title, NEW.brand,
        (SELECT coalesce(group_concat(value, ' '), '') FROM json_each(NEW.aliases)));
END;
CREATE TRIGGER products_search_delete AFTER DELETE ON products BEGIN
    DELETE FROM product_search WHERE sku = OLD.sku;
END;
"""


_SERIES = ("prices", "stock", "reviews", "promotions", "sales")


def _bump_triggers(tables: tuple[str, ...] = _SERIES) -> str:
    parts = []
    observed = {"prices": "NEW.ts", "stock": "NEW.ts", "reviews": "NEW.ts"}
    for table in tables:
        seen = observed.get(table, "0")
        for event in ("INSERT", "UPDATE"):
            parts.append(
                f"CREATE TRIGGER {table}_bump_{event.lower()} AFTER {event} ON {table} BEGIN\n"
                f"    UPDATE products SET revision = revision + 1,\n"
                f"        last_input_ms = max(last_input_ms, {seen})\n"
                f"    WHERE sku = NEW.sku;\nEND;"
            )
        parts.append(
            f"CREATE TRIGGER {table}_bump_delete AFTER DELETE ON {table} BEGIN\n"
            f"    UPDATE products SET revision = revision + 1 WHERE sku = OLD.sku;\nEND;"
        )
    return "\n".join(parts)


# v3: covering indexes for rankings over a time window (top sellers, top rated), so a
# category's top-n reads only index pages.
_V3_WINDOW_INDEXES = """
CREATE INDEX sales_day_covering ON sales(day, sku, units);
DROP INDEX sales_day;
CREATE INDEX reviews_ts_covering ON reviews(ts, sku, rating);
"""

# v4: the ids of applied events (market/apply.py), written in the transaction of the
# event's effect, so a redelivered event finds its id and changes nothing.
_V4_APPLIED_EVENTS = """
CREATE TABLE applied_events (
    event_id   TEXT PRIMARY KEY,
    source     TEXT NOT NULL,
    applied_ms INTEGER NOT NULL
) WITHOUT ROWID;
"""

# v5: promotions of other kinds than a promotional price (market/records.py
# PromotionKind). SQLite cannot drop the NOT NULL from `price`, so the table is rebuilt;
# its triggers go with the old table and are made again. Copying the rows bumps no
# revision: the new table has no triggers yet, and dropping a table fires none.
_V5_PROMOTION_KINDS = """
CREATE TABLE promotions_v5 (
    sku         TEXT NOT NULL REFERENCES products(sku),
    name        TEXT NOT NULL,
    starts      INTEGER NOT NULL,
    ends        INTEGER NOT NULL,
    kind        TEXT NOT NULL DEFAULT 'price'
                CHECK (kind IN ('price', 'percent', 'threshold', 'coupon')),
    price       REAL,
    percent_off REAL,
    threshold   REAL,
    save        REAL,
    min_spend   REAL,
    PRIMARY KEY (sku, name, starts)
) WITHOUT ROWID;
INSERT INTO promotions_v5 (sku, name, starts, ends, price)
    SELECT sku, name, starts, ends, price FROM promotions;
DROP TABLE promotions;
ALTER TABLE promotions_v5 RENAME TO promotions;
CREATE INDEX promotions_sku_ends ON promotions(sku, ends);
"""

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "base tables", _V1_BASE),
    Migration(2, "search index and revisions", _V2_SEARCH_AND_REVISIONS + _bump_triggers()),
    Migration(3, "covering indexes for window rankings", _V3_WINDOW_INDEXES),
    Migration(4, "applied event ids", _V4_APPLIED_EVENTS),
    Migration(5, "promotion kinds", _V5_PROMOTION_KINDS + _bump_triggers(("promotions",))),
)

LATEST_VERSION = MIGRATIONS[-1].version


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer worthit; refusing beats corrupting it."""


def schema_version(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection, target: int = LATEST_VERSION) -> list[int]:
    """Bring the market's schema up to `target`; returns the versions applied."""
    current = schema_version(conn)
    if current > LATEST_VERSION:
        raise SchemaTooNewError(
            f"database schema is version {current}, this worthit knows up to {LATEST_VERSION}"
        )
    applied = []
    for migration in MIGRATIONS:
        if current < migration.version <= target:
            _apply(conn, migration, f"PRAGMA user_version = {migration.version}")
            applied.append(migration.version)
    return applied


_COMPONENTS = """
CREATE TABLE IF NOT EXISTS schema_components (
    component TEXT PRIMARY KEY,
    version   INTEGER NOT NULL
)
"""


def migrate_component(
    conn: sqlite3.Connection, component: str, migrations: Sequence[Migration]
) -> list[int]:
    """Bring the tables another layer keeps in the market's file up to date.

    A store beside the market (explanations, say) owns its schema and its migrations;
    its version is a row of `schema_components`, so it never moves the market's
    `user_version` and the market never needs to know the table exists.
    """
    conn.execute(_COMPONENTS)
    row = conn.execute(
        "SELECT version FROM schema_components WHERE component = ?", (component,)
    ).fetchone()
    current = int(row[0]) if row else 0
    latest = migrations[-1].version if migrations else 0
    if current > latest:
        raise SchemaTooNewError(
            f"{component} schema is version {current}, this worthit knows up to {latest}"
        )
    applied = []
    for migration in migrations:
        if current < migration.version:
            record = (
                "INSERT INTO schema_components (component, version) VALUES (?, ?) "
                "ON CONFLICT (component) DO UPDATE SET version = excluded.version"
            )
            _apply(conn, migration, record, (component, migration.version))
            applied.append(migration.version)
    return applied


def _apply(
    conn: sqlite3.Connection, migration: Migration, record: str, params: tuple[object, ...] = ()
) -> None:
    """One migration and the statement recording it, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        for statement in _split_statements(migration.sql):
            conn.execute(statement)
        conn.execute(record, params)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _split_statements(script: str) -> list[str]:
    """Split on statement ends that sqlite3 itself reports as complete (triggers hold `;`)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements
