"""Tenants and their API keys, kept in the market's SQLite file.

A key looks like ``wk_<id>_<secret>``: ``wk_<id>`` is the key id, public and the table's
primary key, so authenticating is one indexed lookup whatever the number of keys; the
secret is 32 random bytes from :mod:`secrets`.

Only SHA-256 of the whole key is stored. A slow password hash (bcrypt, scrypt, Argon2)
exists to make guessing *low-entropy* secrets expensive; a 256-bit random secret cannot
be guessed at any hash speed, so the slow hash would only add tens of milliseconds to
every request of a 25 ms budget and protect nothing. The stored and computed digests
are compared with :func:`hmac.compare_digest` so the time taken does not reveal how
many leading characters matched.

A key has a scope. A plain key (``ask``) asks, reads and watches. Writing the shared
market takes a key made for it (``events``), bound to one event source: every event it
sends carries that source whatever its body says, so a key can write only under its own
name and its event ids (unique per source) cannot pre-empt another source's.

Authenticated rows are cached in process for ``cache_ttl`` seconds (2 by default): a
key revoked through this store is evicted at once, and one revoked by another process
(``worthit keys revoke`` beside a running server) stops working within ``cache_ttl``,
when the cached row expires and the next request reads the table again.
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import re
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path

from worthit.db.connection import Connection
from worthit.db.migrations import Migration, migrate_component
from worthit.db.open import open_database
from worthit.text.lru import LRU

KEY_PREFIX = "wk_"
ID_HEX_CHARS = 12
SECRET_BYTES = 32
DEFAULT_CACHE_TTL_S = 2.0
CACHE_MAX_ENTRIES = 10_000
MAX_PER_MINUTE = 1_000_000_000
MAX_KEY_CHARS = 256

_TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_KEY_ID = re.compile(rf"{KEY_PREFIX}[0-9a-f]{{{ID_HEX_CHARS}}}")
_SECRET = re.compile(r"[A-Za-z0-9_-]{20,128}")
_SOURCE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
"""The events' `source` pattern (market/events.py)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    key_id                TEXT PRIMARY KEY,
    key_hash              TEXT NOT NULL,
    tenant                TEXT NOT NULL,
    priority              TEXT NOT NULL CHECK (priority IN ('high', 'medium', 'low')),
    requests_per_minute   INTEGER NOT NULL CHECK (requests_per_minute > 0),
    llm_tokens_per_minute INTEGER NOT NULL CHECK (llm_tokens_per_minute > 0),
    created               TEXT NOT NULL,
    revoked_at            TEXT
);
CREATE INDEX IF NOT EXISTS api_keys_tenant ON api_keys(tenant);
"""
_PG_SCHEMA = """
CREATE TABLE api_keys (
    key_id                TEXT COLLATE "C" PRIMARY KEY,
    key_hash              TEXT NOT NULL,
    tenant                TEXT COLLATE "C" NOT NULL,
    priority              TEXT NOT NULL CHECK (priority IN ('high', 'medium', 'low')),
    requests_per_minute   BIGINT NOT NULL CHECK (requests_per_minute > 0),
    llm_tokens_per_minute BIGINT NOT NULL CHECK (llm_tokens_per_minute > 0),
    created               TEXT NOT NULL,
    revoked_at            TEXT,
    seq                   BIGINT GENERATED ALWAYS AS IDENTITY
);
CREATE INDEX api_keys_tenant ON api_keys(tenant);
"""
_SCOPES = """
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'ask'
    CHECK (scope IN ('ask', 'events'));
ALTER TABLE api_keys ADD COLUMN source TEXT
    CHECK ((scope = 'events') = (source IS NOT NULL));
"""
_PG_SCOPES = """
ALTER TABLE api_keys ADD COLUMN scope TEXT NOT NULL DEFAULT 'ask'
    CHECK (scope IN ('ask', 'events'));
