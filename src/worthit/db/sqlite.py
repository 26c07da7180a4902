"""One SQLite file, one connection per thread, the pragmas in one place.

Every store on the file (market, tenants, and whatever joins them) opens it through
:class:`Database`, so they agree on how it is opened and none of them repeats it. Each
store keeps its own SQL and its own schema, handed over as the ``setup`` callable.

`open_database` (db/open.py) opens a ``postgresql://`` URL as
``db.postgres.PostgresDatabase`` instead, the twin of :class:`Database` (a pool of
connections, their settings, the same ``?`` SQL); a store sees either as a
``db.connection.Store``.

The pragmas, set on every connection before anything else runs on it:

``busy_timeout = 5000``
    Another process (``worthit import`` or ``keys revoke`` beside a running server) may
    hold the write lock; waiting up to 5 s beats failing with "database is locked".
    Set first, so that the pragmas after it wait too.
``journal_mode = WAL``
    Readers never block the writer nor it them: the server keeps answering while an
    import writes. It is also the first statement to read the file, so a file that is
    not SQLite fails here, when the database is opened.
``synchronous = NORMAL``
    In WAL mode this survives a crash of the process and may lose only the last commits
    on power loss, without an fsync per commit.
``foreign_keys = ON``
    SQLite leaves it off on every new connection; the market's series reference their
    product and must not outlive it.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import TypeVar

from worthit.db.connection import Connection, Errors, Setup

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000
PRAGMAS: tuple[tuple[str, str], ...] = (
    ("busy_timeout", str(BUSY_TIMEOUT_MS)),
    ("journal_mode", "WAL"),
    ("synchronous", "NORMAL"),
    ("foreign_keys", "ON"),
)


SQLITE_ERRORS = Errors(
    integrity=(sqlite3.IntegrityError,),
    row=(sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError),
    unavailable=(sqlite3.OperationalError,),
    transient=(),
)


class Database:
    """The SQLite file at ``path``: connections, pragmas, set-up and transactions.

    Connections are in autocommit mode (``isolation_level=None``), so a statement outside
    :meth:`transaction` commits on its own; ``check_same_thread=False`` lets :meth:`close`
    close another thread's connection. ``setup`` (the owner's schema or migrations) runs
    once, on the first connection, when the database is opened.
    """

    dialect = "sqlite"
    errors = SQLITE_ERRORS

    def __init__(self, path: str | Path, setup: Setup | None = None) -> None:
        self.path = str(path)
        self._lock = threading.Lock()
        self._write_lock = threading.Lock()
        self._local = threading.local()
        self._open: list[tuple[threading.Thread, sqlite3.Connection]] = []
        try:
            conn = self.connection()
            if setup is not None:
                setup(conn)
        except BaseException:
            self.close()
            raise

    def connection(self) -> sqlite3.Connection:
        """This thread's connection, opened on first use (again after :meth:`close`)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = _connect(self.path)
            with self._lock:
                self._close_dead_threads()
                self._open.append((threading.current_thread(), conn))
                self._local.conn = conn
        return conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction: committed if the block ends normally, rolled back if not.

        The in-process lock queues this process's writers, so only another process ever
        makes ``BEGIN IMMEDIATE`` wait on the busy timeout. Not reentrant.
        """
        with self._write_lock:
            conn = self.connection()
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise

    def pipeline(self) -> AbstractContextManager[object]:
        """Statements in a row without a round trip each: SQLite has none to save."""
        return nullcontext()

    def write(self, work: Callable[[Connection], T]) -> T:
        """`work` in one :meth:`transaction`. SQLite has one writer, so nothing to retry;
        the PostgreSQL twin runs it again when a concurrent writer made it fail."""
        with self.transaction() as conn:
            return work(conn)

    @contextmanager
    def savepoint(self) -> Iterator[sqlite3.Connection]:
        """Inside :meth:`transaction`: a failing block undoes only its own writes.

        The exception still propagates, for the caller to decide whether the transaction
        goes on. When SQLite has already abandoned the whole transaction (a full disk,
        say) there is nothing left to roll back to, and ``conn.in_transaction`` is false.
        """
        conn = self.connection()
        if not conn.in_transaction:
            raise RuntimeError("savepoint() belongs inside transaction()")
        conn.execute("SAVEPOINT block")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK TO block")
                conn.execute("RELEASE block")
            raise
        conn.execute("RELEASE block")

    def close(self) -> None:
        """Close every thread's connection (SQLite checkpoints the WAL at the file's last).

        Call it when no thread is mid-statement. Closing twice is harmless, and a later
        :meth:`connection` opens afresh (without running ``setup`` again).
        """
        with self._lock:
            conns = [conn for _, conn in self._open]
            self._open = []
            self._local = threading.local()
        for conn in conns:
            conn.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _close_dead_threads(self) -> None:
        """A finished thread cannot use its connection again: release its file handle."""
        alive = []
        for thread, conn in self._open:
            if thread.is_alive():
                alive.append((thread, conn))
            else:
                conn.close()
        self._open = alive


def _connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    try:
        for name, value in PRAGMAS:
            conn.execute(f"PRAGMA {name} = {value}")
    except BaseException:
        conn.close()
        raise
    return conn
