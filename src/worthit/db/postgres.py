"""One PostgreSQL database, a pool of connections, the per-connection settings in one place.

The twin of :class:`worthit.db.sqlite.Database` for ``--db postgresql://…``: the
stores hand it the same ``?``-placeholder SQL and the same ``setup`` (their migrations),
and get back connections that behave like SQLite's to them. What differs is kept here:

- placeholders: ``?`` becomes ``%s`` (and a literal ``%`` becomes ``%%``), once per
  statement text, cached;
- connections: a ``psycopg_pool.ConnectionPool`` lends one per statement outside a
  transaction (autocommit, like SQLite's), and one per :meth:`transaction`, which the
  thread's :meth:`connection` returns until it ends, so a store's reads inside its own
  transaction see its own writes, as they do on SQLite;
- concurrency: several processes write at once here, so :meth:`write` runs its work again
  when PostgreSQL chose it as a deadlock's or a serialization failure's victim; the
  claims of event ids are ``ON CONFLICT`` inserts, which wait for the other writer's
  commit and then see its row.

The per-connection settings, made on every new connection (``configure``):

``lock_timeout = 5s``
    The ``busy_timeout`` of SQLite: waiting up to 5 s for another writer's row lock beats
    hanging, and then the write fails as "unavailable" (the caller may retry).
``idle_in_transaction_session_timeout = 60s``
    A client that died inside a transaction does not hold its locks for ever.

A database that does not exist yet is created (as SQLite creates its file).
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from functools import lru_cache
from typing import Any, TypeVar

import psycopg
from psycopg import errors as pg_errors
from psycopg import sql as pg_sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool

from worthit.db.connection import Connection, Errors, Setup

T = TypeVar("T")

POOL_MIN = 1
POOL_MAX = 8
"""Connections a store keeps to the server at most; a thread past them waits its turn."""
POOL_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 5
WRITE_ATTEMPTS = 8
SETTINGS: tuple[tuple[str, str], ...] = (
    ("lock_timeout", "5s"),
    ("idle_in_transaction_session_timeout", "60s"),
)

POSTGRES_ERRORS = Errors(
    integrity=(pg_errors.IntegrityError,),
    row=(pg_errors.IntegrityError, pg_errors.DataError, psycopg.DataError),
    unavailable=(psycopg.OperationalError,),
    transient=(  # SQLSTATE class 40: psycopg gives each its own class, none the other's base
        pg_errors.TransactionRollback,
        pg_errors.SerializationFailure,
        pg_errors.DeadlockDetected,
    ),
)

_TOKENS = re.compile(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|\?|%")


@lru_cache(maxsize=1024)
def placeholders(sql: str) -> str:
    """SQLite's ``?`` as psycopg's ``%s``, a ``%`` as ``%%``; quoted text keeps its ``?``."""

    def swap(match: re.Match[str]) -> str:
        token = match.group(0)
        if token == "?":
            return "%s"
        if token == "%":
            return "%%"
        return token.replace("%", "%%")

    return _TOKENS.sub(swap, sql)


class _Rows:
    """A statement's rows, read before its connection went back to the pool."""

    __slots__ = ("_rows", "rowcount")

    def __init__(self, rows: list[Any], rowcount: int) -> None:
        self._rows = rows
        self.rowcount = rowcount

    def fetchone(self) -> Any:
        return self._rows.pop(0) if self._rows else None

    def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())


