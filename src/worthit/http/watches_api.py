"""Price watches: "tell me when" for a shopper told WAIT.

`POST /v1/watches` arms a watch on a product (price at or under a target, or the verdict
turning BUY) with a delivery: a signed webhook (its secret is in this answer only) or
the tenant's SSE stream, `GET /v1/watches/events`. Everything is the calling tenant's:
another tenant's watch id is a 404, as if it did not exist, so ids cannot be probed.
Evaluation and delivery are in watches/evaluate.py and watches/deliver.py.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from worthit.http.caller import request_tenant
from worthit.http.dependencies import StateDep
from worthit.http.problems import ProblemError
from worthit.http.sse import sse_event
from worthit.service.state import ServiceState
from worthit.text.time import now_ms
from worthit.watches import resume as watch_resume
from worthit.watches.deliver import HookUrlError, WatchService, check_hook_url
from worthit.watches.store import DEMO_TENANT, Condition, Delivery, Watch

router = APIRouter(tags=["watches"])

MAX_WATCHES = 1000
"""Watches one tenant may hold (fired ones count until deleted)."""
KEEPALIVE_S = 15.0
"""A comment line this often keeps proxies from closing a quiet stream."""


class WatchRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sku: Annotated[str, Field(min_length=1, max_length=64)]
    condition: Condition
    target: Annotated[
        float | None,
        Field(gt=0, description="For price_at_most: fire when the price is at or under it."),
    ] = None
    delivery: Delivery = Delivery.SSE
    url: Annotated[
        str | None, Field(max_length=2048, description="For a webhook: where to POST.")
    ] = None


@router.post("/v1/watches", status_code=201)
async def create_watch(body: WatchRequest, request: Request, state: StateDep) -> JSONResponse:
    """Arm a watch; a webhook watch's answer carries its signing secret, once."""
    service = watch_service(state)
    store = state.market().store
    if body.condition is Condition.PRICE_AT_MOST and body.target is None:
        raise ProblemError(422, "Invalid request", "target: price_at_most needs one", "target")
    if body.condition is not Condition.PRICE_AT_MOST and body.target is not None:
        raise ProblemError(422, "Invalid request", "target: only for price_at_most", "target")
    if body.delivery is Delivery.WEBHOOK:
        if body.url is None:
            raise ProblemError(422, "Invalid request", "url: a webhook needs one", "url")
        try:
            await asyncio.to_thread(check_hook_url, body.url, allow_private=service.allow_private)
        except HookUrlError as exc:
            raise ProblemError(422, "Invalid request", f"url: {exc}", "url") from None
    elif body.url is not None:
        raise ProblemError(422, "Invalid request", "url: only for a webhook", "url")
    if store.revision(body.sku) is None:
        raise ProblemError(404, "Unknown product", f"no product {body.sku!r}", "sku")
    tenant = _tenant(request)
    if await asyncio.to_thread(service.store.count, tenant) >= MAX_WATCHES:
        raise ProblemError(
            409, "Too many watches", f"at most {MAX_WATCHES}: delete some first", None
        )
    watch = await asyncio.to_thread(
        service.store.add, tenant, body.sku, body.condition, body.target, body.delivery,
        body.url, now_ms(),
    )  # fmt: skip
    data = watch.to_dict()
    if watch.secret is not None:
        data["secret"] = watch.secret
    return JSONResponse(
        data, status_code=201, headers={"location": f"/v1/watches/{watch.watch_id}"}
    )


@router.get("/v1/watches")
async def list_watches(request: Request, state: StateDep) -> dict[str, Any]:
    """The tenant's watches, oldest first, each with its latest deliveries."""
    service = watch_service(state)
    watches = await asyncio.to_thread(service.store.list, _tenant(request))
    return {"watches": [watch.to_dict() for watch in watches]}


