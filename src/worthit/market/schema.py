"""The market's schema and its migrations, for SQLite and PostgreSQL.

On SQLite `PRAGMA user_version` holds the market's schema version; each migration runs
once, in order, inside one transaction (db/migrations.py). PostgreSQL has no
user_version: there the market's version is the `market` row of `schema_components`,
like every other component's; the market starts at SQLite's v5 in one migration
(`POSTGRES_MIGRATIONS`: no PostgreSQL store predates it) and follows SQLite's chain
from there.
"""

from __future__ import annotations

from worthit.db.connection import Connection, is_sqlite
from worthit.db.migrations import (
    Migration,
    SchemaTooNewError,
    apply_migration,
    component_version,
    migrate_component,
)

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

# v6: event ids are unique per source, not across sources: a sender can neither
# pre-empt another's ids nor have its own taken. Existing claims keep their source.
_V6_EVENT_IDS_PER_SOURCE = """
CREATE TABLE applied_events_v6 (
    source     TEXT NOT NULL,
    event_id   TEXT NOT NULL,
    applied_ms INTEGER NOT NULL,
    PRIMARY KEY (source, event_id)
) WITHOUT ROWID;
INSERT INTO applied_events_v6 (source, event_id, applied_ms)
    SELECT source, event_id, applied_ms FROM applied_events;
DROP TABLE applied_events;
ALTER TABLE applied_events_v6 RENAME TO applied_events;
"""
_PG_V6_EVENT_IDS_PER_SOURCE = """
ALTER TABLE applied_events DROP CONSTRAINT applied_events_pkey;
ALTER TABLE applied_events ALTER COLUMN source TYPE TEXT COLLATE "C";
ALTER TABLE applied_events ADD PRIMARY KEY (source, event_id);
"""

# v7: when a promotion was announced (epoch ms), so an answer as of an earlier moment does
# not know of it. NULL for the rows stored before: they keep the notice taken until now
# (facts/builder.py PROMOTION_NOTICE_DAYS before they start).
_V7_PROMOTION_ANNOUNCED = "ALTER TABLE promotions ADD COLUMN announced INTEGER;"
_PG_V7_PROMOTION_ANNOUNCED = "ALTER TABLE promotions ADD COLUMN announced BIGINT;"

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "base tables", _V1_BASE),
    Migration(2, "search index and revisions", _V2_SEARCH_AND_REVISIONS + _bump_triggers()),
    Migration(3, "covering indexes for window rankings", _V3_WINDOW_INDEXES),
    Migration(4, "applied event ids", _V4_APPLIED_EVENTS),
    Migration(5, "promotion kinds", _V5_PROMOTION_KINDS + _bump_triggers(("promotions",))),
    Migration(6, "event ids per source", _V6_EVENT_IDS_PER_SOURCE),
    Migration(7, "promotion announcements", _V7_PROMOTION_ANNOUNCED),
)

LATEST_VERSION = MIGRATIONS[-1].version

