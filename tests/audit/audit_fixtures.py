"""Fixtures for the audit log tests: a log in a temporary folder.

A module the tests import, not a conftest.py: a second conftest module would shadow
tests/conftest.py for every `from conftest import ...` in the suite."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from worthit.audit.log import AuditLog, CheckpointPolicy


@pytest.fixture
def log_path(tmp_path: Path) -> Path:
    return tmp_path / "market.audit.db"


@pytest.fixture
def audit_log(log_path: Path) -> Iterator[AuditLog]:
    log = AuditLog(log_path, policy=CheckpointPolicy(every_leaves=16, every_s=3600))
    yield log
    log.close()
