"""One SQLite file, one connection per thread, the pragmas in one place.

Every store on the file (market, tenants, and whatever joins them) opens it through
:class:`Database`, so they agree on how it is opened and none of them repeats it. Each
store keeps its own SQL and its own schema, handed over as the ``setup`` callable.

`open_database` opens a ``postgresql://`` URL as ``market.postgres.PostgresDatabase``
instead, the twin of :class:`Database` (a pool of connections, their settings, the same
``?`` SQL): a store sees either as a :class:`Store`, tells their exceptions apart through
:class:`Errors`, and writes through :meth:`Store.write`, which PostgreSQL runs again when a
concurrent writer made it fail.

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

import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

BUSY_TIMEOUT_MS = 5000
PRAGMAS: tuple[tuple[str, str], ...] = (
    ("busy_timeout", str(BUSY_TIMEOUT_MS)),
    ("journal_mode", "WAL"),
    ("synchronous", "NORMAL"),
    ("foreign_keys", "ON"),
)


class Cursor(Protocol):
    """What a statement returns, on either backend (sqlite3's cursor, or psycopg's)."""

    @property
    def rowcount(self) -> int: ...
    def fetchone(self) -> Any: ...
    def fetchall(self) -> Sequence[Any]: ...
    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """One connection as the stores use it: SQL with ``?`` placeholders on both backends
    (the PostgreSQL side translates them), and whether a transaction is still open."""

    @property
    def in_transaction(self) -> bool: ...
    def execute(self, sql: str, parameters: Sequence[Any] = ..., /) -> Cursor: ...
    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> Cursor: ...


Setup = Callable[[Connection], object]
T = TypeVar("T")


@dataclass(frozen=True)
class Errors:
    """The exceptions a store tells apart, per backend, so no store imports a driver."""

    integrity: tuple[type[Exception], ...]
    """A constraint refused the row (a duplicate key, a CHECK)."""
    row: tuple[type[Exception], ...]
    """What one row's values can cause; the transaction goes on after its savepoint."""
    unavailable: tuple[type[Exception], ...]
    """The database is locked, full, gone or unreachable: the whole write failed."""
    transient: tuple[type[Exception], ...]
    """A concurrent writer won (a deadlock, a serialization failure): run it again."""


SQLITE_ERRORS = Errors(
    integrity=(sqlite3.IntegrityError,),
    row=(sqlite3.IntegrityError, sqlite3.DataError, sqlite3.InterfaceError),
    unavailable=(sqlite3.OperationalError,),
    transient=(),
)

POSTGRES_SCHEMES = ("postgresql", "postgres")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")
"""A URL's scheme (two characters at least, so a Windows drive is still a path). A Path
folds "postgresql://host/db" into "postgresql:/host/db", so one slash is enough."""


def url_scheme(target: str | Path) -> str | None:
    """The scheme of a database URL, None for a file path."""
    match = _URL.match(str(target))
    return match.group(1).lower() if match else None


def is_postgres(target: str | Path) -> bool:
    return url_scheme(target) in POSTGRES_SCHEMES


def is_sqlite(conn: Connection) -> bool:
    """Which dialect a migration speaks on this connection."""
    return isinstance(conn, sqlite3.Connection)


class Store(Protocol):
    """What every store's ``_db`` is: :class:`Database`, or ``PostgresDatabase``."""

    dialect: str
    errors: Errors

    def connection(self) -> Connection: ...
    def transaction(self) -> AbstractContextManager[Connection]: ...
    def savepoint(self) -> AbstractContextManager[Connection]: ...
    def pipeline(self) -> AbstractContextManager[object]: ...
    def write(self, work: Callable[[Connection], T]) -> T: ...
    def close(self) -> None: ...


def open_database(target: str | Path, setup: Setup | None = None) -> Store:
    """The database at `target`: a SQLite file path, or a ``postgresql://`` URL.

    psycopg is imported only for a URL, so the embedded default never pays for it."""
    if is_postgres(target):
        from worthit.market.postgres import PostgresDatabase

        return PostgresDatabase(str(target), setup)
    return Database(target, setup)


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
