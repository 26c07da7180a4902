"""The audit log: `append` hands out a receipt at once, a writer thread makes it durable.

On the caller (an event loop or any thread) `append` only encodes the leaf, hashes it,
takes the next index and queues it: a few microseconds, no I/O, never a wait. One writer
thread drains the queue in batches, one SQLite transaction per batch (leaves, the
subtree hashes they complete, and a checkpoint when one is due), so proofs are ready as
soon as `size` covers them.

Durability (WAL):
- a batch commits with `synchronous=NORMAL`: it survives a crash of the process; a power
  loss may undo the batches committed since the last fsync;
- a batch that signs a checkpoint or extends the reservation commits with
  `synchronous=FULL`, an fsync of the WAL, which also makes every earlier batch durable.
  So every leaf under a signed checkpoint is on disk, and the log can never sign two
  trees of the same size that differ;
- leaves still queued are in memory only.

Index contiguity: an index is handed out before its leaf is written, so a crash can
leave indexes with receipts and no leaves. They are never given to other leaves: the
next start writes a tombstone leaf (`kind: "lost"`) at each, so the tree has no hole and
a receipt for a lost leaf fails to verify instead of proving someone else's answer.
How many there are:
- callers never get an index at or past a durable reservation, which the writer moves to
  `reserve` (16,384 by default) beyond the committed leaves, with an fsync, whenever less
  than half of that is left; so at most `reserve` leaves are ever waiting, and a caller
  that finds none left gets `BacklogFullError` instead of a wait;
- every append stores the count handed out in a memory-mapped file (issued.py) that a
  crash of the process does not lose. After a process crash on the same boot the number
  lost is exact: handed out minus committed (at most `reserve`), and the indexes reserved
  but never handed out are used again;
- after a power loss or a reboot that count may be stale, so every reserved index beyond
  the committed leaves becomes a tombstone and the number reported is that upper bound
  (at most `reserve`, as the reservation is durable with the leaves it was made after),
  flagged `exact=False`.
`last_start` (and `lost_at_last_start`) say what the last start found; `starts()` keeps
the history in the file. A clean `close` writes everything, signs a final checkpoint and
gives the reservation back, so the next start reports 0.
"""

from __future__ import annotations

import atexit
import base64
import binascii
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit.audit import keyfile
from worthit.audit.checkpoint import Checkpoint
from worthit.audit.errors import (
    BacklogFullError,
    KeyFileError,
    LogClosedError,
    MalformedError,
    NotAnAuditLogError,
)
from worthit.audit.frontier import Frontier
from worthit.audit.issued import IssuedCounter, boot_id
from worthit.audit.merkle import HASH_SIZE, leaf_hash, pieces
from worthit.audit.note import NoteSigner
from worthit.audit.record import AuditRecord
from worthit.audit.store import (
    SCHEMA,
    SCHEMA_VERSION,
    AuditPaths,
    LogReader,
    Start,
    connect,
    node_id,
    stored_size,
)

log = logging.getLogger(__name__)

DEFAULT_ORIGIN = "worthit.local/audit"
DEFAULT_RESERVE = 16_384
DEFAULT_MAX_BATCH = 8_192
RETRY_S = 0.5
GATHER_S = 0.005
"""How long the writer lets leaves gather after the first before it writes them as one
batch. Woken for every leaf, it would take the GIL from the thread answering shoppers
once per answer; a leaf's receipt never waits for the disk, so this costs nothing but
5 ms more before a leaf is durable."""


@dataclass(frozen=True)
class CheckpointPolicy:
    """Sign a checkpoint once `every_leaves` leaves or `every_s` seconds have passed since the
    last one (and only when the tree grew); each one costs an fsync."""

    every_leaves: int = 1_024
    every_s: float = 5.0