ALTER TABLE api_keys ADD COLUMN source TEXT COLLATE "C";
ALTER TABLE api_keys ADD CONSTRAINT api_keys_source
    CHECK ((scope = 'events') = (source IS NOT NULL));
"""
MIGRATIONS = (
    Migration(1, "api keys", _SCHEMA, postgres=_PG_SCHEMA),
    Migration(2, "key scopes and bound sources", _SCOPES, postgres=_PG_SCOPES),
)
"""On SQLite, version 1 is the table that files made before versioning already have.
Version 2 makes every existing key a plain one (``ask``): none of them writes events
until a key is created for it."""
_LIST = {
    "sqlite": "ORDER BY created, rowid",
    "postgresql": "ORDER BY created, seq",
}
"""Oldest first, and in the order of issue within one second: PostgreSQL has no rowid."""

_COLUMNS = (
    "key_id, key_hash, tenant, priority, requests_per_minute, llm_tokens_per_minute, "
    "created, revoked_at, scope, source"
)


class KeyScope(StrEnum):
    """What a key may do: plain keys ask, read and watch; event keys write the market."""

    ASK = "ask"
    EVENTS = "events"


class PriorityClass(StrEnum):
    """How urgently a tenant's requests are served; the server maps it to the engine's."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class AuthError(Exception):
    """A key was refused; ``status`` is the HTTP status the server should answer with."""

    status = 401


class InvalidKeyError(AuthError):
    """Not a key this service issued: answer 401 and say nothing more."""


class MalformedKeyError(InvalidKeyError):
    """The text does not have the shape of a worthit key."""


class UnknownKeyError(InvalidKeyError):
    """Well-formed, but no such key id, or the secret does not match."""


class RevokedKeyError(AuthError):
    """A real key that was revoked: 403, since who is asking is known and refused."""

    status = 403

    def __init__(self, key_id: str, revoked_at: str) -> None:
        super().__init__(f"API key {key_id} was revoked at {revoked_at}")
        self.key_id = key_id
        self.revoked_at = revoked_at


class KeyNotFoundError(LookupError):
    """``revoke`` was given a key id that does not exist."""

    def __init__(self, key_id: str) -> None:
        super().__init__(f"no API key {key_id!r}")
        self.key_id = key_id


@dataclass(frozen=True, slots=True)
class Tenant:
    """Who an authenticated request belongs to, and the limits it runs under."""

    name: str
    key_id: str
    priority: PriorityClass
    requests_per_minute: int
    llm_tokens_per_minute: int
    scope: KeyScope = KeyScope.ASK
    source: str | None = None
    """The event source an ``events`` key writes as; None for a plain key."""


@dataclass(frozen=True, slots=True)
class ApiKeyInfo:
    """One row of ``api_keys`` without its hash: what ``keys list`` shows."""

    key_id: str
    tenant: str
    priority: PriorityClass
    requests_per_minute: int
    llm_tokens_per_minute: int
    created: str
    revoked_at: str | None
    scope: KeyScope = KeyScope.ASK
    source: str | None = None

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None

    def tenant_view(self) -> Tenant:
        return Tenant(
            name=self.tenant,
            key_id=self.key_id,
            priority=self.priority,
            requests_per_minute=self.requests_per_minute,
            llm_tokens_per_minute=self.llm_tokens_per_minute,
            scope=self.scope,
            source=self.source,
        )

    def to_dict(self) -> dict[str, str | int | None]:
        return {
            "key_id": self.key_id,
            "tenant": self.tenant,
            "priority": self.priority.value,
            "requests_per_minute": self.requests_per_minute,
            "llm_tokens_per_minute": self.llm_tokens_per_minute,
            "created": self.created,
            "revoked_at": self.revoked_at,
            "scope": self.scope.value,
            "source": self.source,
        }


@dataclass(frozen=True, slots=True)
class _Cached:
    key_hash: str
    info: ApiKeyInfo
    read_at: float


