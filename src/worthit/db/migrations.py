"""Versioned schema migrations, for SQLite and PostgreSQL: the machinery every store's
schema goes through, and no store's tables.

A store (the market, explanations, tenants, …) owns its tables and hands its
`Migration`s here. On SQLite each runs once, in order, inside one transaction, so a store
opened by a newer worthit is upgraded in place and a half-applied migration never
persists; a component's version is its row of `schema_components` (the market's is
SQLite's `user_version`, market/schema.py). On PostgreSQL a component's pending
migrations run in one transaction under an advisory lock, so several processes opening
one database at once migrate it once.
"""

from __future__ import annotations

import re
import sqlite3
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from worthit.db.connection import Connection, is_sqlite


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str
    postgres: str | None = None
    """The PostgreSQL text where the dialects differ; None: `sql` runs on both."""


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer worthit; refusing beats corrupting it."""


_COMPONENTS = """
CREATE TABLE IF NOT EXISTS schema_components (
    component TEXT PRIMARY KEY,
    version   INTEGER NOT NULL
)
"""


_PG_TYPES = (
    (re.compile(r"\s+WITHOUT ROWID"), ""),
    (re.compile(r"\bINTEGER\b"), "BIGINT"),
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    (re.compile(r"\bTEXT\b"), 'TEXT COLLATE "C"'),
)


def postgres_ddl(sql: str) -> str:
    """A component's SQLite DDL in PostgreSQL's words: SQLite's INTEGER and REAL are 64-bit,
    its text compares byte by byte, and WITHOUT ROWID means nothing there. A migration
    that needs more says so in its own `postgres` text."""
    for pattern, replacement in _PG_TYPES:
        sql = pattern.sub(replacement, sql)
    return sql


_RECORD = (
    "INSERT INTO schema_components (component, version) VALUES (?, ?) "
    "ON CONFLICT (component) DO UPDATE SET version = excluded.version"
)


def migrate_component(
    conn: Connection, component: str, migrations: Sequence[Migration]
) -> list[int]:
    """Bring the tables another layer keeps in the market's database up to date.

    A store beside the market (explanations, say) owns its schema and its migrations;
    its version is a row of `schema_components`, so it never moves the market's
    `user_version` and the market never needs to know the table exists.
    """
    if not is_sqlite(conn):
        return _migrate_postgres(conn, component, migrations)
    conn.execute(_COMPONENTS)
    # The version is read under the write lock: two `serve --workers` opening a fresh
    # database at once would otherwise both read 0 and the second fail on "table exists".
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = component_version(conn, component)
        _check_not_newer(component, current, migrations)
        applied = []
        for migration in migrations:
            if current < migration.version:
                _execute(conn, migration, _RECORD, (component, migration.version))
                applied.append(migration.version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied


def component_version(conn: Connection, component: str) -> int:
    row = conn.execute(
        "SELECT version FROM schema_components WHERE component = ?", (component,)
    ).fetchone()
    return int(row[0]) if row else 0


def _check_not_newer(component: str, current: int, migrations: Sequence[Migration]) -> None:
    latest = migrations[-1].version if migrations else 0
    if current > latest:
        raise SchemaTooNewError(
            f"{component} schema is version {current}, this worthit knows up to {latest}"
        )


def _migrate_postgres(
    conn: Connection, component: str, migrations: Sequence[Migration]
) -> list[int]:
    """All of a component's pending migrations in one transaction (PostgreSQL's DDL is
    transactional), behind a lock on the component's name: a second process opening the
    database meanwhile waits, then finds them applied."""
    conn.execute("BEGIN")
    try:
        conn.execute("SELECT pg_advisory_xact_lock(?)", (zlib.crc32(component.encode()),))
        conn.execute(_COMPONENTS)
        current = component_version(conn, component)
        _check_not_newer(component, current, migrations)
        applied = []
        for migration in migrations:
            if current < migration.version:
                conn.execute(migration.postgres or postgres_ddl(migration.sql))
                conn.execute(_RECORD, (component, migration.version))
                applied.append(migration.version)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return applied


def apply_migration(
    conn: Connection, migration: Migration, record: str, params: tuple[object, ...] = ()
) -> None:
    """One migration and the statement recording it, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        _execute(conn, migration, record, params)
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _execute(
    conn: Connection, migration: Migration, record: str, params: tuple[object, ...]
) -> None:
    """A migration's statements and the one recording it, inside the caller's transaction."""
    for statement in _split_statements(migration.sql):
        conn.execute(statement)
    conn.execute(record, params)


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
