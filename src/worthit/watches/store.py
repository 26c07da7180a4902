"""Price watches and their pending notifications, in the market's database.

A shopper told WAIT leaves a watch: "tell me when S1 is at or under 249", "tell me when
S1 turns BUY". The watches live beside the market so they survive a restart, and so do
the webhook deliveries not yet acknowledged: a notification is written here in the same
transaction that marks its watch fired, so a crash between "the condition became true"
and "the receiver said 2xx" loses nothing (at-least-once) and fires nothing twice.

This is storage only: which condition holds is the answer layer's (watches/evaluate.py),
and HTTP delivery the server's (watches/deliver.py). A tenant is a name; the
keyless demo's watches all belong to the tenant "" (`DEMO_TENANT`).
"""

from __future__ import annotations

import base64
import builtins
import json
import secrets
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pathlib import Path
from typing import Any

from worthit.db.migrations import Migration, migrate_component
from worthit.db.open import open_database
from worthit.text.time import iso

DEMO_TENANT = ""
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32
RECENT_DELIVERIES = 5
"""Deliveries of a watch that a listing shows, newest first."""

MIGRATIONS = (
    Migration(
        1,
        "price watches and their deliveries",
        """
CREATE TABLE watches (
    watch_id     TEXT PRIMARY KEY,
    tenant       TEXT NOT NULL,
    sku          TEXT NOT NULL,
    condition    TEXT NOT NULL,
    target       REAL,
    delivery     TEXT NOT NULL,
    url          TEXT,
    secret       TEXT,
    state        TEXT NOT NULL,
    created_ms   INTEGER NOT NULL,
    fired_ms     INTEGER,
    notification TEXT
) WITHOUT ROWID;
CREATE INDEX watches_active_sku ON watches(sku) WHERE state = 'active';
CREATE INDEX watches_tenant ON watches(tenant, created_ms);
CREATE TABLE watch_deliveries (
    delivery_id TEXT PRIMARY KEY,
    watch_id    TEXT NOT NULL REFERENCES watches(watch_id) ON DELETE CASCADE,
    payload     TEXT NOT NULL,
    state       TEXT NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    due_ms      INTEGER NOT NULL,
    created_ms  INTEGER NOT NULL,
    last_error  TEXT
) WITHOUT ROWID;
CREATE INDEX watch_deliveries_due ON watch_deliveries(due_ms) WHERE state = 'pending';
CREATE INDEX watch_deliveries_watch ON watch_deliveries(watch_id, created_ms);
""",
    ),
)


class Condition(StrEnum):
    PRICE_AT_MOST = "price_at_most"
    """The current price is at or under the watch's target."""
    VERDICT_BUY = "verdict_buy"
    """The verdict is BUY."""


class Delivery(StrEnum):
    WEBHOOK = "webhook"
    SSE = "sse"


class WatchState(StrEnum):
    ACTIVE = "active"
    FIRED = "fired"


class DeliveryState(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class DeliveryRecord:
    delivery_id: str
    watch_id: str
    payload: str
    """The exact JSON body every attempt sends (and signs): one id, one body."""
    state: DeliveryState
    attempts: int
    due_ms: int
    created_ms: int
    last_error: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.delivery_id,
            "state": self.state.value,
            "attempts": self.attempts,
            "created": iso(self.created_ms),
            "last_error": self.last_error,
        }


