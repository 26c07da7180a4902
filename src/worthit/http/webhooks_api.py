"""POST /v1/webhooks/{source}: market events from a sender that signs them.

Standard Webhooks: the sender signs `webhook-id.webhook-timestamp.body` with HMAC-SHA256
under the source's secret (`worthit sources add`) and sends the three headers; the
`standardwebhooks` package checks the signature (in constant time) and the timestamp
(within 300 s of now, either way). The signature is the authentication, so the route
needs no API key (http/request_guard.py leaves the prefix open). Every refusal before the
events are read is 401 naming the header at fault, or `source` for a source that is not
registered.

A delivery id is refused once its events have been taken (409, `webhook-id`): the id is
recorded only after they were applied, so a delivery answered 503 may be sent again with
the same id. Two copies in flight at once both pass, and the second finds its events
duplicates: an event's own id, not the delivery's, is what makes its effect happen once.

The body is `{"events": [...]}` (1 to 500) or one event object. An event may leave out
`source`: it is the webhook's; one naming another source is rejected, so a sender
cannot write in another's name. The answer is POST /v1/events's, per event.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import ValidationError
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from worthit.http.dependencies import StateDep
from worthit.http.events_api import EventsRequest, event_report, event_service, submit_events
from worthit.http.problems import ProblemError
from worthit.market.ingest.feed import parse_events
from worthit.market.ingest.webhook_sources import MAX_DELIVERY_ID_CHARS

log = logging.getLogger(__name__)

router = APIRouter(tags=["events"])

TOLERANCE_S = 300
"""The window `standardwebhooks` holds timestamps to; a delivery id is kept this long
past its timestamp, after which the timestamp alone refuses a replay."""
SIGNATURE_HEADERS = ("webhook-id", "webhook-timestamp", "webhook-signature")


@router.post("/v1/webhooks/{source}")
async def post_webhook(source: str, request: Request, state: StateDep) -> JSONResponse:
    """Apply a signed delivery of market events: each applied, a duplicate, or rejected."""
    service = event_service(state)
    sources = service.sources
    assert sources is not None  # a service with a market has its sources
    secret = sources.secret(source)
    if secret is None:
        raise _unauthorized(f"no webhook source {source!r} is registered", "source")
    headers = {name: request.headers.get(name, "") for name in SIGNATURE_HEADERS}
    for name, value in headers.items():
        if not value:
            raise _unauthorized(f"the {name} header is missing", name)
    delivery_id = headers["webhook-id"]
    if len(delivery_id) > MAX_DELIVERY_ID_CHARS:
        raise _unauthorized(f"longer than {MAX_DELIVERY_ID_CHARS} characters", "webhook-id")
    timestamp = _timestamp(headers["webhook-timestamp"])
    body = await request.body()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ProblemError(422, "Invalid request", "the body is not UTF-8 text", "body") from None
    _verify(secret, text, headers)
    now_ms = int(time.time() * 1000)
    if sources.seen(source, delivery_id, now_ms):
        raise ProblemError(
            409,
            "Replayed webhook",
            f"webhook id {delivery_id!r} of source {source!r} was received already",
            "webhook-id",
        )
    good, rejected = parse_events(_items(text), source)
    results = await submit_events(service, [event for _, event in good])
    # off the loop: the write may wait for SQLite's lock behind the bus's batch
    await asyncio.to_thread(
        sources.take, source, delivery_id, (timestamp + TOLERANCE_S) * 1000, now_ms
    )
    return JSONResponse(event_report(good, results, rejected))


def _unauthorized(detail: str, field: str) -> ProblemError:
    return ProblemError(401, "Unauthorized", detail, field)


def _timestamp(header: str) -> int:
    """The header's whole seconds, refused (naming it) outside the tolerance window."""
    if not header.isascii() or not header.isdigit() or len(header) > 12:
        raise _unauthorized("expected whole seconds since the epoch", "webhook-timestamp")
    timestamp = int(header)
    skew = time.time() - timestamp
    if abs(skew) > TOLERANCE_S:
        when = "old" if skew > 0 else "ahead of this server's clock"
        raise _unauthorized(
            f"the message is {abs(skew):.0f} s {when}; the tolerance is {TOLERANCE_S} s",
            "webhook-timestamp",
        )
    return timestamp


def _verify(secret: str, text: str, headers: dict[str, str]) -> None:
    try:
        Webhook(secret).verify(text, headers, json_parse=False)
    except WebhookVerificationError as exc:
        field = "webhook-timestamp" if "timestamp" in str(exc).lower() else "webhook-signature"
        raise _unauthorized(f"{exc}", field) from None
    except ValueError:  # a signature that is not `v1,<base64>`
        raise _unauthorized("malformed signature", "webhook-signature") from None


def _items(text: str) -> list[Any]:
    """The body's events: `{"events": [...]}` or one event object."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ProblemError(422, "Invalid request", f"body: not JSON: {exc}", "body") from None
    if isinstance(data, dict) and "events" in data:
        try:
            return EventsRequest.model_validate(data).events
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(["body", *(str(part) for part in first["loc"])])
            raise ProblemError(422, "Invalid request", f"{where}: {first['msg']}", where) from None
    if isinstance(data, dict):
        return [data]
    raise ProblemError(
        422, "Invalid request", 'body: expected {"events": [...]} or one event object', "body"
    )