class _Session:
    """A connection held for a transaction (or for the set-up): statements run on it."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.raw = conn

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status == TransactionStatus.INTRANS

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> psycopg.Cursor[Any]:
        if parameters:
            return self.raw.execute(placeholders(sql), parameters)
        return self.raw.execute(sql)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> psycopg.Cursor[Any]:
        cursor = self.raw.cursor()
        cursor.executemany(placeholders(sql), parameters)
        return cursor


class _Lender:
    """Outside a transaction: each statement on a pooled connection, in autocommit."""

    in_transaction = False

    def __init__(self, pool: ConnectionPool[Any]) -> None:
        self._pool = pool

    def execute(self, sql: str, parameters: Sequence[Any] = (), /) -> _Rows:
        with self._pool.connection() as conn:
            cursor = _Session(conn).execute(sql, parameters)
            rows = cursor.fetchall() if cursor.description is not None else []
            return _Rows(rows, cursor.rowcount)

    def executemany(self, sql: str, parameters: Iterable[Sequence[Any]], /) -> _Rows:
        with self._pool.connection() as conn, conn.transaction():
            cursor = _Session(conn).executemany(sql, parameters)
            return _Rows([], cursor.rowcount)


class PostgresDatabase:
    """The PostgreSQL database at `url`: a pool, its settings, set-up and transactions.

    ``setup`` runs once, on a connection of its own, when the database is opened; the
    pool opens after it, and again on first use after :meth:`close`.
    """

    dialect = "postgresql"
    errors = POSTGRES_ERRORS

    def __init__(self, url: str, setup: Setup | None = None) -> None:
        self.url = url
        self.path = url
        self._lock = threading.Lock()
        self._local = threading.local()
        self._pool: ConnectionPool[Any] | None = None
        conn = _connect(url)
        try:
            if setup is not None:
                setup(_Session(conn))
        finally:
            conn.close()

    def connection(self) -> Connection:
        """The thread's transaction while one is open, else a lender of pooled connections."""
        session: _Session | None = getattr(self._local, "session", None)
        if session is not None:
            return session
        return _Lender(self._pool_())

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A write transaction: committed if the block ends normally, rolled back if not.
        Not reentrant."""
        if getattr(self._local, "session", None) is not None:
            raise RuntimeError("transaction() is not reentrant")
        with self._pool_().connection() as conn, conn.transaction():
            self._local.session = _Session(conn)
            try:
                yield self._local.session
            finally:
                self._local.session = None

    @contextmanager
    def savepoint(self) -> Iterator[Connection]:
        """Inside :meth:`transaction`: a failing block undoes only its own writes."""
        session: _Session | None = getattr(self._local, "session", None)
        if session is None:
            raise RuntimeError("savepoint() belongs inside transaction()")
        with session.raw.transaction():
            yield session

    def pipeline(self) -> AbstractContextManager[object]:
        """Inside :meth:`transaction`: statements sent without waiting for each answer,
        all answered at the block's end (a row count read before it waits for it)."""
        session: _Session | None = getattr(self._local, "session", None)
        if session is None:
            return nullcontext()
        return session.raw.pipeline()

    def write(self, work: Callable[[Connection], T]) -> T:
        """`work` in one transaction, run again (a few times, after a short random pause)
        when a concurrent writer made PostgreSQL roll it back."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                with self.transaction() as conn:
                    return work(conn)
            except self.errors.transient:
                if attempt == WRITE_ATTEMPTS:
                    raise
                time.sleep(random.uniform(0, 0.01 * 2**attempt))
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """Close the pool; closing twice is harmless, a later use opens a new one."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()

    def __enter__(self) -> PostgresDatabase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _pool_(self) -> ConnectionPool[Any]:
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.url,
                    min_size=POOL_MIN,
                    max_size=POOL_MAX,
                    kwargs={"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S},
                    configure=_configure,
                    timeout=POOL_TIMEOUT_S,
                    name="worthit",
                    open=True,
                )
            return self._pool


def _configure(conn: psycopg.Connection[Any]) -> None:
    for name, value in SETTINGS:
        conn.execute(
            pg_sql.SQL("SET {} = {}").format(pg_sql.Identifier(name), pg_sql.Literal(value))
        )


def _connect(url: str) -> psycopg.Connection[Any]:
    """A first connection, creating the database when it does not exist yet."""
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.OperationalError as exc:
        if 'database "' not in str(exc) or "does not exist" not in str(exc):
            raise
        _create_database(url)
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
    _configure(conn)
    return conn


def _create_database(url: str) -> None:
    params = conninfo_to_dict(url)
    name = str(params.get("dbname") or params.get("user") or "")
    if not name:
        raise psycopg.OperationalError(f"no database named in {url!r}")
    params.pop("options", None)
    admin = make_conninfo("", **{**params, "dbname": "postgres"})
    with (
        psycopg.connect(admin, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S) as conn,
        suppress(pg_errors.DuplicateDatabase),  # another process made it meanwhile
    ):
        conn.execute(pg_sql.SQL("CREATE DATABASE {}").format(pg_sql.Identifier(name)))
