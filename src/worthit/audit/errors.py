"""What can go wrong with the audit log, by kind, so a caller catches exactly what it handles.

A proof or note that does not verify is an answer, not a bug: `VerificationError` carries
the reason in words, for a CLI to print and an HTTP layer to pass on.
"""

from __future__ import annotations


class AuditError(Exception):
    """Anything the audit package raises on purpose."""


class VerificationError(AuditError):
    """A proof, note, checkpoint or bundle does not verify; the message says why."""


class MalformedError(AuditError, ValueError):
    """Input that cannot be read at all: bad base64, a hash that is not 32 bytes, bad JSON."""


class TreeRangeError(AuditError, ValueError):
    """An index or tree size outside the log as it stands (a 400 or 404, never a 500)."""


class LogBusyError(AuditError):
    """Another process has the log open for writing; only one writer may assign indexes."""


class LogClosedError(AuditError):
    """The log was closed, or its writer stopped after an error (the cause is chained)."""


class BacklogFullError(AuditError):
    """Every reserved index is queued and the writer has not caught up: the leaf was not
    taken. Raised instead of blocking the caller, which is on the answer path."""


class KeyFileError(AuditError):
    """The signing key file is unreadable, for another log, or open to other users."""


class NotAnAuditLogError(AuditError):
    """The file is not an audit log database (or is one from a newer worthit)."""
