"""The database helper: pragmas on every connection, one per thread, all closed together."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from worthit.db.sqlite import Database


def in_thread(work: Callable[[], object]) -> object:
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(work()))
    thread.start()
    thread.join()
    return result[0]


def make_table(conn: sqlite3.Connection) -> None:
    conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER PRIMARY KEY)")


@pytest.fixture
def db(tmp_path: Path) -> Database:
    return Database(tmp_path / "d.db", make_table)


def pragmas(conn: sqlite3.Connection) -> tuple[object, ...]:
    return tuple(
        conn.execute(f"PRAGMA {name}").fetchone()[0]
        for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout")
    )


def test_the_pragmas_hold_on_every_threads_connection(db: Database) -> None:
    expected = ("wal", 1, 1, 5000)  # synchronous 1 is NORMAL
    assert pragmas(db.connection()) == expected
    assert in_thread(lambda: pragmas(db.connection())) == expected


def test_each_thread_gets_its_own_connection(db: Database) -> None:
    mine = db.connection()
    assert db.connection() is mine
    theirs = in_thread(db.connection)
    assert isinstance(theirs, sqlite3.Connection) and theirs is not mine


def test_close_closes_every_threads_connection(db: Database) -> None:
    ready, done = threading.Event(), threading.Event()
    theirs: list[sqlite3.Connection] = []

    def worker() -> None:
        theirs.append(db.connection())
        ready.set()
        done.wait()

    thread = threading.Thread(target=worker)
    thread.start()
    ready.wait()
    mine = db.connection()
    db.close()
    db.close()  # twice is harmless
    try:
        for conn in (mine, theirs[0]):
            with pytest.raises(sqlite3.ProgrammingError):
                conn.execute("SELECT 1")
    finally:
        done.set()
        thread.join()
    assert db.connection().execute("SELECT count(*) FROM t").fetchone() == (0,)
    db.close()


def test_setup_runs_once_when_opened(tmp_path: Path) -> None:
    calls: list[sqlite3.Connection] = []
    db = Database(tmp_path / "d.db", calls.append)
    assert len(calls) == 1
    in_thread(db.connection)
    db.close()
    db.connection()
    assert len(calls) == 1
    db.close()


def test_a_file_that_is_not_sqlite_is_refused_at_open(tmp_path: Path) -> None:
    path = tmp_path / "not.db"
    path.write_bytes(b"this is not sqlite, not even close" * 10)
    with pytest.raises(sqlite3.DatabaseError, match="not a database"):
        Database(path, make_table)


def test_a_failed_setup_propagates(tmp_path: Path) -> None:
    def refuse(conn: sqlite3.Connection) -> None:
        raise RuntimeError("schema too new")

    with pytest.raises(RuntimeError, match="schema too new"):
        Database(tmp_path / "d.db", refuse)


def count(db: Database) -> int:
    return int(db.connection().execute("SELECT count(*) FROM t").fetchone()[0])


def test_a_transaction_commits_or_rolls_back_as_a_whole(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(ZeroDivisionError), db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (2)")
        _ = 1 / 0
    assert count(db) == 1
    assert in_thread(lambda: count(db)) == 1


def test_a_savepoint_undoes_only_its_own_writes(db: Database) -> None:
    with db.transaction() as conn:
        conn.execute("INSERT INTO t VALUES (1)")
        with pytest.raises(sqlite3.IntegrityError), db.savepoint():
            conn.execute("INSERT INTO t VALUES (2)")
            conn.execute("INSERT INTO t VALUES (1)")
        with db.savepoint():
            conn.execute("INSERT INTO t VALUES (3)")
    assert [row[0] for row in db.connection().execute("SELECT x FROM t ORDER BY x")] == [1, 3]


def test_a_savepoint_outside_a_transaction_is_refused(db: Database) -> None:
    with pytest.raises(RuntimeError), db.savepoint():
        pass


def test_writers_in_many_threads_take_turns(db: Database) -> None:
    def write(start: int) -> None:
        for x in range(start, start + 25):
            with db.transaction() as conn:
                conn.execute("INSERT INTO t VALUES (?)", (x,))

    threads = [threading.Thread(target=write, args=(n * 25,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert count(db) == 100
