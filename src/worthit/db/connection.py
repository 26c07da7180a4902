"""What a store sees of its database, on either backend: a `Connection` with ``?``
placeholders, the `Errors` it tells apart, and the `Store` (`sqlite.Database` or
`postgres.PostgresDatabase`) it opens connections, transactions and savepoints on.

A store writes through :meth:`Store.write`, which PostgreSQL runs again when a concurrent
writer made it fail; it tells the backends' exceptions apart through :class:`Errors`, so
no store imports a driver.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar


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