class TenantStore:
    """API keys in the ``api_keys`` table of the SQLite file at ``path``.

    The table lives beside the market's because a deployment then has one file to back
    up and one path to configure; it is created on first use and the market schema's
    migrations never touch it.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        cache_ttl: float = DEFAULT_CACHE_TTL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = str(path)
        self._cache_ttl = cache_ttl
        self._clock = clock
        self._cache: LRU[str, _Cached] = LRU(CACHE_MAX_ENTRIES)
        self._cache_lock = threading.Lock()
        self._db = open_database(path, lambda conn: migrate_component(conn, "tenants", MIGRATIONS))

    def create(
        self,
        tenant: str,
        priority: PriorityClass | str,
        rpm: int,
        tpm: int,
        *,
        scope: KeyScope | str = KeyScope.ASK,
        source: str | None = None,
    ) -> tuple[str, str]:
        """Issue a key; returns ``(key_id, plaintext_key)``. The plaintext is not kept.

        An ``events`` key needs the `source` it writes as; a plain key takes none."""
        _check_tenant(tenant)
        level = _priority(priority)
        _check_per_minute("rpm", rpm)
        _check_per_minute("tpm", tpm)
        kind = _scope(scope)
        _check_source(kind, source)
        secret = secrets.token_urlsafe(SECRET_BYTES)
        now = _utc_now()
        conn = self._conn()
        while True:
            key_id = KEY_PREFIX + secrets.token_hex(ID_HEX_CHARS // 2)
            key = f"{key_id}_{secret}"
            try:
                conn.execute(
                    f"INSERT INTO api_keys ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, NULL, ?, ?)",
                    (key_id, _digest(key), tenant, level.value, rpm, tpm, now, kind.value, source),
                )
            except self._db.errors.integrity:
                continue  # a 48-bit id collided with an existing one: draw another
            return key_id, key

    def authenticate(self, key: str) -> Tenant:
        """The tenant a key belongs to.

        Raises :class:`MalformedKeyError` or :class:`UnknownKeyError` (both 401) and
        :class:`RevokedKeyError` (403).
        """
        key_id = parse_key_id(key)
        digest = _digest(key)
        cached = self._cached(key_id)
        if cached is None:
            row = self._row(key_id)
            if row is None:
                raise UnknownKeyError("unknown API key")
            cached = _Cached(row[0], row[1], self._clock())
            self._remember(key_id, cached)
        if not hmac.compare_digest(cached.key_hash, digest):
            raise UnknownKeyError("unknown API key")
        info = cached.info
        if info.revoked_at is not None:
            raise RevokedKeyError(info.key_id, info.revoked_at)
        return info.tenant_view()

    def list(self) -> builtins.list[ApiKeyInfo]:
        """Every key, revoked ones included, oldest first."""
        rows = (
            self._conn()
            .execute(f"SELECT {_COLUMNS} FROM api_keys {_LIST[self._db.dialect]}")
            .fetchall()
        )
        return [_info(row) for row in rows]

    def bound_to(self, source: str) -> builtins.list[ApiKeyInfo]:
        """The unrevoked ``events`` keys that write as `source`."""
        rows = (
            self._conn()
            .execute(
                f"SELECT {_COLUMNS} FROM api_keys WHERE scope = 'events' AND source = ? "
                f"AND revoked_at IS NULL {_LIST[self._db.dialect]}",
                (source,),
            )
            .fetchall()
        )
        return [_info(row) for row in rows]

    def get(self, key_id: str) -> ApiKeyInfo | None:
        row = self._row(key_id)
        return None if row is None else row[1]

    def revoke(self, key_id: str) -> ApiKeyInfo:
        """Revoke a key by its id (or by the whole key, when that is what leaked).

        Revoking twice keeps the first time; an unknown id raises :class:`KeyNotFoundError`.
        """
        key_id = _as_key_id(key_id)
        self._conn().execute(
            "UPDATE api_keys SET revoked_at = ? WHERE key_id = ? AND revoked_at IS NULL",
            (_utc_now(), key_id),
        )
        with self._cache_lock:
            self._cache.pop(key_id)
        info = self.get(key_id)
        if info is None:
            raise KeyNotFoundError(key_id)
        return info

    def close(self) -> None:
        """Close every thread's connection; a later call opens afresh."""
        self._db.close()

    def _conn(self) -> Connection:
        return self._db.connection()

    def _row(self, key_id: str) -> tuple[str, ApiKeyInfo] | None:
        row = (
            self._conn()
            .execute(f"SELECT {_COLUMNS} FROM api_keys WHERE key_id = ?", (key_id,))
            .fetchone()
        )
        return None if row is None else (row[1], _info(row))

    def _cached(self, key_id: str) -> _Cached | None:
        with self._cache_lock:
            cached = self._cache.peek(key_id)
            if cached is None:
                return None
            if self._clock() - cached.read_at >= self._cache_ttl:
                self._cache.pop(key_id)
                return None
            return self._cache.get(key_id)

    def _remember(self, key_id: str, cached: _Cached) -> None:
        with self._cache_lock:
            self._cache.put(key_id, cached)


