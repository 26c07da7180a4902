"""Bulk JSONL import: every good line lands, every bad line is reported by number and field.

Lines are validated one by one and written in batches, one transaction per batch,
so a million-line file neither holds one giant transaction nor pays a commit per line.
Each batch takes the write path every event takes (`EventBus.import_batch`, then
`apply_import_batch`): in turn with the events, and its subscribers told what changed.
A line the store rejects after validation passed is reported like any bad line and costs
only itself, not its batch: that batch is written again with a savepoint per line (only
then, as each costs two round trips on PostgreSQL).

A line stamped after the import's own clock (a price, stock or review `ts`, or a sales
`date`, more than `FUTURE_SLACK_MS` ahead) is almost always a clock or time-zone mistake:
it is stored, since the moment may come, but no answer reads it as current before then, so
the report lists it (`ImportReport.future`), and `reject_future` refuses it as a bad line.
A promotion's `starts` is not one of these: a promotion announced ahead is the normal case.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time

from pydantic import ValidationError

from worthit.market.bus import EventBus
from worthit.market.records import (
    RECORD_TYPES,
    PriceRecord,
    ProductRecord,
    Record,
    ReviewRecord,
    SalesRecord,
    StockRecord,
    as_received,
)
from worthit.market.store import MarketStore
from worthit.text.time import now_ms

BATCH_LINES = 2000
FUTURE_SLACK_MS = 300_000
"""Five minutes ahead is a clock's drift, not a mistake (the webhooks' tolerance too)."""


@dataclass(frozen=True, slots=True)
class LineError:
    line: int
    field: str
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.field}: {self.message}"


@dataclass
class ImportReport:
    lines: int = 0
    written: int = 0
    unchanged: int = 0
    errors: list[LineError] = field(default_factory=list)
    future: list[int] = field(default_factory=list)
    """Line numbers of accepted lines stamped in the future."""

    @property
    def accepted(self) -> int:
        return self.written + self.unchanged


def parse_line(text: str, line_no: int) -> Record | LineError:
    """One JSON line → a validated record, or the first problem with it."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return LineError(line_no, "(line)", f"not valid JSON: {exc.msg} at column {exc.colno}")
    if not isinstance(data, dict):
        return LineError(line_no, "(line)", "expected a JSON object")
    kind = data.get("type")
    model = RECORD_TYPES.get(kind) if isinstance(kind, str) else None
    if model is None:
        allowed = ", ".join(sorted(RECORD_TYPES))
        return LineError(line_no, "type", f"must be one of {allowed}, got {kind!r}")
    try:
        return model.model_validate(data)  # type: ignore[return-value]
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "(line)"
        return LineError(line_no, where, first["msg"])


def stamped_ms(record: Record) -> int | None:
    """When the line says it was observed (a sales day: its start), or None for a line
    that is not an observation (a product, a promotion)."""
    if isinstance(record, PriceRecord | StockRecord | ReviewRecord):
        return record.ts_ms
    if isinstance(record, SalesRecord):
        return int(datetime.combine(record.date, time(), UTC).timestamp() * 1000)
    return None


def run_import(
    store: MarketStore,
    lines: Iterable[str],
    progress: Callable[[int], None] | None = None,
    *,
    reject_future: bool = False,
    now: int | None = None,
) -> ImportReport:
    """`import_lines` through a bus of this call's own, started for it and stopped after:
    for a process with no bus running (`worthit import`). A server on the same store sees
    the rows by their revisions, as it sees another process's events."""

    async def run() -> ImportReport:
        bus = EventBus(store)
        bus.start()
        try:
            return await import_lines(bus, lines, progress, reject_future=reject_future, now=now)
        finally:
            await bus.stop()

    return asyncio.run(run())


async def import_lines(
    bus: EventBus,
    lines: Iterable[str],
    progress: Callable[[int], None] | None = None,
    *,
    reject_future: bool = False,
    now: int | None = None,
) -> ImportReport:
    """Import JSONL lines into the bus's store (the bus started); idempotent, so importing
    the same file twice changes nothing. A full disk or a lock (the store's
    `errors.unavailable`) stops the import.

    `now` (epoch ms, default the clock) is what "in the future" is measured against, and
    when a promotion that does not say when it was announced is taken to be."""
    store = bus.store
    report = ImportReport()
    received = now_ms() if now is None else now
    horizon = received + FUTURE_SLACK_MS
    batch: list[tuple[int, Record]] = []
    batch_products: set[str] = set()
    for line_no, text in enumerate(lines, start=1):
        report.lines = line_no
        if not text.strip():
            continue
        parsed = parse_line(text, line_no)
        stamp = None if isinstance(parsed, LineError) else stamped_ms(parsed)
        ahead = stamp is not None and stamp > horizon
        if isinstance(parsed, LineError):
            report.errors.append(parsed)
        elif ahead and reject_future:
            field_name = "date" if isinstance(parsed, SalesRecord) else "ts"
            report.errors.append(
                LineError(line_no, field_name, "stamped in the future (--reject-future)")
            )
        elif not isinstance(parsed, ProductRecord) and not (
            parsed.sku in batch_products or store.has_sku(parsed.sku)
        ):
            report.errors.append(
                LineError(line_no, "sku", f"unknown sku {parsed.sku!r}: no product line before it")
            )
        else:
            if isinstance(parsed, ProductRecord):
                batch_products.add(parsed.sku)
            if ahead:
                report.future.append(line_no)
            batch.append((line_no, as_received(parsed, received)))
        if len(batch) >= BATCH_LINES:
            await _flush(bus, batch, report)
            batch_products.clear()
            if progress:
                progress(line_no)
    await _flush(bus, batch, report)
    if progress:
        progress(report.lines)
    return report


async def _flush(bus: EventBus, batch: list[tuple[int, Record]], report: ImportReport) -> None:
    if not batch:
        return
    part = await bus.import_batch([record for _, record in batch])
    for index, (line_no, _) in enumerate(batch):
        refused = part.refused.get(index)
        if refused is not None:
            report.errors.append(LineError(line_no, "(line)", refused))
        elif part.changed[index]:
            report.written += 1
        else:
            report.unchanged += 1
    batch.clear()
