"""What shoppers did after an answer, and the backtest's tallies: calibration's evidence.

One row per (tenant, request id), so feedback is idempotent: the same outcome again
changes nothing and is reported as a duplicate. A different outcome is a conflict, with
one exception: `returned` may follow `bought`, because a return is how a purchase ends,
not a change of mind about what happened. Last-wins would let a retried old request
overwrite a newer outcome; refusing makes the client see the disagreement.

The row keeps the answer's verdict, product and category as the server found them in the
audit log (never as the client says), so calibration never trusts the client for what
was advised. The backtest's outcomes are kept as counts per (verdict, category, rule
confidence, success), replaced as a whole by each `worthit calibration --save`.

This lives in the market layer, beside the other stores on the market's file; what an
outcome means for the advice is decided in decide/calibration.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from worthit.db.migrations import Migration, migrate_component
from worthit.db.open import open_database

Outcome = Literal["bought", "waited", "dismissed", "returned"]
OUTCOMES: tuple[Outcome, ...] = get_args(Outcome)
FOLLOWS: dict[str, str] = {"returned": "bought"}
"""An outcome that may replace an earlier one for the same request: the return of a buy."""
NO_TENANT = ""
"""The key of feedback sent without a tenant (the keyless demo)."""

MIGRATIONS = (
    Migration(
        1,
        "feedback and backtest evidence",
        """
CREATE TABLE feedback (
    tenant      TEXT NOT NULL,
    request_id  TEXT NOT NULL,
    outcome     TEXT NOT NULL,
    verdict     TEXT,
    sku         TEXT,
    category    TEXT,
    confidence  REAL,
    answered_ms INTEGER NOT NULL,
    received_ms INTEGER NOT NULL,
    PRIMARY KEY (tenant, request_id)
) WITHOUT ROWID;
CREATE TABLE backtest_evidence (
    verdict    TEXT NOT NULL,
    category   TEXT NOT NULL,
    confidence REAL NOT NULL,
    success    INTEGER NOT NULL,
    n          INTEGER NOT NULL,
    PRIMARY KEY (verdict, category, confidence, success)
) WITHOUT ROWID;
""",
    ),
)


class FeedbackConflictError(ValueError):
    """The request already has another outcome that this one may not replace."""

    def __init__(self, request_id: str, stored: str, sent: str) -> None:
        super().__init__(
            f"request {request_id!r} already has the outcome {stored!r}; {sent!r} may not "
            "replace it"
        )
        self.request_id = request_id
        self.stored = stored
        self.sent = sent


@dataclass(frozen=True, slots=True)
class Answered:
    """What the answer to a request advised, as the audit log and the market say."""

    verdict: str | None
    sku: str | None
    category: str | None
    confidence: float | None
    """The rule's confidence as the shopper was shown it; None when it cannot be restated."""
    answered_ms: int


@dataclass(frozen=True, slots=True)
class Feedback:
    tenant: str | None
    request_id: str
    outcome: str
    answer: Answered
    received_ms: int


@dataclass(frozen=True, slots=True)
class Recorded:
    feedback: Feedback
    """The feedback as stored now."""
    duplicate: bool
    replaced: str | None = None
    """The outcome this one replaced (`bought` under a `returned`), if any."""


@dataclass(frozen=True, slots=True)
class BacktestTally:
    verdict: str
    category: str
    confidence: float
    success: bool
    n: int


class FeedbackStore:
    """Feedback and backtest evidence in the database at `path` (its own tables)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._db = open_database(path, lambda conn: migrate_component(conn, "feedback", MIGRATIONS))

    def get(self, tenant: str | None, request_id: str) -> Feedback | None:
        row = (
            self._db.connection()
            .execute(f"SELECT {_COLUMNS} FROM feedback WHERE tenant = ? AND request_id = ?",
                     (tenant or NO_TENANT, request_id))
            .fetchone()
        )  # fmt: skip
        return None if row is None else _feedback(row)

    def record(self, feedback: Feedback) -> Recorded:
        """Store `feedback` once (see the module docstring); `FeedbackConflictError` when
        the request has an outcome this one may not replace."""
        if feedback.outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {', '.join(OUTCOMES)}")
        tenant = feedback.tenant or NO_TENANT
        with self._db.transaction() as conn:
            row = conn.execute(
                f"SELECT {_COLUMNS} FROM feedback WHERE tenant = ? AND request_id = ?",
                (tenant, feedback.request_id),
            ).fetchone()
            if row is not None:
                stored = _feedback(row)
                if stored.outcome == feedback.outcome:
                    return Recorded(stored, duplicate=True)
                if FOLLOWS.get(feedback.outcome) != stored.outcome:
                    raise FeedbackConflictError(
                        feedback.request_id, stored.outcome, feedback.outcome
                    )
                conn.execute(
                    "UPDATE feedback SET outcome = ?, received_ms = ? "
                    "WHERE tenant = ? AND request_id = ?",
                    (feedback.outcome, feedback.received_ms, tenant, feedback.request_id),
                )
                return Recorded(feedback, duplicate=False, replaced=stored.outcome)
            a = feedback.answer
            conn.execute(
                f"INSERT INTO feedback ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (tenant, feedback.request_id, feedback.outcome, a.verdict, a.sku, a.category,
                 a.confidence, a.answered_ms, feedback.received_ms),
            )  # fmt: skip
        return Recorded(feedback, duplicate=False)

    def all(self) -> Iterator[Feedback]:
        rows = self._db.connection().execute(
            f"SELECT {_COLUMNS} FROM feedback ORDER BY received_ms"
        )
        for row in rows:
            yield _feedback(row)

    def replace_backtest(self, tallies: Iterable[BacktestTally]) -> None:
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM backtest_evidence")
            conn.executemany(
                "INSERT INTO backtest_evidence (verdict, category, confidence, success, n) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT (verdict, category, confidence, success) "
                "DO UPDATE SET n = backtest_evidence.n + excluded.n",
                [(t.verdict, t.category, t.confidence, int(t.success), t.n) for t in tallies],
            )

    def backtest(self) -> list[BacktestTally]:
        rows = self._db.connection().execute(
            "SELECT verdict, category, confidence, success, n FROM backtest_evidence "
            "ORDER BY verdict, category, confidence, success"
        )
        return [BacktestTally(v, c, conf, bool(s), n) for v, c, conf, s, n in rows]

    def close(self) -> None:
        self._db.close()


_COLUMNS = (
    "tenant, request_id, outcome, verdict, sku, category, confidence, answered_ms, received_ms"
)


def _feedback(row: tuple[Any, ...]) -> Feedback:
    tenant, request_id, outcome, verdict, sku, category, confidence, answered, received = row
    return Feedback(
        tenant=None if tenant == NO_TENANT else str(tenant),
        request_id=str(request_id),
        outcome=str(outcome),
        answer=Answered(
            verdict=None if verdict is None else str(verdict),
            sku=None if sku is None else str(sku),
            category=None if category is None else str(category),
            confidence=None if confidence is None else float(confidence),
            answered_ms=int(answered),
        ),
        received_ms=int(received),
    )