def parse_key_id(key: str) -> str:
    """The ``wk_<id>`` part of a key, or :class:`MalformedKeyError`.

    The id has a fixed length because the secret's alphabet includes ``_``.
    """
    id_end = len(KEY_PREFIX) + ID_HEX_CHARS
    key_id, sep, secret = key[:id_end], key[id_end : id_end + 1], key[id_end + 1 :]
    if (
        len(key) > MAX_KEY_CHARS
        or sep != "_"
        or not _KEY_ID.fullmatch(key_id)
        or not _SECRET.fullmatch(secret)
    ):
        raise MalformedKeyError("malformed API key")
    return key_id


def _as_key_id(text: str) -> str:
    if _KEY_ID.fullmatch(text):
        return text
    try:
        return parse_key_id(text)
    except MalformedKeyError:
        raise KeyNotFoundError(text) from None


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _info(
    row: tuple[str, str, str, str, int, int, str, str | None, str, str | None],
) -> ApiKeyInfo:
    key_id, _hash, tenant, priority, rpm, tpm, created, revoked_at, scope, source = row
    return ApiKeyInfo(
        key_id, tenant, PriorityClass(priority), rpm, tpm, created, revoked_at,
        KeyScope(scope), source,
    )  # fmt: skip


def _scope(value: KeyScope | str) -> KeyScope:
    try:
        return KeyScope(value)
    except ValueError:
        choices = ", ".join(s.value for s in KeyScope)
        raise ValueError(f"scope must be one of {choices}, got {value!r}") from None


def _check_source(scope: KeyScope, source: str | None) -> None:
    """An events key is bound to exactly one source; a plain key writes none."""
    if scope is KeyScope.ASK:
        if source is not None:
            raise ValueError("source is only for a key of scope events")
        return
    if source is None or not _SOURCE_NAME.fullmatch(source):
        raise ValueError(
            "an events key needs a source: 1–64 letters, digits, '.', '_' or '-', starting "
            f"with a letter or digit, got {source!r}"
        )


def _priority(value: PriorityClass | str) -> PriorityClass:
    try:
        return PriorityClass(value)
    except ValueError:
        choices = ", ".join(p.value for p in PriorityClass)
        raise ValueError(f"priority must be one of {choices}, got {value!r}") from None


def _check_tenant(name: str) -> None:
    if not _TENANT_NAME.fullmatch(name):
        raise ValueError(
            "tenant must be 1–64 letters, digits, '.', '_' or '-', starting with a letter "
            f"or digit, got {name!r}"
        )


def _check_per_minute(field: str, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_PER_MINUTE:
        raise ValueError(f"{field} must be an integer from 1 to {MAX_PER_MINUTE}, got {value!r}")


def _utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
