"""Checking a whole log file against its own signed checkpoints, trusting nothing else in it.

Every leaf's hash is recomputed from its stored bytes and the tree is rebuilt from those
hashes; each checkpoint's signature is checked with the verifier key and its root with
the rebuilt tree at its size. The checkpoints are the evidence: whoever edits the file
cannot sign a new one. The rest names what went wrong, as precisely as the file allows:

- a leaf whose bytes changed: its recorded hash no longer matches (named by index);
- a leaf moved (two swapped, or rows renumbered after a drop): the index the leaf
  carries in its own bytes is not its position (named);
- a dropped leaf: a gap in the indexes, or fewer leaves than a checkpoint covers (named);
- bytes changed and their hash rewritten to match: the rebuilt subtree hashes no longer
  match the stored ones, which names the smallest stored subtree around the change, and
  the first checkpoint after it fails (the change lies after the last one that held).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from worthit.audit.checkpoint import Checkpoint
from worthit.audit.errors import MalformedError, VerificationError
from worthit.audit.frontier import Frontier
from worthit.audit.merkle import leaf_hash
from worthit.audit.note import NoteVerifier
from worthit.audit.record import decode_leaf
from worthit.audit.store import LogReader, StoredCheckpoint, connect, node_id, stored_bytes

MAX_PROBLEMS = 1_000


@dataclass(frozen=True)
class Problem:
    index: int | None
    """The leaf it is about, when there is one."""
    message: str

    def __str__(self) -> str:
        return self.message if self.index is None else f"leaf {self.index}: {self.message}"


@dataclass
class LogReport:
    leaves: int = 0
    checkpoints: int = 0
    verified_size: int = 0
    """The largest signed tree size whose root the leaves reproduce."""
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def check_log(path: Path, verifier: NoteVerifier, upto: int | None = None) -> LogReport:
    """Everything wrong with the log at `path` (the leaves below `upto`, all when None)."""
    with LogReader(path) as reader:
        checkpoints = reader.checkpoints()
    report = LogReport(checkpoints=len(checkpoints))
    conn = connect(path)
    try:
        _Check(conn, verifier, checkpoints, report, upto).run()
    finally:
        conn.close()
    return report


class _Check:
    def __init__(
        self,
        conn: sqlite3.Connection,
        verifier: NoteVerifier,
        checkpoints: list[StoredCheckpoint],
        report: LogReport,
        upto: int | None,
    ) -> None:
        self.conn = conn
        self.verifier = verifier
        self.report = report
        self.upto = upto
        signed = [c for c in checkpoints if self._signed(c)]
        self.pending = [c for c in reversed(signed) if upto is None or c.size <= upto]
        self.frontier = Frontier()
        self.nodes: dict[int, _LevelCursor] = {}
        self.bad: set[tuple[int, int]] = set()
        """Subtrees found wrong, so their parents are not reported for the same change."""
        self.broken = False
        """Past a dropped leaf the tree cannot be rebuilt, so later checkpoints go unchecked."""

    def problem(self, index: int | None, message: str) -> None:
        if len(self.report.problems) < MAX_PROBLEMS:
            self.report.problems.append(Problem(index, message))

    def _signed(self, stored: StoredCheckpoint) -> bool:
        try:
            checkpoint = Checkpoint.open(stored.note, self.verifier)
        except (VerificationError, MalformedError) as exc:
            self.problem(None, f"the checkpoint at size {stored.size} does not verify: {exc}")
            return False
        if (checkpoint.size, checkpoint.root) != (stored.size, stored.root):
            self.problem(None, f"the checkpoint stored at size {stored.size} signs another tree")
            return False
        return True

    def run(self) -> None:
        self._check_checkpoints()
        expected = 0
        query = "SELECT idx, hash, data, wall_ms, tenant FROM leaves ORDER BY idx"
        for idx, stored_hash, data, wall_ms, tenant in self.conn.execute(query):
            if self.upto is not None and idx >= self.upto:
                break
            if idx != expected:
                gap = "it was" if idx == expected + 1 else f"leaves {expected} to {idx - 1} were"
                self.problem(expected, f"missing: {gap} dropped")
                self.broken = True
            named = len(self.report.problems)
            for column, value in (("data", data), ("hash", stored_hash)):
                if not isinstance(value, bytes | memoryview):
                    self.problem(idx, f"its {column} is stored as {_sql_type(value)}, not a BLOB")
            data = stored_bytes(data)
            hashed = leaf_hash(data)
            self._check_leaf(idx, hashed, stored_bytes(stored_hash), data, wall_ms, tenant)
            if not self.broken:
                self._grow(hashed, changed=len(self.report.problems) > named)
            expected = idx + 1
            self.report.leaves += 1
        for stored in reversed(self.pending):
            why = (
                "leaves before it are missing"
                if self.broken
                else (f"it covers leaves the log does not hold (it holds {expected})")
            )
            self.problem(None, f"the checkpoint at size {stored.size} fails: {why}")

    def _check_leaf(
        self,
        idx: int,
        hashed: bytes,
        stored_hash: bytes,
        data: bytes,
        wall_ms: int,
        tenant: str | None,
    ) -> None:
        if hashed != stored_hash:
            self.problem(idx, "its bytes were changed (they no longer hash to the recorded hash)")
        try:
            said, record = decode_leaf(data)
        except MalformedError as exc:
            self.problem(idx, f"unreadable: {exc}")
            return
        if said != idx:
            self.problem(idx, f"holds the leaf written at index {said} (leaves were moved)")
        if (record.wall_ms, record.tenant) != (wall_ms, tenant):
            self.problem(idx, "its tenant or time columns differ from the leaf's own fields")

    def _grow(self, hashed: bytes, changed: bool) -> None:
        """Adds the leaf; `changed`: its own check already named it, so the subtrees above
        it that fail for that reason alone are not named again."""
        if changed:
            self.bad.add((0, self.frontier.size))
        for (level, index), value in self.frontier.append(hashed):
            cursor = self.nodes.get(level)
            if cursor is None:
                cursor = self.nodes[level] = _LevelCursor(self.conn, level)
            if cursor.find(index) == value:
                continue
            self.bad.add((level, index))
            if not {(level - 1, 2 * index), (level - 1, 2 * index + 1)} & self.bad:
                first, last = index << level, ((index + 1) << level) - 1
                self.problem(
                    None,
                    f"the stored hash of leaves {first} to {last} does not match "
                    "them: a leaf among them was changed",
                )
        self._check_checkpoints()

    def _check_checkpoints(self) -> None:
        size = self.frontier.size
        while self.pending and self.pending[-1].size <= size:
            stored = self.pending.pop()
            if self.frontier.root() == stored.root:
                self.report.verified_size = stored.size
                continue
            since = self.report.verified_size
            self.problem(
                None,
                f"the leaves do not reproduce the signed root at size {size}: "
                f"some of leaves {since} to {size - 1} were changed, dropped or "
                "reordered",
            )


class _LevelCursor:
    """The stored subtree hashes of one level, read in order as the rebuilt tree asks."""

    def __init__(self, conn: sqlite3.Connection, level: int) -> None:
        self._rows: Iterator[tuple[int, bytes]] = iter(
            conn.execute(
                "SELECT id, hash FROM nodes WHERE id >= ? AND id < ? ORDER BY id",
                (node_id(level, 0), node_id(level + 1, 0)),
            )
        )
        self._level = level
        self._ahead: tuple[int, bytes] | None = None

    def find(self, index: int) -> bytes | None:
        wanted = node_id(self._level, index)
        while True:
            if self._ahead is None:
                self._ahead = next(self._rows, None)
                if self._ahead is None:
                    return None
            key, value = self._ahead
            if key > wanted:
                return None
            self._ahead = None
            if key == wanted:
                return stored_bytes(value)


def _sql_type(value: object) -> str:
    return {int: "INTEGER", float: "REAL", str: "TEXT", type(None): "NULL"}.get(
        type(value), type(value).__name__
    )
