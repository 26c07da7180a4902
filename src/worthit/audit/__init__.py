"""A tamper-evident log of every answer (RFC 9162 tree, C2SP signed checkpoints), and the
SLA evidence drawn from it. docs/audit.md has the formats, the crash policy and the CLI."""

from worthit.audit.checkpoint import Checkpoint
from worthit.audit.errors import (
    AuditError,
    BacklogFullError,
    KeyFileError,
    LogBusyError,
    LogClosedError,
    MalformedError,
    NotAnAuditLogError,
    TreeRangeError,
    VerificationError,
)
from worthit.audit.log import AuditLog, CheckpointPolicy, Receipt
from worthit.audit.note import NoteVerifier
from worthit.audit.proofs import verify_consistency, verify_inclusion
from worthit.audit.record import AuditRecord
from worthit.audit.store import AuditPaths, LogReader, Start

__all__ = [
    "AuditError",
    "AuditLog",
    "AuditPaths",
    "AuditRecord",
    "BacklogFullError",
    "Checkpoint",
    "CheckpointPolicy",
    "KeyFileError",
    "LogBusyError",
    "LogClosedError",
    "LogReader",
    "MalformedError",
    "NotAnAuditLogError",
    "NoteVerifier",
    "Receipt",
    "Start",
    "TreeRangeError",
    "VerificationError",
    "verify_consistency",
    "verify_inclusion",
]
