"""The log on a real SQLite file: receipts, stored proofs, checkpoints, threads, closing."""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import threading
from pathlib import Path

import pytest
from audit_factories import record
from audit_fixtures import audit_log, log_path
from rfc9162_reference import mth, path, proof

from worthit.audit.checkpoint import Checkpoint
from worthit.audit.errors import (
    BacklogFullError,
    LogBusyError,
    LogClosedError,
    NotAnAuditLogError,
    TreeRangeError,
)
from worthit.audit.log import AuditLog, CheckpointPolicy, Receipt
from worthit.audit.merkle import EMPTY_ROOT, leaf_hash
from worthit.audit.note import NoteVerifier
from worthit.audit.proofs import verify_consistency, verify_inclusion
from worthit.audit.record import AuditRecord
from worthit.audit.store import LogReader

__all__ = ["audit_log", "log_path"]


def fill(log: AuditLog, n: int) -> list[Receipt]:
    receipts = [log.append(record(i)) for i in range(n)]
    assert log.flush(timeout=30)
    return receipts


def test_a_new_log_starts_empty_with_a_signed_checkpoint_of_the_empty_tree(
    audit_log: AuditLog,
) -> None:
    assert audit_log.size == 0
    assert audit_log.lost_at_last_start == 0
    note = audit_log.latest_checkpoint()
    assert note is not None
    checkpoint = Checkpoint.open(note, NoteVerifier.from_vkey(audit_log.vkey))
    assert (checkpoint.size, checkpoint.root) == (0, EMPTY_ROOT)


def test_receipts_name_contiguous_indexes_and_the_hash_of_the_stored_leaf(
    audit_log: AuditLog,
) -> None:
    receipts = fill(audit_log, 40)
    assert [r.leaf_index for r in receipts] == list(range(40))
    for r in receipts:
        assert leaf_hash(audit_log.leaf_bytes(r.leaf_index)) == r.leaf_hash
    assert audit_log.leaf(7) == record(7)
    assert audit_log.leaf_tenant(7) == "acme"
    assert receipts[3].to_dict()["leaf_index"] == 3
    assert Receipt.from_dict(receipts[3].to_dict()) == receipts[3]


def test_stored_proofs_equal_the_reference_at_every_size(audit_log: AuditLog) -> None:
    fill(audit_log, 45)
    leaves = [audit_log.leaf_bytes(i) for i in range(45)]
    for n in range(46):
        assert audit_log.root(n) == mth(leaves[:n])
        for m in range(n):
            assert audit_log.inclusion_proof(m, n) == path(m, leaves[:n])
        for m in range(1, n):
            assert audit_log.consistency_proof(m, n) == proof(m, leaves[:n])


def test_checkpoints_come_every_n_leaves_and_verify(audit_log: AuditLog) -> None:
    receipts = fill(audit_log, 50)
    sizes = [c.size for c in audit_log.checkpoints()]
    assert sizes[0] == 0 and all(b - a >= 16 for a, b in itertools.pairwise(sizes[1:]))
    verifier = NoteVerifier.from_vkey(audit_log.vkey)
    note = audit_log.latest_checkpoint()
    assert note is not None
    head = Checkpoint.open(note, verifier)
    for r in receipts[: head.size]:
        hashes = audit_log.inclusion_proof(r.leaf_index, head.size)
        verify_inclusion(r.leaf_hash, r.leaf_index, head.size, hashes, head.root)
    for older in audit_log.checkpoints():
        consistency = audit_log.consistency_proof(older.size, head.size)
        verify_consistency(older.size, head.size, older.root, head.root, consistency)


def test_a_checkpoint_comes_after_t_seconds_even_below_n_leaves(log_path: Path) -> None:
    now = [1000.0]
    log = AuditLog(
        log_path, policy=CheckpointPolicy(every_leaves=10_000, every_s=5), clock=lambda: now[0]
    )
    try:
        log.append(record(0))
        log.flush()
        assert [c.size for c in log.checkpoints()] == [0]
        now[0] += 6
        log.append(record(1))
        log.flush()
        assert [c.size for c in log.checkpoints()] == [0, 2]
    finally:
        log.close()


