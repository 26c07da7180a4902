"""The explanation store: each checked explanation, kept under its key for every asker.

Persisted in the market's SQLite file (its own table and migrations, see
`migrate_component`), so it survives restarts; bounded, least recently used first out;
with a small in-memory front so a hit costs a dict lookup, not a query, and a miss
repeated within `ABSENT_FOR_MS` costs one too. A negative entry
(every try failed the checks) is kept too, so the generator does not retry the same
inputs in a loop; it tries again after `RETRY_FAILED_AFTER_MS`, with other seeds.
`ExplanationStore` is the interface another backend (Redis, when several processes share
the store) implements.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Protocol

from worthit.db.connection import Connection
from worthit.db.migrations import Migration, migrate_component
from worthit.db.open import open_database
from worthit.text.lru import LRU
from worthit.text.time import Clock, now_ms

DEFAULT_CAPACITY = 100_000
"""Explanations kept (about 250 bytes each): 2,000 products in two languages are 4,000."""
MEMORY_ENTRIES = 8192
TOUCH_FLUSH_MS = 30_000
"""How long a hit's new `last_used` may stay in memory before it is written: LRU order
need not be exact to the second, and a write per hit would put SQLite on the hot path."""
RETRY_FAILED_AFTER_MS = 10 * 60_000
"""How long a failed entry stands before the next round of tries (`generation.MAX_TRIES`)."""
ABSENT_FOR_MS = 2_000
"""How long a miss is remembered: a burst's asks for one product cost one query, and
another process's write of that key (the generator in `--workers`' worker 0) is seen
within this; this process's own writes clear it at once."""

MIGRATIONS = (
    Migration(
        1,
        "explanation store",
        """
CREATE TABLE explanations (
    key          TEXT PRIMARY KEY,
    text         TEXT,
    model        TEXT NOT NULL,
    sku          TEXT NOT NULL,
    language     TEXT NOT NULL,
    verdict      TEXT NOT NULL,
    generated_at INTEGER NOT NULL,
    method       TEXT NOT NULL,
    tries        INTEGER NOT NULL,
    sampling     TEXT NOT NULL,
    last_used    INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX explanations_last_used ON explanations(last_used);
""",
    ),
    Migration(
        2,
        "explanations by product",
        """
CREATE INDEX explanations_by_product ON explanations(sku, language, generated_at);
""",
    ),
)


@dataclass(frozen=True, slots=True)
class StoredExplanation:
    key: str
    text: str | None
    """The kept text, the verdict's label first; None when every try failed."""
    model: str
    """The model file's identity (`model_identity`)."""
    sku: str
    """Who it was first written for; the key, not the sku, decides who gets it."""
    language: str
    verdict: str
    generated_at_ms: int
    method: str
    """"live" (written while a shopper waited), "background" (in the engine's idle time)
    or "warm" (`worthit explain --warm`)."""
    tries: int
    sampling: str
    """How the kept try was drawn: "greedy", or "temperature 0.7, seed 3"."""
    last_used_ms: int = 0

    @property
    def failed(self) -> bool:
        return self.text is None


class ExplanationStore(Protocol):
    def get(self, key: str) -> StoredExplanation | None: ...
    def latest(
        self, sku: str, language: str, model: str, verdict: str
    ) -> StoredExplanation | None: ...
    def put(self, entry: StoredExplanation) -> None: ...
    def __len__(self) -> int: ...
    def close(self) -> None: ...


_COLUMNS = (
    "key, text, model, sku, language, verdict, generated_at, method, tries, sampling, last_used"
)
_REPLACE = "ON CONFLICT (key) DO UPDATE SET " + ", ".join(
    f"{column} = excluded.{column}" for column in _COLUMNS.split(", ")[1:]
)
"""SQLite's INSERT OR REPLACE, said the way PostgreSQL understands too."""
_BYTES = {"sqlite": "LENGTH(CAST(text AS BLOB))", "postgresql": "octet_length(text)"}