@dataclass(frozen=True, slots=True)
class Watch:
    watch_id: str
    tenant: str
    sku: str
    condition: Condition
    target: float | None
    delivery: Delivery
    url: str | None
    secret: str | None
    state: WatchState
    created_ms: int
    fired_ms: int | None
    notification: dict[str, Any] | None
    deliveries: tuple[DeliveryRecord, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """As the API lists it: never the secret."""
        return {
            "id": self.watch_id,
            "sku": self.sku,
            "condition": self.condition.value,
            "target": self.target,
            "delivery": self.delivery.value,
            "url": self.url,
            "state": self.state.value,
            "created": iso(self.created_ms),
            "fired": None if self.fired_ms is None else iso(self.fired_ms),
            "notification": self.notification,
            "deliveries": [d.to_dict() for d in self.deliveries],
        }


@dataclass(frozen=True, slots=True)
class PendingDelivery:
    """A webhook to send: what the deliverer needs, read in one query."""

    delivery_id: str
    watch_id: str
    url: str
    secret: str
    payload: str
    attempts: int
    due_ms: int


_WATCH_COLUMNS = (
    "watch_id, tenant, sku, condition, target, delivery, url, secret, state, created_ms, "
    "fired_ms, notification"
)


class WatchStore:
    """Watches and deliveries in the database at `path` (their own tables)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._db = open_database(path, lambda conn: migrate_component(conn, "watches", MIGRATIONS))

    def add(
        self,
        tenant: str,
        sku: str,
        condition: Condition,
        target: float | None,
        delivery: Delivery,
        url: str | None,
        now_ms: int,
    ) -> Watch:
        """A new active watch; a webhook watch gets its own random signing secret."""
        secret = None
        if delivery is Delivery.WEBHOOK:
            secret = SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()
        watch = Watch(
            "w_" + uuid.uuid4().hex, tenant, sku, condition, target, delivery, url, secret,
            WatchState.ACTIVE, now_ms, None, None,
        )  # fmt: skip
        self._db.connection().execute(
            f"INSERT INTO watches ({_WATCH_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (watch.watch_id, tenant, sku, condition.value, target, delivery.value, url, secret,
             watch.state.value, now_ms, None, None),
        )  # fmt: skip
        return watch

    def count(self, tenant: str) -> int:
        row = (
            self._db.connection()
            .execute("SELECT count(*) FROM watches WHERE tenant = ?", (tenant,))
            .fetchone()
        )
        return int(row[0])

    def get(self, tenant: str, watch_id: str) -> Watch | None:
        """The watch, only when it is `tenant`'s: another tenant's id is as good as none."""
        row = (
            self._db.connection()
            .execute(
                f"SELECT {_WATCH_COLUMNS} FROM watches WHERE watch_id = ? AND tenant = ?",
                (watch_id, tenant),
            )
            .fetchone()
        )
        return None if row is None else self._with_deliveries(_watch(row))

    def list(self, tenant: str) -> list[Watch]:
        rows = (
            self._db.connection()
            .execute(
                f"SELECT {_WATCH_COLUMNS} FROM watches WHERE tenant = ? ORDER BY created_ms, "
                "watch_id",
                (tenant,),
            )
            .fetchall()
        )
        return [self._with_deliveries(_watch(row)) for row in rows]

    def remove(self, tenant: str, watch_id: str) -> bool:
        """Delete the watch and its deliveries (pending ones are not sent)."""
        with self._db.transaction() as conn:
            conn.execute("DELETE FROM watch_deliveries WHERE watch_id IN "
                         "(SELECT watch_id FROM watches WHERE watch_id = ? AND tenant = ?)",
                         (watch_id, tenant))  # fmt: skip
            gone = conn.execute(
                "DELETE FROM watches WHERE watch_id = ? AND tenant = ?", (watch_id, tenant)
            ).rowcount
        return gone > 0

    def renew(self, tenant: str, watch_id: str) -> Watch | None:
        """Arm a fired watch again; the next event that meets its condition fires it."""
        self._db.connection().execute(
            "UPDATE watches SET state = ? WHERE watch_id = ? AND tenant = ?",
            (WatchState.ACTIVE.value, watch_id, tenant),
        )
        return self.get(tenant, watch_id)

    def active(self, skus: Iterable[str]) -> builtins.list[Watch]:
        """The armed watches on any of these products."""
        wanted = sorted(set(skus))
        if not wanted:
            return []
        marks = ", ".join("?" * len(wanted))
        rows = (
            self._db.connection()
            .execute(
                f"SELECT {_WATCH_COLUMNS} FROM watches WHERE state = 'active' AND sku IN ({marks})",
                wanted,
            )
            .fetchall()
        )
        return [_watch(row) for row in rows]

    def fire(self, watch_id: str, notification: dict[str, Any], now_ms: int) -> str | None:
        """Mark the watch fired and, for a webhook, queue its delivery, in one transaction.

        Returns the delivery id (the `webhook-id` every attempt carries), "" for an SSE
        watch, or None when the watch was no longer armed (fired or removed meanwhile):
        then nothing is sent, so two evaluations racing fire it once."""
        body = json.dumps(notification, ensure_ascii=False, separators=(",", ":"))
        with self._db.transaction() as conn:
            row = conn.execute(
                "UPDATE watches SET state = 'fired', fired_ms = ?, notification = ? "
                "WHERE watch_id = ? AND state = 'active' RETURNING delivery",
                (now_ms, body, watch_id),
            ).fetchone()
            if row is None:
                return None
            if row[0] != Delivery.WEBHOOK.value:
                return ""
            delivery_id = "msg_" + uuid.uuid4().hex
            conn.execute(
                "INSERT INTO watch_deliveries (delivery_id, watch_id, payload, state, "
                "attempts, due_ms, created_ms) VALUES (?, ?, ?, 'pending', 0, ?, ?)",
                (delivery_id, watch_id, body, now_ms, now_ms),
            )
        return delivery_id

    def due(self, now_ms: int, limit: int) -> builtins.list[PendingDelivery]:
        """Pending webhook deliveries whose next attempt is due, oldest first."""
        rows = (
            self._db.connection()
            .execute(
                "SELECT d.delivery_id, d.watch_id, w.url, w.secret, d.payload, d.attempts, "
                "d.due_ms FROM watch_deliveries d JOIN watches w USING (watch_id) "
                "WHERE d.state = 'pending' AND d.due_ms <= ? ORDER BY d.due_ms LIMIT ?",
                (now_ms, limit),
            )
            .fetchall()
        )
        return [PendingDelivery(*row) for row in rows]

    def next_due_ms(self) -> int | None:
        row = (
            self._db.connection()
            .execute("SELECT min(due_ms) FROM watch_deliveries WHERE state = 'pending'")
            .fetchone()
        )
        return None if row[0] is None else int(row[0])

    def delivered(self, delivery_id: str) -> None:
        self._settle(delivery_id, DeliveryState.DELIVERED, None, None)

    def retry(self, delivery_id: str, error: str, due_ms: int) -> None:
        """One more failed attempt; the next is due at `due_ms`."""
        self._settle(delivery_id, DeliveryState.PENDING, error, due_ms)

    def failed(self, delivery_id: str, error: str) -> None:
        """The last attempt failed: nothing more is sent, and the listing says so."""
        self._settle(delivery_id, DeliveryState.FAILED, error, None)

    def delivery(self, delivery_id: str) -> DeliveryRecord | None:
        row = (
            self._db.connection()
            .execute(f"SELECT {_DELIVERY_COLUMNS} FROM watch_deliveries WHERE delivery_id = ?",
                     (delivery_id,))
            .fetchone()
        )  # fmt: skip
        return None if row is None else _delivery(row)

    def close(self) -> None:
        self._db.close()

    def _settle(
        self, delivery_id: str, state: DeliveryState, error: str | None, due_ms: int | None
    ) -> None:
        self._db.connection().execute(
            "UPDATE watch_deliveries SET state = ?, attempts = attempts + 1, last_error = ?, "
            "due_ms = coalesce(?, due_ms) WHERE delivery_id = ? AND state = 'pending'",
            (state.value, error, due_ms, delivery_id),
        )

    def _with_deliveries(self, watch: Watch) -> Watch:
        rows = (
            self._db.connection()
            .execute(
                f"SELECT {_DELIVERY_COLUMNS} FROM watch_deliveries WHERE watch_id = ? "
                "ORDER BY created_ms DESC, delivery_id LIMIT ?",
                (watch.watch_id, RECENT_DELIVERIES),
            )
            .fetchall()
        )
        return replace(watch, deliveries=tuple(_delivery(row) for row in rows))


_DELIVERY_COLUMNS = (
    "delivery_id, watch_id, payload, state, attempts, due_ms, created_ms, last_error"
)


def _watch(row: tuple[Any, ...]) -> Watch:
    (watch_id, tenant, sku, condition, target, delivery, url, secret, state, created_ms,
     fired_ms, notification) = row  # fmt: skip
    return Watch(
        watch_id, tenant, sku, Condition(condition), target, Delivery(delivery), url, secret,
        WatchState(state), created_ms, fired_ms,
        None if notification is None else json.loads(notification),
    )  # fmt: skip


def _delivery(row: tuple[Any, ...]) -> DeliveryRecord:
    delivery_id, watch_id, payload, state, attempts, due_ms, created_ms, last_error = row
    return DeliveryRecord(
        delivery_id, watch_id, payload, DeliveryState(state), attempts, due_ms, created_ms,
        last_error,
    )  # fmt: skip
