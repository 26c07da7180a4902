"""Editing the log file behind the log's back: every change, drop and reorder is named."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest
from audit_factories import record
from audit_fixtures import log_path

from worthit.audit.log import AuditLog, CheckpointPolicy
from worthit.audit.logcheck import LogReport, check_log
from worthit.audit.merkle import leaf_hash
from worthit.audit.note import NoteVerifier

SIZE = 40

__all__ = ["log_path"]


@pytest.fixture
def written(log_path: Path) -> tuple[Path, NoteVerifier]:
    log = AuditLog(log_path, policy=CheckpointPolicy(every_leaves=8, every_s=3600))
    for i in range(SIZE):
        log.append(record(i))
        if i % 8 == 7:
            log.flush()  # one batch, so one checkpoint, per 8 leaves
    log.close()
    return log_path, NoteVerifier.from_vkey(log.vkey)


def edit(path: Path, change: Callable[[sqlite3.Connection], None]) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        change(conn)
    finally:
        conn.close()


def leaf(conn: sqlite3.Connection, idx: int) -> tuple[bytes, bytes]:
    row = conn.execute("SELECT data, hash FROM leaves WHERE idx = ?", (idx,)).fetchone()
    return bytes(row[0]), bytes(row[1])


def named(report: LogReport) -> dict[int | None, list[str]]:
    out: dict[int | None, list[str]] = {}
    for problem in report.problems:
        out.setdefault(problem.index, []).append(problem.message)
    return out


def test_an_untouched_log_verifies(written: tuple[Path, NoteVerifier]) -> None:
    report = check_log(*written)
    assert report.ok and report.leaves == SIZE and report.verified_size == SIZE
    assert report.checkpoints == 1 + SIZE // 8


def test_a_changed_leaf_is_named(written: tuple[Path, NoteVerifier]) -> None:
    path, verifier = written

    def change(conn: sqlite3.Connection) -> None:
        data, _ = leaf(conn, 13)
        changed = data.replace(b'"verdict":"buy"', b'"verdict":"wait"')
        conn.execute("UPDATE leaves SET data = ? WHERE idx = 13", (changed,))

    edit(path, change)
    report = check_log(path, verifier)
    assert "changed" in " ".join(named(report)[13])
    assert report.verified_size == 8
    assert any("signed root at size 16" in m for m in named(report)[None])


def test_a_changed_leaf_with_its_hash_rewritten_is_located(
    written: tuple[Path, NoteVerifier],
) -> None:
    path, verifier = written

    def change(conn: sqlite3.Connection) -> None:
        data, _ = leaf(conn, 21)
        changed = data.replace(b'"verdict":"buy"', b'"verdict":"skip"')
        conn.execute(
            "UPDATE leaves SET data = ?, hash = ? WHERE idx = 21", (changed, leaf_hash(changed))
        )

    edit(path, change)
    report = check_log(path, verifier)
    messages = [str(p) for p in report.problems]
    assert any("leaves 20 to 21 does not match" in m for m in messages), messages
    assert any("leaves 16 to 23" in m for m in messages), messages
    assert report.verified_size == 16


def test_a_dropped_leaf_is_named(written: tuple[Path, NoteVerifier]) -> None:
    path, verifier = written
    edit(path, lambda conn: conn.execute("DELETE FROM leaves WHERE idx = 30"))
    report = check_log(path, verifier)
    assert "dropped" in " ".join(named(report)[30])
    assert report.verified_size == 24


def test_a_dropped_tail_is_found_by_the_checkpoint_over_it(
    written: tuple[Path, NoteVerifier],
) -> None:
    path, verifier = written
    edit(path, lambda conn: conn.execute("DELETE FROM leaves WHERE idx >= 35"))
    report = check_log(path, verifier)
    assert not report.ok
    assert any("does not hold (it holds 35)" in str(p) for p in report.problems)


def test_swapped_leaves_are_named(written: tuple[Path, NoteVerifier]) -> None:
    path, verifier = written

    def swap(conn: sqlite3.Connection) -> None:
        five, seven = leaf(conn, 5), leaf(conn, 7)
        conn.execute("BEGIN")
        conn.execute("UPDATE leaves SET data = ?, hash = ? WHERE idx = 5", seven)
        conn.execute("UPDATE leaves SET data = ?, hash = ? WHERE idx = 7", five)
        conn.execute("COMMIT")

    edit(path, swap)
    problems = named(check_log(path, verifier))
    assert "written at index 7" in " ".join(problems[5])
    assert "written at index 5" in " ".join(problems[7])


def test_a_drop_hidden_by_renumbering_is_named(written: tuple[Path, NoteVerifier]) -> None:
    path, verifier = written

    def drop_and_shift(conn: sqlite3.Connection) -> None:
        conn.execute("BEGIN")
        conn.execute("DELETE FROM leaves WHERE idx = 38")
        conn.execute("UPDATE leaves SET idx = idx - 1 WHERE idx = 39")
        conn.execute("COMMIT")

    edit(path, drop_and_shift)
    report = check_log(path, verifier)
    assert "written at index 39" in " ".join(named(report)[38])
    assert not report.ok


def test_a_forged_checkpoint_is_refused(written: tuple[Path, NoteVerifier]) -> None:
    path, verifier = written

    def forge(conn: sqlite3.Connection) -> None:
        note = conn.execute("SELECT note FROM checkpoints WHERE tree_size = 16").fetchone()[0]
        conn.execute(
            "UPDATE checkpoints SET note = ? WHERE tree_size = 16",
            (note.replace("\n16\n", "\n17\n"),),
        )

    edit(path, forge)
    report = check_log(path, verifier)
    assert any("size 16 does not verify" in str(p) for p in report.problems)


def test_a_tenant_column_moved_to_another_tenant_is_named(
    written: tuple[Path, NoteVerifier],
) -> None:
    path, verifier = written
    edit(path, lambda conn: conn.execute("UPDATE leaves SET tenant = 'rival' WHERE idx = 3"))
    assert "tenant" in " ".join(named(check_log(path, verifier))[3])


@pytest.mark.parametrize(
    ("sql", "index"),
    [
        ("UPDATE leaves SET data = CAST(data AS TEXT) WHERE idx = 5", 5),
        ("UPDATE leaves SET data = 'not a leaf' WHERE idx = 5", 5),
        ("UPDATE leaves SET data = 12345 WHERE idx = 5", 5),
        ("UPDATE leaves SET hash = hex(hash) WHERE idx = 5", 5),
        ("UPDATE leaves SET wall_ms = 'noon' WHERE idx = 5", 5),
        ("UPDATE leaves SET tenant = 7 WHERE idx = 5", 5),
        ("UPDATE nodes SET hash = 'x' WHERE id = (SELECT min(id) FROM nodes)", None),
        ("UPDATE checkpoints SET root = 'x' WHERE tree_size = 16", None),
        ("UPDATE checkpoints SET note = 42 WHERE tree_size = 16", None),
    ],
)
def test_a_copy_with_wrongly_typed_columns_is_named_not_a_crash(
    written: tuple[Path, NoteVerifier], sql: str, index: int | None
) -> None:
    """A tampered copy may store TEXT or a number where the log writes a BLOB."""
    path, verifier = written
    edit(path, lambda conn: conn.execute(sql))
    report = check_log(path, verifier)
    assert not report.ok
    if index is not None:
        assert index in named(report)