class SqliteExplanationStore:
    def __init__(
        self, path: str | Path, capacity: int = DEFAULT_CAPACITY, clock: Clock = now_ms
    ) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._clock = clock
        self._db = open_database(
            path, lambda conn: migrate_component(conn, "explanations", MIGRATIONS)
        )
        self._lock = threading.Lock()
        self._memory: LRU[str, StoredExplanation] = LRU(MEMORY_ENTRIES)
        self._absent: LRU[str, int] = LRU(MEMORY_ENTRIES)
        """Keys missed lately, with when the miss is forgotten."""
        self._touched: dict[str, int] = {}
        self._flushed_at = clock()
        self._count = self._query_count()
        self.hits = 0
        self.misses = 0

    def get(self, key: str) -> StoredExplanation | None:
        now = self._clock()
        with self._lock:
            entry = self._memory.get(key)
            if entry is None and (self._absent.peek(key) or now) > now:
                self.misses += 1
                return None
        if entry is None:
            row = (
                self._db.connection()
                .execute(f"SELECT {_COLUMNS} FROM explanations WHERE key = ?", (key,))
                .fetchone()
            )
            if row is None:
                self.misses += 1
                self._remember_absent(key, now)
                return None
            entry = StoredExplanation(*row)
            self._remember(entry)
        self.hits += 1
        with self._lock:
            self._touched[key] = now
            due = now - self._flushed_at >= TOUCH_FLUSH_MS
        if due:
            self.flush()
        return entry

    def latest(self, sku: str, language: str, model: str, verdict: str) -> StoredExplanation | None:
        """The newest kept text `model` wrote for this product, language and verdict,
        whatever inputs it was written for: a live feed restates a best seller's price or
        stock every few seconds, and a text that names none of what changed still holds.
        Its caller serves it only once it passes the checks against today's facts."""
        row = (
            self._db.connection()
            .execute(
                f"SELECT {_COLUMNS} FROM explanations WHERE sku = ? AND language = ? "
                "AND model = ? AND verdict = ? AND text IS NOT NULL "
                "ORDER BY generated_at DESC LIMIT 1",
                (sku, language, model, verdict),
            )
            .fetchone()
        )
        return None if row is None else StoredExplanation(*row)

    def put(self, entry: StoredExplanation) -> None:
        entry = replace(entry, last_used_ms=self._clock())
        with self._db.transaction() as conn:
            existed = conn.execute("SELECT 1 FROM explanations WHERE key = ?", (entry.key,))
            new = existed.fetchone() is None
            conn.execute(
                f"INSERT INTO explanations ({_COLUMNS}) "
                f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) {_REPLACE}",
                (entry.key, entry.text, entry.model, entry.sku, entry.language, entry.verdict,
                 entry.generated_at_ms, entry.method, entry.tries, entry.sampling,
                 entry.last_used_ms),
            )  # fmt: skip
            if new:
                self._count += 1
            if self._count > self.capacity:
                self._evict(conn, self._count - self.capacity)
        self._remember(entry)

    def flush(self) -> None:
        """Write the `last_used` of recent hits (the LRU order eviction follows)."""
        with self._lock:
            touched, self._touched = self._touched, {}
            self._flushed_at = self._clock()
        if touched:
            with self._db.transaction() as conn:
                conn.executemany(
                    "UPDATE explanations SET last_used = ? WHERE key = ?",
                    [(ms, key) for key, ms in touched.items()],
                )

    def __len__(self) -> int:
        return self._count

    def text_bytes(self) -> int:
        row = self._db.connection().execute(
            f"SELECT SUM({_BYTES[self._db.dialect]}) FROM explanations"
        )
        return int(row.fetchone()[0] or 0)

    def close(self) -> None:
        self.flush()
        self._db.close()

    def _evict(self, conn: Connection, n: int) -> None:
        conn.execute(
            "DELETE FROM explanations WHERE key IN "
            "(SELECT key FROM explanations ORDER BY last_used LIMIT ?)",
            (n,),
        )
        self._count -= n
        with self._lock:
            self._memory.clear()  # cheaper than finding which of them went

    def _remember_absent(self, key: str, now: int) -> None:
        with self._lock:
            self._absent.put(key, now + ABSENT_FOR_MS)

    def _remember(self, entry: StoredExplanation) -> None:
        with self._lock:
            self._absent.pop(entry.key)
            self._memory.put(entry.key, entry)

    def _query_count(self) -> int:
        return int(self._db.connection().execute("SELECT COUNT(*) FROM explanations").fetchone()[0])