def test_close_signs_the_tail_and_a_clean_restart_loses_nothing(log_path: Path) -> None:
    log = AuditLog(log_path, policy=CheckpointPolicy(every_leaves=1000, every_s=3600))
    fill(log, 10)
    log.append(record(10))
    log.close()
    again = AuditLog(log_path)
    try:
        assert again.size == 11
        assert again.lost_at_last_start == 0 and again.last_start.exact
        note = again.latest_checkpoint()
        assert note is not None and Checkpoint.from_note(note).size == 11
        assert again.append(record(11)).leaf_index == 11
    finally:
        again.close()
    with LogReader(log_path) as reader:
        assert reader.size == 12
        assert [s.lost for s in reader.starts()] == [0, 0]


def test_a_second_writer_is_refused(audit_log: AuditLog, log_path: Path) -> None:
    with pytest.raises(LogBusyError):
        AuditLog(log_path)


def test_appends_from_many_threads_get_distinct_contiguous_indexes(audit_log: AuditLog) -> None:
    got: list[int] = []
    lock = threading.Lock()

    def work(t: int) -> None:
        for i in range(200):
            r = audit_log.append(record(t * 1000 + i))
            with lock:
                got.append(r.leaf_index)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    audit_log.flush()
    assert sorted(got) == list(range(800))
    for i in range(0, 800, 97):
        assert AuditRecord.from_bytes(audit_log.leaf_bytes(i)).kind == "answer"


def test_append_is_callable_from_an_event_loop(audit_log: AuditLog) -> None:
    async def answer() -> Receipt:
        return audit_log.append(record(1))

    receipt = asyncio.run(answer())
    audit_log.flush()
    assert audit_log.leaf(receipt.leaf_index) == record(1)


def test_a_full_backlog_refuses_rather_than_blocks(log_path: Path) -> None:
    log = AuditLog(log_path, reserve=8)
    blocker = sqlite3.connect(log_path, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")  # the writer cannot commit
        taken = 0
        with pytest.raises(BacklogFullError):
            for i in range(100):
                log.append(record(i))
                taken += 1
        assert 4 <= taken <= 8
        blocker.execute("ROLLBACK")
        assert log.flush(timeout=30)
        assert log.size == taken
        log.append(record(99), block=True)
    finally:
        blocker.close()
        log.close()


def test_reads_outside_the_log_are_range_errors(audit_log: AuditLog) -> None:
    fill(audit_log, 5)
    with pytest.raises(TreeRangeError):
        audit_log.leaf(5)
    with pytest.raises(TreeRangeError):
        audit_log.inclusion_proof(5, 5)
    with pytest.raises(TreeRangeError):
        audit_log.inclusion_proof(0, 6)
    with pytest.raises(TreeRangeError):
        audit_log.consistency_proof(4, 3)


def test_a_closed_log_takes_no_more_leaves(log_path: Path) -> None:
    log = AuditLog(log_path)
    log.close()
    log.close()
    with pytest.raises(LogClosedError):
        log.append(record(0))


def test_another_kind_of_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    market = tmp_path / "market.db"
    conn = sqlite3.connect(market)
    conn.execute("CREATE TABLE products (sku TEXT)")
    conn.commit()
    conn.close()
    with pytest.raises(NotAnAuditLogError):
        AuditLog(market)
    conn = sqlite3.connect(market)
    assert [n for (n,) in conn.execute("SELECT name FROM sqlite_master")] == ["products"]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    conn.close()
    with pytest.raises(NotAnAuditLogError):
        LogReader(market)


def test_an_idle_log_signs_its_tail_after_t_seconds(log_path: Path) -> None:
    log = AuditLog(log_path, policy=CheckpointPolicy(every_leaves=10_000, every_s=0.2))
    try:
        log.append(record(0))
        for _ in range(200):
            note = log.latest_checkpoint()
            if note is not None and Checkpoint.from_note(note).size == 1:
                break
            threading.Event().wait(0.05)
        assert [c.size for c in log.checkpoints()] == [0, 1]
    finally:
        log.close()
