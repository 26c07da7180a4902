"""The log's SQLite file, and reading it: leaves, stored subtree hashes, checkpoints.

The log is a file of its own beside the market database (`<market>.audit.db`): it is
append-only and written in batches by one thread, with its own WAL and its own fsync
points, so its writes never wait on the market's and a copy of it (with the public key)
is all an auditor needs.

Tables: `leaves` (index, leaf bytes, their hash, and the tenant and time copied out of
the bytes so the server can scope and the report can select without decoding),
`nodes` (the hash of every perfect subtree of level ≥ 1, keyed `level << 48 | index`:
about one row per leaf, and any proof reads O(log n) of them), `checkpoints` (every
signed tree head), `meta` and `starts` (each writer start and what it found lost).

Reads are safe from any thread: each thread gets its own connection, and WAL lets them
read while the writer writes.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass
from json.encoder import encode_basestring
from pathlib import Path

from worthit.audit import merkle
from worthit.audit.errors import NotAnAuditLogError, TreeRangeError
from worthit.audit.merkle import Piece
from worthit.audit.record import ANSWER, AuditRecord, decode_leaf

SCHEMA_VERSION = 1
LEVEL_SHIFT = 48
BUSY_TIMEOUT_MS = 10_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS leaves (
    idx INTEGER PRIMARY KEY,
    wall_ms INTEGER NOT NULL,
    tenant TEXT,
    hash BLOB NOT NULL,
    data BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS leaves_by_time ON leaves (wall_ms);
CREATE TABLE IF NOT EXISTS nodes (id INTEGER PRIMARY KEY, hash BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS checkpoints (
    tree_size INTEGER PRIMARY KEY,
    root BLOB NOT NULL,
    wall_ms INTEGER NOT NULL,
    note TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS starts (
    id INTEGER PRIMARY KEY,
    wall_ms INTEGER NOT NULL,
    committed INTEGER NOT NULL,
    reserved INTEGER NOT NULL,
    lost INTEGER NOT NULL,
    exact INTEGER NOT NULL,
    reason TEXT NOT NULL
);
"""


def node_id(level: int, index: int) -> int:
    return (level << LEVEL_SHIFT) | index


@dataclass(frozen=True)
class AuditPaths:
    """Where a market's audit log, its signing key and its issue counter live."""

    db: Path
    key: Path
    issued: Path

    @classmethod
    def beside(cls, market_db: Path) -> AuditPaths:
        return cls.of_log(market_db.with_name(f"{market_db.stem}.audit.db"))

    @classmethod
    def of_log(cls, log_db: Path, key: Path | None = None) -> AuditPaths:
        stem = log_db.name.removesuffix(".db")
        return cls(log_db, key or log_db.with_name(f"{stem}.key"), Path(f"{log_db}-issued"))


@dataclass(frozen=True)
class StoredCheckpoint:
    size: int
    root: bytes
    wall_ms: int
    note: str


@dataclass(frozen=True)
class Start:
    """One start of the writer: what it found committed and reserved, and what it lost."""

    wall_ms: int
    committed: int
    reserved: int
    lost: int
    exact: bool
    """True when `lost` counts receipts handed out; False when it is the upper bound
    (every reserved index), because the machine restarted since the counter was written."""
    reason: str


def connect(path: Path, *, read_only: bool = True) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if read_only:
        conn.execute("PRAGMA query_only = 1")
    return conn


def stored_size(conn: sqlite3.Connection) -> int:
    row = conn.execute("SELECT max(idx) FROM leaves").fetchone()
    return 0 if row[0] is None else int(row[0]) + 1


