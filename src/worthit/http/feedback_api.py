"""POST /v1/feedback: what the shopper did after an answer, the evidence calibration learns from.

The answer is found in the audit log, among the caller's tenant's leaves, so what was
advised (verdict, product, category) comes from the server's own record and never from
the client; a request id the tenant got no answer for is a 404, exactly like one of
another tenant's. Idempotency and which outcome may replace which: decide/feedback.py.
"""

from __future__ import annotations

import asyncio
import time
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from worthit.audit import AuditLog, AuditRecord, TreeRangeError
from worthit.decide.calibration import Calibration, answered
from worthit.decide.feedback import Feedback, FeedbackConflictError, Outcome, Recorded
from worthit.facts.cache import FactsCache
from worthit.http.caller import tenant_name
from worthit.http.dependencies import StateDep
from worthit.http.fields import ENCODABLE
from worthit.http.problems import ProblemError
from worthit.text.time import iso

router = APIRouter(tags=["feedback"])

FEEDBACK_WINDOW_DAYS = 90
"""How old an answer may be and still take feedback: it bounds the search of the log."""
FLUSH_S = 2.0
"""How long to wait for a leaf still on its way to the disk (an answer a moment old)."""


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    request_id: Annotated[
        str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128), ENCODABLE
    ] = Field(description="The `request_id` of the answer.")
    outcome: Outcome = Field(description="What the shopper did after the answer.")
    leaf_index: int | None = Field(
        default=None,
        ge=0,
        le=2**53,
        description="The answer's receipt `leaf_index`: found at once instead of by a search "
        "of the log.",
    )


@router.post("/v1/feedback", response_model=None)
async def feedback(body: FeedbackRequest, request: Request, state: StateDep) -> JSONResponse:
    """Record what the shopper did after answer `request_id`: 201 the first time, 200
    with `duplicate: true` for the same outcome again, 409 for a different one (except
    `returned` after `bought`)."""
    service = state.market()
    if service.audit is None:
        raise ProblemError(404, "No feedback", "this service keeps no audit log to check it on")
    tenant = tenant_name(request)
    found = await asyncio.to_thread(_find, service.audit, body.request_id, tenant, body.leaf_index)
    if found is None:
        raise ProblemError(
            404, "Unknown request", f"no answer {body.request_id!r} of yours", "request_id"
        )
    try:
        recorded = await asyncio.to_thread(
            _record, service.calibration, service.facts, found, body.outcome, tenant
        )
    except FeedbackConflictError as exc:
        raise ProblemError(
            409, "Feedback conflict", str(exc), "outcome", stored=exc.stored
        ) from None
    status = 200 if recorded.duplicate or recorded.replaced else 201
    return JSONResponse(_payload(recorded), status_code=status)


def _find(
    log: AuditLog, request_id: str, tenant: str | None, leaf_index: int | None
) -> AuditRecord | None:
    """The tenant's answer leaf for `request_id`; a miss waits once for queued leaves."""
    since = time.time_ns() // 1_000_000 - FEEDBACK_WINDOW_DAYS * 86_400_000
    for attempt in range(2):
        if leaf_index is not None:
            try:
                record = log.leaf(leaf_index)
            except TreeRangeError:
                record = None
            if record is not None:
                mine = record.request_id == request_id and record.tenant == tenant
                return record if mine and record.wall_ms >= since else None
        else:
            hit = log.find_request(request_id, tenant, since)
            if hit is not None:
                return hit[1]
        if attempt == 0 and not log.flush(FLUSH_S):
            break
    return None


def _record(
    calibration: Calibration,
    facts: FactsCache,
    record: AuditRecord,
    outcome: Outcome,
    tenant: str | None,
) -> Recorded:
    answer = answered(
        facts,
        verdict=record.verdict,
        sku=record.sku,
        facts_version=record.facts_version,
        answered_ms=record.wall_ms,
    )
    now = time.time_ns() // 1_000_000
    return calibration.record(Feedback(tenant, record.request_id, outcome, answer, now))


def _payload(recorded: Recorded) -> dict[str, Any]:
    stored = recorded.feedback
    return {
        "request_id": stored.request_id,
        "outcome": stored.outcome,
        "duplicate": recorded.duplicate,
        "replaced": recorded.replaced,
        "verdict": stored.answer.verdict,
        "sku": stored.answer.sku,
        "category": stored.answer.category,
        "answered_at": iso(stored.answer.answered_ms),
        "received_at": iso(stored.received_ms),
    }