# The market on PostgreSQL: the tables, indexes and revision triggers of SQLite's v5, in
# PostgreSQL's types (64-bit times, double precision prices, byte-order "C" text as SQLite
# compares it). Search reads `products` itself (store.py), so there is no FTS table.
_PG_OBSERVED = ("prices", "stock", "reviews")
_PG_MARKET = """
CREATE TABLE products (
    sku           TEXT COLLATE "C" PRIMARY KEY,
    title         TEXT COLLATE "C" NOT NULL,
    brand         TEXT COLLATE "C" NOT NULL DEFAULT '',
    category      TEXT COLLATE "C" NOT NULL DEFAULT '',
    attributes    TEXT NOT NULL DEFAULT '{}',
    aliases       TEXT NOT NULL DEFAULT '[]',
    revision      BIGINT NOT NULL DEFAULT 0,
    last_input_ms BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX products_category ON products(category);

CREATE TABLE prices (
    sku        TEXT COLLATE "C" NOT NULL REFERENCES products(sku),
    ts         BIGINT NOT NULL,
    price      DOUBLE PRECISION NOT NULL,
    currency   TEXT NOT NULL,
    list_price DOUBLE PRECISION,
    PRIMARY KEY (sku, ts)
);

CREATE TABLE stock (
    sku      TEXT COLLATE "C" NOT NULL REFERENCES products(sku),
    ts       BIGINT NOT NULL,
    quantity BIGINT NOT NULL,
    PRIMARY KEY (sku, ts)
);

CREATE TABLE reviews (
    sku       TEXT COLLATE "C" NOT NULL REFERENCES products(sku),
    review_id TEXT COLLATE "C" NOT NULL,
    ts        BIGINT NOT NULL,
    rating    INTEGER NOT NULL CHECK (rating BETWEEN 1 AND 5),
    text      TEXT NOT NULL DEFAULT '',
    verified  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (sku, review_id)
);
CREATE INDEX reviews_sku_ts ON reviews(sku, ts);
CREATE INDEX reviews_ts_covering ON reviews(ts, sku, rating);

CREATE TABLE promotions (
    sku         TEXT COLLATE "C" NOT NULL REFERENCES products(sku),
    name        TEXT COLLATE "C" NOT NULL,
    starts      BIGINT NOT NULL,
    ends        BIGINT NOT NULL,
    kind        TEXT NOT NULL DEFAULT 'price'
                CHECK (kind IN ('price', 'percent', 'threshold', 'coupon')),
    price       DOUBLE PRECISION,
    percent_off DOUBLE PRECISION,
    threshold   DOUBLE PRECISION,
    save        DOUBLE PRECISION,
    min_spend   DOUBLE PRECISION,
    PRIMARY KEY (sku, name, starts)
);
CREATE INDEX promotions_sku_ends ON promotions(sku, ends);

CREATE TABLE sales (
    sku   TEXT COLLATE "C" NOT NULL REFERENCES products(sku),
    day   TEXT COLLATE "C" NOT NULL,
    units BIGINT NOT NULL,
    PRIMARY KEY (sku, day)
);
CREATE INDEX sales_day_covering ON sales(day, sku, units);

CREATE TABLE applied_events (
    event_id   TEXT COLLATE "C" PRIMARY KEY,
    source     TEXT NOT NULL,
    applied_ms BIGINT NOT NULL
);

CREATE FUNCTION worthit_bump_observed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE products SET revision = revision + 1 WHERE sku = OLD.sku;
        RETURN OLD;
    END IF;
    UPDATE products SET revision = revision + 1,
        last_input_ms = greatest(last_input_ms, NEW.ts)
    WHERE sku = NEW.sku;
    RETURN NEW;
END $$;

CREATE FUNCTION worthit_bump() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        UPDATE products SET revision = revision + 1 WHERE sku = OLD.sku;
        RETURN OLD;
    END IF;
    UPDATE products SET revision = revision + 1 WHERE sku = NEW.sku;
    RETURN NEW;
END $$;
""" + "\n".join(
    f"CREATE TRIGGER {table}_bump AFTER INSERT OR UPDATE OR DELETE ON {table} "
    f"FOR EACH ROW EXECUTE FUNCTION "
    f"{'worthit_bump_observed' if table in _PG_OBSERVED else 'worthit_bump'}();"
    for table in _SERIES
)

POSTGRES_MIGRATIONS: tuple[Migration, ...] = (
    Migration(5, "market schema", _PG_MARKET, postgres=_PG_MARKET),
    Migration(6, "event ids per source", "", postgres=_PG_V6_EVENT_IDS_PER_SOURCE),
    Migration(7, "promotion announcements", "", postgres=_PG_V7_PROMOTION_ANNOUNCED),
)
MARKET_COMPONENT = "market"


def schema_version(conn: Connection) -> int:
    if not is_sqlite(conn):
        return component_version(conn, MARKET_COMPONENT)
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: Connection, target: int = LATEST_VERSION) -> list[int]:
    """Bring the market's schema up to `target`; returns the versions applied."""
    if not is_sqlite(conn):
        wanted = [m for m in POSTGRES_MIGRATIONS if m.version <= target]
        return migrate_component(conn, MARKET_COMPONENT, wanted)
    current = schema_version(conn)
    if current > LATEST_VERSION:
        raise SchemaTooNewError(
            f"database schema is version {current}, this worthit knows up to {LATEST_VERSION}"
        )
    applied = []
    for migration in MIGRATIONS:
        if current < migration.version <= target:
            apply_migration(conn, migration, f"PRAGMA user_version = {migration.version}")
            applied.append(migration.version)
    return applied
