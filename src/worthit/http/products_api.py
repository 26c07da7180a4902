"""Product search, fact sheets and price history: the fragments a page or a CDN caches."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Header, Query, Request
from fastapi.responses import JSONResponse, Response

from worthit.http.caller import request_tenant
from worthit.http.dependencies import StateDep
from worthit.http.problems import ProblemError
from worthit.text.time import DAY_MS, iso

router = APIRouter(tags=["products"])

FACTS_CACHE_CONTROL = "public, max-age=5, stale-while-revalidate=30"
"""Keyless (the demo): any cache, a CDN included, may hold a fact sheet for 5 s."""
KEYED_FACTS_CACHE_CONTROL = "private, max-age=5"
"""With a key: the caller's own cache only. "public" would let a shared cache store an
authorized response (RFC 9111, 3.5) and hand it to callers without the key."""


@router.get("/v1/products")
async def search_products(
    state: StateDep,
    q: Annotated[
        str,
        Query(
            min_length=1,
            max_length=100,
            description="What the shopper typed: a name being typed, or a whole question",
        ),
    ],
    limit: Annotated[int, Query(ge=1, le=50)] = 8,
) -> dict[str, Any]:
    """The products a shopper means, best first: the index and ranking the answer's
    product resolution uses (decide/resolve.py), in English, Chinese and Japanese."""
    hits = state.market().decider.resolver.suggest(q, limit)
    return {
        "items": [
            {
                "sku": h.sku,
                "title": h.title,
                "brand": h.brand,
                "category": h.category,
                "aliases": list(h.aliases),
            }
            for h in hits
        ]
    }


@router.get("/v1/products/{sku}/facts", response_model=None)
async def product_facts(
    sku: str,
    request: Request,
    state: StateDep,
    locale: Annotated[Literal["en", "zh", "ja"], Query()] = "en",
    as_of: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=40,
            description="The sheet and verdict as of this past moment, from data stamped up "
            "to it: an ISO 8601 time (no zone means UTC) or a day (its end).",
        ),
    ] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """The fact sheet and the verdict computed from it; ETag is the facts version."""
    service = state.market()
    at_ms = None
    if as_of is not None:
        try:
            at_ms = service.decider.as_of(as_of)
        except ValueError as exc:
            raise ProblemError(
                422, "Invalid request", f"query.as_of: {exc}", "query.as_of"
            ) from None
    sheet = service.facts.get(sku, at_ms)
    if sheet is None:
        raise ProblemError(404, "Unknown product", f"no product with sku {sku!r}", "sku")
    etag = f'"{sheet.version}-{locale}"' if at_ms is None else f'"{sheet.version}-{locale}-{at_ms}"'
    if request_tenant(request) is None:
        headers = {"ETag": etag, "Cache-Control": FACTS_CACHE_CONTROL, "Vary": "Accept-Encoding"}
    else:
        headers = {
            "ETag": etag,
            "Cache-Control": KEYED_FACTS_CACHE_CONTROL,
            "Vary": "Accept-Encoding, Authorization",
        }
    if if_none_match and etag in {tag.strip() for tag in if_none_match.split(",")}:
        return Response(status_code=304, headers=headers)
    verdict = service.decider.verdict(sheet, locale)
    body: dict[str, Any] = {} if at_ms is None else {"as_of": iso(at_ms)}
    body |= {
        "facts": sheet.to_dict(),
        "verdict": {
            "verdict": verdict.kind.value,
            "verdict_label": verdict.kind.label(locale),
            "confidence": verdict.confidence,
            "reasons": [r.to_dict() for r in verdict.reasons],
        },
    }
    return JSONResponse(body, headers=headers)


@router.get("/v1/products/{sku}/history")
async def price_history(
    sku: str,
    state: StateDep,
    days: Annotated[int, Query(ge=1, le=3650)] = 180,
) -> dict[str, Any]:
    """Price points for the chart, with the all-time low and the 90-day average marked."""
    service = state.market()
    sheet = service.facts.get(sku)
    if sheet is None:
        raise ProblemError(404, "Unknown product", f"no product with sku {sku!r}", "sku")
    now = service.facts.builder.clock()
    points = service.store.prices(sku, since_ms=now - days * DAY_MS, until_ms=now)
    window = sheet.window(90)
    return {
        "sku": sku,
        "currency": sheet.currency,
        "points": [{"ts": iso(p.ts_ms), "price": p.price} for p in points],
        "all_time_low": sheet.all_time_low,
        "all_time_low_at": sheet.all_time_low_at,
        "avg_90d": window.avg if window else None,
    }
