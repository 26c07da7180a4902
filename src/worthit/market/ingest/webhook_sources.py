"""Named event sources that sign what they send, and the delivery ids already taken.

A source (`pos`, `feed.eu`) is who the `source` field of an event names; one that posts
signed webhooks has a secret here, `whsec_` and base64 as Standard Webhooks writes
secrets. The secret is kept as it is, not hashed: HMAC verification recomputes the
signature with the secret itself, so the verifier must be able to read it back. A copy
of the database file is therefore enough to sign as any of its sources; keep the file
as private as the secrets, and replace a source's secret (`remove`, then `add`) when a
copy leaks.

Delivery ids seen are kept in the same file, each until its message's timestamp has left
the tolerance window (after that the signature check alone refuses it), so replay
refusal holds across restarts and across processes on the file. This lives in the
market layer, beside the events it admits, so the CLI can manage it without importing
the server; checking signatures on HTTP requests stays in http/webhooks_api.py.
"""

from __future__ import annotations

import base64
import builtins
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from worthit.db.migrations import Migration, migrate_component
from worthit.db.open import open_database

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
"""Standard Webhooks asks for 24 to 64 random bytes."""
MAX_DELIVERY_ID_CHARS = 256
PRUNE_EVERY = 256
"""Deliveries remembered between two sweeps of expired ids."""

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""The events' `source` pattern (market/events.py): the webhook names the source."""

MIGRATIONS = (
    Migration(
        1,
        "webhook sources and delivery ids",
        """
CREATE TABLE event_sources (
    name    TEXT PRIMARY KEY,
    secret  TEXT NOT NULL,
    created TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE source_deliveries (
    source      TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    expires_ms  INTEGER NOT NULL,
    PRIMARY KEY (source, delivery_id)
) WITHOUT ROWID;
CREATE INDEX source_deliveries_expiry ON source_deliveries(expires_ms);
""",
    ),
)


class SourceExistsError(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"source {name!r} exists already: remove it first to replace its secret")
        self.name = name


class SourceNotFoundError(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no source {name!r}")
        self.name = name


@dataclass(frozen=True, slots=True)
class SourceInfo:
    """A source as `sources list` shows it: never its secret."""

    name: str
    created: str

    def to_dict(self) -> dict[str, str]:
        return {"name": self.name, "created": self.created}


class SourceStore:
    """Sources and their delivery ids in the database at `path` (its own tables)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._db = open_database(path, lambda conn: migrate_component(conn, "sources", MIGRATIONS))
        self._since_prune = 0

    def add(self, name: str) -> str:
        """Register `name` with a new random secret, and return that secret."""
        check_name(name)
        secret = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()
        try:
            self._db.connection().execute(
                "INSERT INTO event_sources (name, secret, created) VALUES (?, ?, ?)",
                (name, secret, datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")),
            )
        except self._db.errors.integrity:
            raise SourceExistsError(name) from None
        return secret

    def secret(self, name: str) -> str | None:
        row = (
            self._db.connection()
            .execute("SELECT secret FROM event_sources WHERE name = ?", (name,))
            .fetchone()
        )
        return None if row is None else str(row[0])

    def list(self) -> builtins.list[SourceInfo]:
        rows = (
            self._db.connection()
            .execute("SELECT name, created FROM event_sources ORDER BY name")
            .fetchall()
        )
        return [SourceInfo(name, created) for name, created in rows]

    def remove(self, name: str) -> None:
        """Forget a source and its delivery ids: its webhooks are refused from now on."""
        with self._db.transaction() as conn:
            gone = conn.execute("DELETE FROM event_sources WHERE name = ?", (name,)).rowcount
            conn.execute("DELETE FROM source_deliveries WHERE source = ?", (name,))
        if not gone:
            raise SourceNotFoundError(name)

    def seen(self, source: str, delivery_id: str, now_ms: int) -> bool:
        """Whether this delivery id of `source` was taken and has not yet expired."""
        row = (
            self._db.connection()
            .execute(
                "SELECT 1 FROM source_deliveries WHERE source = ? AND delivery_id = ? "
                "AND expires_ms >= ?",
                (source, delivery_id, now_ms),
            )
            .fetchone()
        )
        return row is not None

    def take(self, source: str, delivery_id: str, expires_ms: int, now_ms: int) -> bool:
        """Record a delivery id until `expires_ms`; False when it was taken already (and
        has not expired). Sweeps expired ids now and then, so the table stays small."""
        with self._db.transaction() as conn:
            self._since_prune += 1
            if self._since_prune >= PRUNE_EVERY:
                self._since_prune = 0
                conn.execute("DELETE FROM source_deliveries WHERE expires_ms < ?", (now_ms,))
            changed = conn.execute(
                "INSERT INTO source_deliveries (source, delivery_id, expires_ms) "
                "VALUES (?, ?, ?) ON CONFLICT (source, delivery_id) DO UPDATE "
                "SET expires_ms = excluded.expires_ms WHERE source_deliveries.expires_ms < ?",
                (source, delivery_id, expires_ms, now_ms),
            ).rowcount
        return changed > 0

    def close(self) -> None:
        self._db.close()


def check_name(name: str) -> None:
    if not _NAME.fullmatch(name):
        raise ValueError(
            "a source name is 1 to 64 letters, digits, '.', '_' or '-', starting with a "
            f"letter or digit, got {name!r}"
        )
