"""Plain test objects with realistic defaults; override any field by keyword.

`make_sheet(current_price=279.0)`, `make_verdict(kind=VerdictKind.BUY, language="zh")`.
Nested parts have their own makers so a test can change one rating field without
restating the rest: `make_sheet(rating=make_rating(trend=-0.4))`.
"""

from __future__ import annotations

from typing import Any

from worthit.decide.verdict import Polarity, Reason, Verdict, VerdictKind
from worthit.explain.store import StoredExplanation
from worthit.facts.sheet import (
    DiscountClaim,
    EventFact,
    FactSheet,
    PromotionFact,
    RatingFacts,
    WindowStats,
)
from worthit.market.entities import Review


def make_rating(**overrides: Any) -> RatingFacts:
    fields: dict[str, Any] = {
        "count": 128,
        "mean": 4.35,
        "bayesian": 4.2857,
        "prior_mean": 4.0,
        "prior_weight": 20,
        "recent_count": 20,
        "recent_mean": 4.1,
        "earlier_mean": 4.4,
        "trend": -0.3,
    }
    return RatingFacts(**(fields | overrides))


def make_promotion(**overrides: Any) -> PromotionFact:
    fields: dict[str, Any] = {
        "name": "Spring Sale",
        "starts": "2026-03-20T00:00:00Z",
        "ends": "2026-03-27T00:00:00Z",
        "price": 259.0,
        "days_until_start": 7,
    }
    return PromotionFact(**(fields | overrides))


def make_offer(**overrides: Any) -> PromotionFact:
    """满200减30 running now on a unit at $229.99: one unit costs $199.99."""
    fields: dict[str, Any] = {
        "name": "满200减30",
        "starts": "2026-03-10T00:00:00Z",
        "ends": "2026-03-20T00:00:00Z",
        "price": 199.99,
        "days_until_start": 0,
        "kind": "threshold",
        "base_price": 229.99,
        "threshold": 200.0,
        "save": 30.0,
    }
    return PromotionFact(**(fields | overrides))


def make_claim(**overrides: Any) -> DiscountClaim:
    """A running promotion claimed from a list price the product never sold at."""
    fields: dict[str, Any] = {
        "source": "promotion",
        "name": "Spring Sale",
        "reference": 400.0,
        "price": 270.0,
        "started": "2026-03-13T00:00:00Z",
        "prior_low": 280.0,
        "prior_observations": 30,
        "raised_pct": 0.0,
        "raised_from": 300.0,
    }
    return DiscountClaim(**(fields | overrides))


def make_event(**overrides: Any) -> EventFact:
    """Double 12 in 11 days, after two past Double 12s at 18% and 21% off."""
    fields: dict[str, Any] = {
        "key": "double12",
        "name_en": "Double 12",
        "name_zh": "双12",
        "starts": "2026-12-12",
        "days_until": 11,
        "past_discounts_pct": (21.0, 18.0),
        "past_years": (2025, 2024),
    }
    return EventFact(**(fields | overrides))


def make_sheet(**overrides: Any) -> FactSheet:
    fields: dict[str, Any] = {
        "sku": "AUR-NC700",
        "title": "Aurora NC700 Wireless Noise-Cancelling Headphones",
        "brand": "Aurora",
        "category": "headphones",
        "currency": "USD",
        "as_of": "2026-03-14T09:30:00Z",
        "current_price": 299.0,
        "current_price_at": "2026-03-14T08:00:00Z",
        "price_age_days": 0,
        "price_stale": False,
        "list_price": 349.0,
        "windows": (
            WindowStats(days=30, observations=12, min=289.0, avg=301.5, median=299.0),
            WindowStats(days=90, observations=41, min=279.0, avg=309.25, median=305.0),
            WindowStats(days=180, observations=77, min=249.0, avg=318.4, median=319.0),
        ),
        "all_time_low": 249.0,
        "all_time_low_at": "2025-11-28T12:00:00Z",
        "all_time_high": 349.0,
        "percentile_90d": 35.0,
        "trend_30d_pct": -3.2,
        "volatility_90d_pct": 4.1,
        "first_seen": "2025-09-11T00:00:00Z",
        "days_tracked": 184,
        "observations": 212,
        "rating": make_rating(),
        "stock": 42,
        "stock_at": "2026-03-14T07:00:00Z",
        "active_promotions": (),
        "upcoming_promotions": (make_promotion(),),
        "sales_3d": 57,
        "revision": 7,
        "version": "v7-3f9a2c",
        "data_age_ms": 1834,
    }
    return FactSheet(**(fields | overrides))


def make_reason(**overrides: Any) -> Reason:
    fields: dict[str, Any] = {
        "code": "sale_soon",
        "polarity": Polarity.WAIT,
        "numbers": {"price": 259.0, "days": 6.5},
        "text": "A sale at 259.00 USD starts in 6.5 days.",
    }
    return Reason(**(fields | overrides))


def make_verdict(**overrides: Any) -> Verdict:
    fields: dict[str, Any] = {
        "kind": VerdictKind.WAIT,
        "confidence": 0.8,
        "reasons": (
            make_reason(),
            make_reason(
                code="below_average",
                polarity=Polarity.INFO,
                numbers={"pct": 3.3, "window": 90},
                text="The price is 3.3% below its 90-day average of 309.25 USD.",
            ),
        ),
        "sku": "AUR-NC700",
        "language": "en",
        "facts_version": "v7-3f9a2c",
    }
    return Verdict(**(fields | overrides))


def make_review(**overrides: Any) -> Review:
    fields: dict[str, Any] = {
        "review_id": "r-1",
        "ts_ms": 1_772_000_000_000,
        "rating": 4,
        "text": "Great noise cancelling, a bit tight after two hours.",
        "verified": True,
    }
    return Review(**(fields | overrides))


def make_stored(**overrides: Any) -> StoredExplanation:
    fields: dict[str, Any] = {
        "key": "k",
        "text": "Better to wait because a sale is near.",
        "model": "m@1",
        "sku": "S2",
        "language": "en",
        "verdict": "WAIT",
        "generated_at_ms": 1_000,
        "method": "background",
        "tries": 2,
        "sampling": "temperature 0.7, seed 1",
    }
    return StoredExplanation(**(fields | overrides))


def make_plain_sheet(**overrides: Any) -> FactSheet:
    """An ordinary price of 300 (30-day median 300), a long history, an average rating, no
    sale announced and no discount claimed: a sheet no price rule fires on, to add one
    fact to."""
    return make_sheet(
        **{
            "current_price": 300.0,
            "list_price": None,
            "windows": (
                WindowStats(30, 30, 290.0, 300.0, 300.0),
                WindowStats(90, 90, 280.0, 300.0, 300.0),
                WindowStats(180, 180, 250.0, 300.0, 300.0),
            ),
            "all_time_low": 250.0,
            "percentile_90d": 50.0,
            "trend_30d_pct": 0.0,
            "days_tracked": 400,
            "observations": 400,
            "rating": make_rating(count=50, bayesian=4.0, recent_count=10, trend=0.0),
            "upcoming_promotions": (),
        }
        | overrides
    )