class LogReader:
    """Reads one audit log file; safe to share between threads."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise FileNotFoundError(f"no audit log at {path}")
        self.path = path
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        self._check_schema()

    def _check_schema(self) -> None:
        try:
            row = self._db().execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise NotAnAuditLogError(f"{self.path} is not an audit log: {exc}") from None
        if row is None:
            raise NotAnAuditLogError(f"{self.path} is not an audit log")
        if int(row[0]) > SCHEMA_VERSION:
            raise NotAnAuditLogError(f"{self.path} is from a newer worthit (schema {row[0]})")

    def _db(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = connect(self.path)
            self._local.conn = conn
            with self._connections_lock:
                self._connections.append(conn)
        return conn

    def close(self) -> None:
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._local = threading.local()

    def __enter__(self) -> LogReader:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def size(self) -> int:
        """Leaves committed to the file (the largest tree a proof can be asked for)."""
        return stored_size(self._db())

    def meta(self, key: str) -> str | None:
        row = self._db().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @property
    def origin(self) -> str:
        origin = self.meta("origin")
        if origin is None:
            raise NotAnAuditLogError(f"{self.path} names no origin")
        return origin

    @property
    def vkey(self) -> str | None:
        """The verifier key the log was created with (trust one you got another way)."""
        return self.meta("vkey")

    def leaf_bytes(self, index: int) -> bytes:
        row = self._db().execute("SELECT data FROM leaves WHERE idx = ?", (index,)).fetchone()
        if row is None:
            raise TreeRangeError(f"no leaf {index} (the log has {self.size})")
        return bytes(row[0])

    def leaf(self, index: int) -> AuditRecord:
        """The record at `index`: its `tenant` is for the caller to scope who may see it."""
        return AuditRecord.from_bytes(self.leaf_bytes(index))

    def leaf_tenant(self, index: int) -> str | None:
        """The tenant of leaf `index` without decoding it (`TreeRangeError` if none)."""
        row = self._db().execute("SELECT tenant FROM leaves WHERE idx = ?", (index,)).fetchone()
        if row is None:
            raise TreeRangeError(f"no leaf {index} (the log has {self.size})")
        return None if row[0] is None else str(row[0])

    def fetch(self, wanted: Collection[Piece]) -> dict[Piece, bytes]:
        """The stored hash of each perfect subtree in `wanted` (two queries in all)."""
        leaves = [index for level, index in wanted if level == 0]
        nodes = {node_id(level, index): (level, index) for level, index in wanted if level}
        found: dict[Piece, bytes] = {}
        db = self._db()
        for chunk in _chunks(leaves):
            marks = ",".join("?" * len(chunk))
            for idx, value in db.execute(
                f"SELECT idx, hash FROM leaves WHERE idx IN ({marks})", chunk
            ):
                found[(0, idx)] = bytes(value)
        for chunk in _chunks(list(nodes)):
            marks = ",".join("?" * len(chunk))
            for key, value in db.execute(
                f"SELECT id, hash FROM nodes WHERE id IN ({marks})", chunk
            ):
                found[nodes[key]] = bytes(value)
        missing = [piece for piece in wanted if piece not in found]
        if missing:
            raise TreeRangeError(f"the log has no subtree {missing[0]} (not yet written?)")
        return found

    def root(self, size: int) -> bytes:
        self._check_size(size)
        return merkle.root(size, self.fetch)

    def inclusion_proof(self, index: int, tree_size: int) -> list[bytes]:
        """PATH(index, D[tree_size]): the hashes from the leaf's sibling up, RFC 9162 order."""
        self._check_size(tree_size)
        if not 0 <= index < tree_size:
            raise TreeRangeError(f"leaf {index} is not in a tree of size {tree_size}")
        return merkle.inclusion_proof(index, tree_size, self.fetch)

    def consistency_proof(self, first: int, second: int) -> list[bytes]:
        """PROOF(first, D[second]); empty when first is 0 or equals second."""
        self._check_size(second)
        if not 0 <= first <= second:
            raise TreeRangeError(f"no consistency proof from size {first} to size {second}")
        return merkle.consistency_proof(first, second, self.fetch)

    def _check_size(self, size: int) -> None:
        committed = self.size
        if not 0 <= size <= committed:
            raise TreeRangeError(f"tree size {size} is not between 0 and {committed}")

    def latest_checkpoint(self) -> str | None:
        """The newest signed checkpoint note, or None before the first."""
        stored = self.latest_stored_checkpoint()
        return None if stored is None else stored.note

    def latest_stored_checkpoint(self) -> StoredCheckpoint | None:
        row = (
            self._db()
            .execute(
                "SELECT tree_size, root, wall_ms, note FROM checkpoints "
                "ORDER BY tree_size DESC LIMIT 1"
            )
            .fetchone()
        )
        return None if row is None else StoredCheckpoint(row[0], bytes(row[1]), row[2], row[3])

    def checkpoints(self) -> list[StoredCheckpoint]:
        rows = self._db().execute(
            "SELECT tree_size, root, wall_ms, note FROM checkpoints ORDER BY tree_size"
        )
        return [
            StoredCheckpoint(size, stored_bytes(root), wall, str(note))
            for size, root, wall, note in rows
        ]

    def records_between(
        self, from_ms: int, to_ms: int, below: int
    ) -> Iterator[tuple[int, AuditRecord]]:
        """(index, record) of the leaves with from_ms ≤ wall_ms < to_ms and index < below."""
        rows = self._db().execute(
            "SELECT idx, data FROM leaves WHERE wall_ms >= ? AND wall_ms < ? AND idx < ? "
            "ORDER BY idx",
            (from_ms, to_ms, below),
        )
        for idx, data in rows:
            yield idx, decode_leaf(bytes(data))[1]

    def find_request(
        self, request_id: str, tenant: str | None, since_ms: int = 0
    ) -> tuple[int, AuditRecord] | None:
        """The newest answer leaf of `tenant` for `request_id`, written at or after
        `since_ms`, or None.

        Leaves keep no request-id column, so this scans the tenant's leaves from
        `since_ms` (through the time index) for the id's exact canonical bytes, and
        decodes only the matches: the caller bounds the scan with `since_ms`.
        """
        needle = f'"request_id":{encode_basestring(request_id)},'.encode()
        rows = self._db().execute(
            "SELECT idx, data FROM leaves WHERE wall_ms >= ? AND tenant IS ? "
            "AND instr(data, ?) > 0 ORDER BY idx DESC",
            (since_ms, tenant, needle),
        )
        for idx, data in rows:
            record = decode_leaf(bytes(data))[1]
            if record.request_id == request_id and record.kind == ANSWER:
                return idx, record
        return None

    def leaves_below(self, size: int) -> Iterator[tuple[int, bytes]]:
        """(index, leaf bytes) of every stored leaf below `size`, in order."""
        rows = self._db().execute(
            "SELECT idx, data FROM leaves WHERE idx < ? ORDER BY idx", (size,)
        )
        for idx, data in rows:
            yield idx, bytes(data)

    def starts(self) -> list[Start]:
        rows = self._db().execute(
            "SELECT wall_ms, committed, reserved, lost, exact, reason FROM starts ORDER BY id"
        )
        return [Start(w, c, r, lost, bool(e), why) for w, c, r, lost, e, why in rows]


def _chunks(values: list[int], size: int = 500) -> Iterator[list[int]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def stored_bytes(value: object) -> bytes:
    """A BLOB column's bytes. A copy edited behind the log's back may hold TEXT, a number or
    NULL there: it reads as other bytes, so the checks that follow name it, never crash."""
    if isinstance(value, bytes | memoryview):
        return bytes(value)
    return b"" if value is None else str(value).encode()