@router.get("/v1/watches/events")
async def watch_events(request: Request, state: StateDep) -> StreamingResponse:
    """The tenant's notifications as they fire: `event: watch`, the webhook's body as data,
    after `event: ready` (sent once subscribed, so a client knows it misses nothing after).
    Resumable: with `Last-Event-ID`, what fired since that id comes first (watch_resume).
    It ends after the settings' `stream_life_s` with `event: end`, whose id resumes it."""
    service = watch_service(state)
    life_s = state.settings.stream_life_s
    return StreamingResponse(
        _stream(service, _tenant(request), request.headers.get("last-event-id"), life_s),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )


@router.get("/v1/watches/{watch_id}")
async def get_watch(watch_id: str, request: Request, state: StateDep) -> dict[str, Any]:
    return (await _own(state, request, watch_id)).to_dict()


@router.post("/v1/watches/{watch_id}/renew")
async def renew_watch(watch_id: str, request: Request, state: StateDep) -> dict[str, Any]:
    """Arm a fired watch again (an armed one stays armed)."""
    await _own(state, request, watch_id)
    renewed = await asyncio.to_thread(watch_service(state).store.renew, _tenant(request), watch_id)
    if renewed is None:
        raise _not_found(watch_id)
    return renewed.to_dict()


@router.delete("/v1/watches/{watch_id}", status_code=204)
async def delete_watch(watch_id: str, request: Request, state: StateDep) -> Response:
    """Remove the watch; a webhook still pending for it is not sent."""
    gone = await asyncio.to_thread(watch_service(state).store.remove, _tenant(request), watch_id)
    if not gone:
        raise _not_found(watch_id)
    return Response(status_code=204)


async def _stream(
    service: WatchService, tenant: str, last_event_id: str | None, life_s: float
) -> AsyncIterator[str]:
    """The stream, for `life_s` at most: one held for ever would keep its tenant's share
    of the connections (http/shares.py). Before `end` it sends what is queued, and the
    end's id is the moment it ended, so a reconnect replays only what fired after
    (watch_resume's overlap covers a notification published late)."""
    ends = time.monotonic() + life_s
    with service.streams.open(tenant) as queue:
        subscribed_ms = now_ms()
        replayed: set[str] = set()
        if watch_resume.since_ms(last_event_id) is not None:
            watches = await asyncio.to_thread(service.store.list, tenant)
            for missed in watch_resume.missed(watches, last_event_id):
                replayed.add(watch_resume.event_id(missed) or "")
                yield _watch_event(missed)
        yield sse_event("ready", {}, watch_resume.ready_id(subscribed_ms))
        while (left := ends - time.monotonic()) > 0:
            try:
                body = await asyncio.wait_for(queue.get(), min(KEEPALIVE_S, left))
            except TimeoutError:
                if ends - time.monotonic() > 0:
                    yield ": keep-alive\n\n"
                continue
            if watch_resume.event_id(body) not in replayed:
                yield _watch_event(body)
        while not queue.empty():
            body = queue.get_nowait()
            if watch_resume.event_id(body) not in replayed:
                yield _watch_event(body)
        end = {"reason": "max_life", "life_s": life_s}
        yield sse_event("end", end, watch_resume.ready_id(now_ms()))


def _watch_event(body: dict[str, Any]) -> str:
    return sse_event("watch", body, watch_resume.event_id(body))


async def _own(state: ServiceState, request: Request, watch_id: str) -> Watch:
    watch = await asyncio.to_thread(watch_service(state).store.get, _tenant(request), watch_id)
    if watch is None:
        raise _not_found(watch_id)
    return watch


def _not_found(watch_id: str) -> ProblemError:
    return ProblemError(404, "Unknown watch", f"no watch {watch_id!r}", "watch_id")


def _tenant(request: Request) -> str:
    tenant = request_tenant(request)
    return DEMO_TENANT if tenant is None else tenant.name


def watch_service(state: ServiceState) -> WatchService:
    watches = None if state.service is None else state.service.watches
    if watches is None:
        raise ProblemError(503, "Not ready", "price watches are not running", None)
    return watches
