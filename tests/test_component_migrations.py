"""A store's tables beside the market are migrated once, whoever opens the database first."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from worthit.db.migrations import Migration, component_version, migrate_component

MIGRATIONS = (Migration(1, "notes", "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)"),)


def _connect(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, timeout=30, check_same_thread=False)


def test_a_second_process_waits_for_the_first_and_finds_the_tables_made(tmp_path: Path) -> None:
    """Two `serve --workers` on a fresh database: the first migrates while the second is
    about to; the second must read the version under the write lock, so it finds the
    tables made and applies nothing instead of failing on "table notes already exists"."""
    path = tmp_path / "market.db"
    first, second = _connect(path), _connect(path)
    about_to_lock, first_done = threading.Event(), threading.Event()

    def pause_at_the_lock(sql: str) -> None:
        if sql.startswith("BEGIN IMMEDIATE") and not about_to_lock.is_set():
            about_to_lock.set()
            first_done.wait(timeout=30)

    second.set_trace_callback(pause_at_the_lock)
    result: list[object] = []
    worker = threading.Thread(target=lambda: result.append(_run(second)), daemon=True)
    worker.start()
    assert about_to_lock.wait(timeout=30)
    migrate_component(first, "notes", MIGRATIONS)  # the other worker, all the way through
    first_done.set()
    worker.join(timeout=30)
    assert result == [[]], result
    assert component_version(second, "notes") == 1


def _run(conn: sqlite3.Connection) -> object:
    try:
        return migrate_component(conn, "notes", MIGRATIONS)
    except sqlite3.Error as exc:
        return exc


def test_a_fresh_database_gets_each_migration_once(tmp_path: Path) -> None:
    conn = _connect(tmp_path / "market.db")
    assert migrate_component(conn, "notes", MIGRATIONS) == [1]
    assert migrate_component(conn, "notes", MIGRATIONS) == []
    conn.execute("INSERT INTO notes (body) VALUES ('kept')")
    assert conn.execute("SELECT body FROM notes").fetchall() == [("kept",)]
