"""POST /v1/events and GET /v1/events/schema; and the event bus the service runs.

A request carries up to `MAX_EVENTS` events. Each is validated on its own: a bad one is
named by its index and field and the good ones still go through the one apply path, via
the embedded bus, before the answer says which were applied, which were duplicates
(their id was applied before) and which were rejected. Only a body that is not
`{"events": [...]}` at all is refused whole (problem details, 422).

With API keys, only a key of scope `events` reaches this route (http/request_guard.py), and its
events carry the source it is bound to whatever their body says: a key writes under its
own name only, and since event ids are unique per source it cannot pre-empt another
source's. A webhook source keeps its name to its own secret: a key bound to a name that
is a registered webhook source is refused (403), so no key shares a signed sender's ids.
Without keys (the demo) an event's `source` is its own.

The bus itself is started by the lifespan (service/event_service.py).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from worthit.http.caller import request_tenant
from worthit.http.dependencies import StateDep
from worthit.http.problems import ProblemError
from worthit.market.apply import EventResult, Outcome
from worthit.market.bus import BusClosedError, BusFullError
from worthit.market.events import SCHEMA_ID, Event, EventError, event_schema
from worthit.market.ingest.feed import parse_events
from worthit.service.event_service import EventService
from worthit.service.state import ServiceState

log = logging.getLogger(__name__)

router = APIRouter(tags=["events"])

MAX_EVENTS = 500
"""Events per request. With the 64 KiB body limit (http/request_guard.py) a request of typical
events (about 120 bytes each) fits this many; send more in several requests."""
SUBMIT_TIMEOUT_S = 5.0
"""How long a request waits for room in a full queue before it is answered 503."""
SCHEMA_MEDIA_TYPE = "application/schema+json"


class EventsRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    events: Annotated[
        list[Any],
        Field(
            min_length=1,
            max_length=MAX_EVENTS,
            description=f"Events as described by {SCHEMA_ID} (GET /v1/events/schema).",
        ),
    ]


@router.post("/v1/events")
async def post_events(body: EventsRequest, request: Request, state: StateDep) -> JSONResponse:
    """Apply market events: each is applied, a duplicate, or rejected (by index and field)."""
    service = event_service(state)
    tenant = request_tenant(request)
    source = None if tenant is None else tenant.source
    if source is not None and service.sources is not None and service.sources.secret(source):
        raise ProblemError(
            403, "Forbidden",
            f"{source!r} is a webhook source: it sends signed webhooks with its own secret "
            "(POST /v1/webhooks/{source}), not events with a key",
            "authorization",
        )  # fmt: skip
    good, rejected = parse_events(_bound(body.events, source))
    results = await submit_events(service, [event for _, event in good])
    return JSONResponse(event_report(good, results, rejected))


def _bound(items: list[Any], source: str | None) -> list[Any]:
    """The events as the key's source sent them: its name replaces any other."""
    if source is None:
        return items
    return [{**item, "source": source} if isinstance(item, dict) else item for item in items]


async def submit_events(service: EventService, events: list[Event]) -> list[EventResult]:
    """Through the bus into the one apply path; a full queue or a failing store is a 503
    the sender may retry (the events' ids make a retry safe)."""
    try:
        return await service.bus.submit(events, timeout_s=SUBMIT_TIMEOUT_S)
    except (BusFullError, BusClosedError) as exc:
        raise ProblemError(
            503, "Event queue full", str(exc), "events", headers={"Retry-After": "1"}
        ) from exc
    except service.bus.store.errors.unavailable as exc:
        log.exception("a batch of events failed")
        raise ProblemError(
            503, "Store unavailable", f"the events were not applied: {exc}", "events",
            headers={"Retry-After": "1"},
        ) from exc  # fmt: skip


def event_report(
    good: list[tuple[int, Event]], results: list[EventResult], rejected: list[EventError]
) -> dict[str, Any]:
    """Which events were applied, which were duplicates, which were rejected and why."""
    applied: list[str] = []
    duplicates: list[str] = []
    rejected = list(rejected)
    for (index, event), result in zip(good, results, strict=True):
        if result.outcome is Outcome.APPLIED:
            applied.append(event.event_id)
        elif result.outcome is Outcome.DUPLICATE:
            duplicates.append(event.event_id)
        else:
            error = result.error
            rejected.append(
                EventError(
                    index,
                    error.field if error else "(event)",
                    error.message if error else "not stored",
                    event.event_id,
                )
            )
    rejected.sort(key=lambda error: error.index)
    return {
        "applied": applied,
        "duplicates": duplicates,
        "rejected": [error.to_dict() for error in rejected],
    }


@router.get("/v1/events/schema")
async def events_schema() -> JSONResponse:
    """The JSON Schema of one event; its `$id` names the version."""
    return JSONResponse(event_schema(), media_type=SCHEMA_MEDIA_TYPE)


def event_service(state: ServiceState) -> EventService:
    if state.service is None:
        raise ProblemError(503, "Not ready", "the event bus is not running", None)
    return state.service.events
