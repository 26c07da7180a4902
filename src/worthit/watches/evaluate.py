"""Price watches, evaluated after each commit for the products it changed.

The bus calls `WatchEvaluator.changed` on the event loop after every commit (after the
fact cache has forgotten those products). That must not slow the bus nor an answer, so
it only adds the SKUs to a set; one task at a time takes the set and, in a worker thread,
builds each watched product's sheet through the answer flow's own decider (its fact cache
and its verdicts), so a notification says exactly what `/v1/decide` would say now. A
commit arriving while the task runs joins the next round: the work is bounded by the
number of watched products, not the event rate.

A watch whose condition holds fires once: `WatchStore.fire` disarms it and queues its
webhook in one transaction, then `notify` hands the notification on (to the server's
webhook deliverer and SSE streams). It stays fired until renewed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from worthit.decide.decider import Decider
from worthit.decide.verdict import Verdict, VerdictKind
from worthit.facts.sheet import FactSheet
from worthit.text.time import iso, now_ms
from worthit.watches.store import Condition, Watch, WatchStore

log = logging.getLogger(__name__)

EVENT_TYPE = "watch.fired"


@dataclass(frozen=True, slots=True)
class Notification:
    """One fired watch: who gets it and what it says."""

    tenant: str
    watch_id: str
    delivery_id: str
    """The webhook's id (its `webhook-id`); "" for a watch delivered on the SSE stream."""
    body: dict[str, Any]


def condition_met(watch: Watch, sheet: FactSheet, verdict: Verdict) -> bool:
    if watch.condition is Condition.VERDICT_BUY:
        return verdict.kind is VerdictKind.BUY
    price = sheet.current_price
    return price is not None and watch.target is not None and price <= watch.target


def notification_body(
    watch: Watch, sheet: FactSheet, verdict: Verdict, at_ms: int
) -> dict[str, Any]:
    """The Standard Webhooks payload shape: `type`, `timestamp`, `data`."""
    return {
        "type": EVENT_TYPE,
        "timestamp": iso(at_ms),
        "data": {
            "watch_id": watch.watch_id,
            "sku": watch.sku,
            "title": sheet.title,
            "condition": watch.condition.value,
            "target": watch.target,
            "price": sheet.current_price,
            "currency": sheet.currency,
            "verdict": verdict.kind.value,
            "verdict_label": verdict.kind.label(verdict.language),
            "confidence": verdict.confidence,
            "facts_version": verdict.facts_version,
        },
    }


class WatchEvaluator:
    """Checks the armed watches of changed products and fires those whose condition holds."""

    def __init__(
        self,
        watches: WatchStore,
        decider: Decider,
        notify: Callable[[list[Notification]], object],
        *,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.watches = watches
        self.decider = decider
        self.notify = notify
        self.clock = clock
        """Wall time, for the fired stamps: the facts keep their own (possibly pinned) clock."""
        self.fired = 0
        self._pending: set[str] = set()
        self._task: asyncio.Task[None] | None = None

    def changed(self, skus: Iterable[str]) -> None:
        """The bus's subscriber: note the products, and start a round if none is running."""
        self._pending.update(skus)
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def idle(self) -> None:
        """Wait until every product noted so far has been evaluated."""
        while self._task is not None and not self._task.done():
            with contextlib.suppress(Exception):
                await asyncio.shield(self._task)

    async def stop(self) -> None:
        await self.idle()

    def evaluate(self, skus: Iterable[str]) -> list[Notification]:
        """Fire the armed watches on `skus` whose condition holds now (blocking: SQLite)."""
        fired: list[Notification] = []
        by_sku: dict[str, list[Watch]] = {}
        for watch in self.watches.active(skus):
            by_sku.setdefault(watch.sku, []).append(watch)
        for sku, watches in by_sku.items():
            sheet = self.decider.facts.get(sku)
            if sheet is None:
                continue
            verdict = self.decider.verdict(sheet)
            for watch in watches:
                if not condition_met(watch, sheet, verdict):
                    continue
                at = self.clock()
                body = notification_body(watch, sheet, verdict, at)
                delivery_id = self.watches.fire(watch.watch_id, body, at)
                if delivery_id is not None:
                    fired.append(Notification(watch.tenant, watch.watch_id, delivery_id, body))
        self.fired += len(fired)
        return fired

    async def _run(self) -> None:
        while self._pending:
            skus, self._pending = self._pending, set()
            try:
                fired = await asyncio.to_thread(self.evaluate, skus)
            except Exception:  # a failing round must not stop later ones
                log.exception("could not evaluate the watches of %d products", len(skus))
                continue
            if fired:
                self.notify(fired)
