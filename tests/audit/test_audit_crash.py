"""A writer killed mid-way: the restart counts what was lost, and the tree has no hole."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from audit_factories import record
from audit_fixtures import log_path

from worthit.audit.checkpoint import Checkpoint
from worthit.audit.issued import MAGIC
from worthit.audit.log import AuditLog, Receipt
from worthit.audit.logcheck import check_log
from worthit.audit.merkle import leaf_hash
from worthit.audit.note import NoteVerifier
from worthit.audit.proofs import verify_consistency

RESERVE = 64
COMMITTED = 10
QUEUED = 5

# Commits COMMITTED leaves, then holds SQLite's write lock from another connection so the
# writer cannot commit, appends QUEUED more and dies without closing anything.
CHILD = textwrap.dedent(
    f"""
    import json, os, sqlite3, sys
    from pathlib import Path
    sys.path.insert(0, {str(Path(__file__).parent)!r})
    from audit_factories import record
    from worthit.audit.log import AuditLog, CheckpointPolicy

    path = Path(sys.argv[1])
    log = AuditLog(path, reserve={RESERVE}, policy=CheckpointPolicy(every_leaves=1))
    receipts = [log.append(record(i)) for i in range({COMMITTED})]
    assert log.flush(timeout=30)
    blocker = sqlite3.connect(path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    receipts += [log.append(record(i)) for i in range({COMMITTED}, {COMMITTED + QUEUED})]
    print(json.dumps([r.to_dict() for r in receipts]), flush=True)
    os._exit(0)
    """
)

__all__ = ["log_path"]


def crash(path: Path) -> list[Receipt]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return [Receipt.from_dict(r) for r in json.loads(done.stdout)]


def test_a_process_crash_reports_exactly_the_leaves_it_lost(log_path: Path) -> None:
    receipts = crash(log_path)
    log = AuditLog(log_path)
    try:
        start = log.last_start
        assert (start.committed, start.lost, start.exact) == (COMMITTED, QUEUED, True)
        assert log.lost_at_last_start == QUEUED
        assert log.size == COMMITTED + QUEUED
        for r in receipts[COMMITTED:]:
            assert log.leaf(r.leaf_index).kind == "lost"
            assert leaf_hash(log.leaf_bytes(r.leaf_index)) != r.leaf_hash
        for r in receipts[:COMMITTED]:
            assert leaf_hash(log.leaf_bytes(r.leaf_index)) == r.leaf_hash
        after = log.append(record(99))
        assert after.leaf_index == COMMITTED + QUEUED
        log.flush()
        verifier = NoteVerifier.from_vkey(log.vkey)
        _consistent_across_the_crash(log, verifier)
    finally:
        log.close()
    report = check_log(log_path, verifier)
    assert report.ok, report.problems
    assert report.verified_size == COMMITTED + QUEUED + 1


def test_after_a_reboot_every_reserved_index_is_counted_as_an_upper_bound(
    log_path: Path,
) -> None:
    crash(log_path)
    counter = log_path.with_name(log_path.name + "-issued")
    data = bytearray(counter.read_bytes())
    assert data[:8] == MAGIC
    data[8:24] = bytes(16)  # another boot: the page with the count may never have hit the disk
    counter.write_bytes(bytes(data))
    log = AuditLog(log_path)
    try:
        start = log.last_start
        assert (start.committed, start.exact) == (COMMITTED, False)
        assert start.lost == start.reserved - COMMITTED == RESERVE - COMMITTED
        assert log.append(record(1)).leaf_index == RESERVE
        log.flush()
        verifier = NoteVerifier.from_vkey(log.vkey)
        _consistent_across_the_crash(log, verifier)
    finally:
        log.close()
    assert check_log(log_path, verifier).ok


def _consistent_across_the_crash(log: AuditLog, verifier: NoteVerifier) -> None:
    note = log.latest_checkpoint()
    assert note is not None
    head = Checkpoint.open(note, verifier)
    before = [c for c in log.checkpoints() if c.size <= COMMITTED]
    assert before[-1].size == COMMITTED
    for old in before:
        hashes = log.consistency_proof(old.size, head.size)
        verify_consistency(old.size, head.size, old.root, head.root, hashes)