@dataclass(frozen=True, slots=True)
class Receipt:
    leaf_index: int
    leaf_hash: bytes

    def to_dict(self) -> dict[str, Any]:
        return {
            "leaf_index": self.leaf_index,
            "leaf_hash": base64.b64encode(self.leaf_hash).decode(),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Receipt:
        index = data.get("leaf_index")
        encoded = data.get("leaf_hash")
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise MalformedError("a receipt's leaf_index is a non-negative integer")
        if not isinstance(encoded, str):
            raise MalformedError("a receipt's leaf_hash is a base64 string")
        try:
            hashed = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise MalformedError("a receipt's leaf_hash is not base64") from None
        if len(hashed) != HASH_SIZE:
            raise MalformedError(f"a receipt's leaf_hash is not {HASH_SIZE} bytes")
        return cls(index, hashed)


_Entry = tuple[int, int, str | None, bytes, bytes]
"""(index, wall_ms, tenant, leaf hash, leaf bytes): a leaf on its way to the disk."""


class AuditLog(LogReader):
    """The one writer of an audit log file, and a reader of it.

    Open one per process for the service's life (a second one, in any process, raises
    `LogBusyError`) and `close()` it at shutdown. `append` may be called from any thread
    or an event loop; the reads (from LogReader) are synchronous SQLite reads of well
    under a millisecond, also safe from any thread.
    """

    def __init__(
        self,
        path: Path,
        *,
        key_path: Path | None = None,
        origin: str | None = None,
        policy: CheckpointPolicy | None = None,
        reserve: int = DEFAULT_RESERVE,
        max_batch: int = DEFAULT_MAX_BATCH,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if reserve < 2 or max_batch < 1:
            raise ValueError("reserve must be at least 2 and max_batch at least 1")
        self.paths = AuditPaths.of_log(path, key_path)
        self.policy = policy or CheckpointPolicy()
        self._reserve = reserve
        self._max_batch = max_batch
        self._clock = clock
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._grown = threading.Condition(self._lock)
        self._queue: queue.SimpleQueue[_Entry | None] = queue.SimpleQueue()
        self._closed = False
        self._shut = False
        self._error: BaseException | None = None
        self._sync = "NORMAL"
        self._next = self._reserved = self._size = 0
        self._counter = IssuedCounter(self.paths.issued)
        self._conn = connect(path, read_only=False)
        try:
            self._signer = self._prepare(origin)
            super().__init__(path)
            self._start()
        except BaseException:
            self._conn.close()
            if hasattr(self, "_connections"):  # the reader was set up before the failure
                super().close()
            self._counter.close()
            raise
        self._writer = threading.Thread(target=self._run, name="audit-writer", daemon=True)
        self._writer.start()
        atexit.register(self.close)  # an interpreter that exits normally writes the queue

    # -- the caller's side -------------------------------------------------------------

    def append(self, record: AuditRecord, *, block: bool = False) -> Receipt:
        """Queues `record` as the next leaf and returns its receipt.

        Raises `BacklogFullError` when `reserve` leaves are waiting for the writer (never
        in normal running: the writer commits thousands a second); `block=True` waits for
        room instead, for bulk loads. `LogClosedError` after `close()` or a writer failure.
        """
        with self._lock:
            while True:
                if self._closed:
                    raise LogClosedError("the audit log is closed") from self._error
                index = self._next
                if index < self._reserved:
                    break
                if not block:
                    raise BacklogFullError(
                        f"{index - self._size} audit leaves are waiting for the disk"
                    )
                self._grown.wait(1.0)
            data = record.to_bytes(index)
            hashed = leaf_hash(data)
            self._counter.store(index + 1)  # before the writer can see it: never below committed
            self._queue.put((index, record.wall_ms, record.tenant, hashed, data))
            self._next = index + 1
        return Receipt(index, hashed)

    def flush(self, timeout: float | None = None) -> bool:
        """Waits until every leaf appended before this call is committed; False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            target = self._next
            while self._size < target:
                if self._error is not None or not self._writer.is_alive():
                    raise LogClosedError("the audit writer stopped") from self._error
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._grown.wait(0.5 if left is None else min(left, 0.5))
        return True

    def close(self, timeout: float = 30.0) -> None:
        """Writes what is queued, signs a final checkpoint, returns the reservation, and
        releases the file. Idempotent. Blocking: from an event loop, `await
        asyncio.to_thread(log.close)`."""
        with self._lock:
            if self._shut:
                return
            self._shut = self._closed = True
        atexit.unregister(self.close)
        self._queue.put(None)
        self._writer.join(timeout)
        if self._writer.is_alive():  # keep the lock: no other writer while this one may write
            log.error(
                "the audit writer did not finish in %.0f s; the next start counts the rest as lost",
                timeout,
            )
            return
        self._conn.close()
        super().close()
        self._counter.close()

    def __enter__(self) -> AuditLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def size(self) -> int:
        """Leaves committed: proofs and checkpoints exist up to here."""
        return self._size

    @property
    def appended(self) -> int:
        """Indexes handed out (committed or queued)."""
        return self._next

    @property
    def origin(self) -> str:
        return self._signer.name

    @property
    def vkey(self) -> str:
        return self._signer.verifier.vkey

    @property
    def signer(self) -> NoteSigner:
        return self._signer

    @property
    def last_start(self) -> Start:
        return self._last_start

    @property
    def lost_at_last_start(self) -> int:
        """Leaves lost by the crash before this start (see `last_start.exact`)."""
        return self._last_start.lost

    def latest_checkpoint(self) -> str | None:
        return self._latest_note

    # -- opening -----------------------------------------------------------------------

    def _prepare(self, origin: str | None) -> NoteSigner:
        conn = self._conn
        try:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master")}
            if tables and (
                "meta" not in tables
                or conn.execute("SELECT 1 FROM meta WHERE key = 'schema'").fetchone() is None
            ):
                raise NotAnAuditLogError(f"{self.paths.db} is another kind of database")
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            conn.executescript(SCHEMA)
        except sqlite3.DatabaseError as exc:
            raise NotAnAuditLogError(f"{self.paths.db} is not an audit log: {exc}") from None
        stored = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if int(stored.get("schema", SCHEMA_VERSION)) > SCHEMA_VERSION:
            raise NotAnAuditLogError(f"{self.paths.db} is from a newer worthit")
        name = stored.get("origin") or origin or DEFAULT_ORIGIN
        if origin is not None and origin != name:
            raise KeyFileError(f"the audit log {self.paths.db} is {name!r}, not {origin!r}")
        signer = keyfile.load_or_create(self.paths.key, name)
        if stored.get("vkey") not in (None, signer.verifier.vkey):
            raise KeyFileError(f"{self.paths.key} is not the key the audit log was made with")
        conn.executemany(
            "INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
            [("schema", SCHEMA_VERSION), ("origin", name), ("vkey", signer.verifier.vkey)],
        )
        return signer

    def _start(self) -> None:
        """Recovers from the last run (module docstring) and reserves indexes for this one."""
        committed = stored_size(self._conn)
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'reserved'").fetchone()
        reserved = committed if row is None else max(int(row[0]), committed)
        boot, issued = self._counter.read()
        if reserved == committed:
            lost_until, exact, reason = committed, True, "clean: nothing was reserved unwritten"
        elif boot is not None and boot == boot_id() and committed <= issued <= reserved:
            lost_until, exact = issued, True
            reason = "process crash: receipts handed out but never written"
        else:
            lost_until, exact = reserved, False
            reason = "restart or lost counter: every reserved index unwritten (upper bound)"
        self._counter.reset(lost_until)
        self._size = committed
        self._frontier = Frontier(committed, self.fetch(pieces(0, committed)))
        latest = self.latest_stored_checkpoint()
        self._checkpointed = latest.size if latest is not None else -1
        self._checkpointed_at = self._clock()
        self._latest_note = latest.note if latest is not None else None
        now_ms = int(self._clock() * 1000)
        tombstone = AuditRecord.lost(now_ms, time.monotonic_ns())
        self._next = self._reserved = lost_until
        self._write([_entry(i, tombstone) for i in range(committed, lost_until)], force=True)
        lost = lost_until - committed
        self._last_start = Start(now_ms, committed, reserved, lost, exact, reason)
        self._conn.execute(
            "INSERT INTO starts (wall_ms, committed, reserved, lost, exact, reason) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (now_ms, committed, reserved, lost, int(exact), reason),
        )
        if lost:
            log.warning(
                "audit log %s: %s%d leaves lost before this start (%s)",
                self.paths.db,
                "" if exact else "up to ",
                lost,
                reason,
            )

    # -- the writer thread -------------------------------------------------------------

    def _run(self) -> None:
        while True:
            batch, stopping = self._take()
            if not self._write_retrying(batch, stopping) or stopping:
                return

    def _take(self) -> tuple[list[_Entry], bool]:
        """The next batch (waiting at most until a checkpoint is due), and whether to stop."""
        timeout = 1.0
        if self._size > self._checkpointed:
            due = self._checkpointed_at + self.policy.every_s - self._clock()
            timeout = min(timeout, max(due, 0.0))
        batch: list[_Entry] = []
        try:
            item = self._queue.get(timeout=timeout)
        except queue.Empty:
            return batch, False
        if item is not None:
            time.sleep(GATHER_S)
        while item is not None:
            batch.append(item)
            if len(batch) >= self._max_batch:
                return batch, False
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return batch, False
        return batch, True

    def _write_retrying(self, batch: list[_Entry], stopping: bool) -> bool:
        """Writes `batch`, retrying while SQLite is busy or the disk fails; False when the
        writer must stop."""
        while True:
            try:
                self._write(batch, force=stopping, release=stopping)
                return True
            except sqlite3.OperationalError as exc:
                if stopping:
                    log.error("audit log: could not write %d leaves at close: %s", len(batch), exc)
                    return False
                log.error("audit log: writing %d leaves failed, retrying: %s", len(batch), exc)
                time.sleep(RETRY_S)
            except BaseException as exc:
                log.exception("audit log: the writer stopped")
                with self._lock:
                    self._error = exc
                    self._closed = True
                    self._grown.notify_all()
                return False

    def _write(self, batch: list[_Entry], *, force: bool = False, release: bool = False) -> None:
        """One transaction: `batch`, the subtrees it completes, a checkpoint when one is due
        (always when `force`), and the reservation when it runs low (given back: `release`)."""
        frontier = self._frontier.copy()
        nodes = [
            (node_id(level, index), value)
            for entry in batch
            for (level, index), value in frontier.append(entry[3])
        ]
        size = frontier.size
        now = self._clock()
        checkpoint = None
        if size != self._checkpointed and (
            force
            or size - max(self._checkpointed, 0) >= self.policy.every_leaves
            or now - self._checkpointed_at >= self.policy.every_s
        ):
            root = frontier.root()
            note = Checkpoint(self._signer.name, size, root).sign(self._signer)
            checkpoint = (size, root, int(now * 1000), note)
        reserved = None
        if release:
            reserved = size
        elif self._reserved - size < self._reserve // 2:
            reserved = size + self._reserve
        if not batch and checkpoint is None and reserved is None:
            return
        self._commit(batch, nodes, checkpoint, reserved)
        self._frontier = frontier
        if checkpoint is not None:
            self._checkpointed, self._checkpointed_at, self._latest_note = size, now, checkpoint[3]
        with self._lock:
            self._size = size
            if reserved is not None and not release:
                self._reserved = reserved
            self._grown.notify_all()

    def _commit(
        self,
        batch: list[_Entry],
        nodes: list[tuple[int, bytes]],
        checkpoint: tuple[int, bytes, int, str] | None,
        reserved: int | None,
    ) -> None:
        conn = self._conn
        sync = "FULL" if checkpoint is not None or reserved is not None else "NORMAL"
        if sync != self._sync:
            conn.execute(f"PRAGMA synchronous = {sync}")
            self._sync = sync
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany(
                "INSERT INTO leaves (idx, wall_ms, tenant, hash, data) VALUES (?, ?, ?, ?, ?)",
                batch,
            )
            conn.executemany("INSERT INTO nodes (id, hash) VALUES (?, ?)", nodes)
            if checkpoint is not None:
                conn.execute(
                    "INSERT INTO checkpoints (tree_size, root, wall_ms, note) VALUES (?, ?, ?, ?)",
                    checkpoint,
                )
            if reserved is not None:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES ('reserved', ?) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    (reserved,),
                )
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise


def _entry(index: int, record: AuditRecord) -> _Entry:
    data = record.to_bytes(index)
    return index, record.wall_ms, record.tenant, leaf_hash(data), data
