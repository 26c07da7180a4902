"""An answer as JSON: the one shape the CLI's --json, the SSE events, the JSON answer and
the chat model's extension all speak."""

from __future__ import annotations

from typing import Any

from worthit.answer.answer_events import Finished
from worthit.decide.decider import Decision, DecisionStatus
from worthit.explain.explainer import Explanation
from worthit.facts.sheet import FactSheet
from worthit.text.time import iso


def verdict_payload(decision: Decision) -> dict[str, Any]:
    """Everything known before the model starts: sent first, as the SSE `verdict` event."""
    verdict, sheet, calibrated = decision.verdict, decision.sheet, decision.calibrated
    data: dict[str, Any] = {
        "question": decision.question,
        "status": decision.status.value,
        "intent": decision.intent.kind.value,
        "language": decision.language,
        "verdict": verdict.kind.value if verdict else None,
        "verdict_label": verdict.kind.label(decision.language) if verdict else None,
        "confidence": verdict.confidence if verdict else None,
        "calibrated_confidence": calibrated.confidence if calibrated else None,
        "calibration_evidence": calibrated.evidence if calibrated else 0,
        "reasons": [r.to_dict() for r in verdict.reasons] if verdict else [],
        "sku": sheet.sku if sheet else None,
        "title": sheet.title if sheet else None,
        "facts": facts_summary(sheet) if sheet else None,
        "data_age_ms": sheet.data_age_ms if sheet else None,
        "facts_version": sheet.version if sheet else None,
    }
    if decision.as_of_ms is not None:
        data["as_of"] = iso(decision.as_of_ms)  # an answer as of then, not now
    if decision.summary:
        data["summary"] = [r.to_dict() for r in decision.summary]
    if decision.compared:
        data["compared"] = [
            {
                "sku": j.sheet.sku,
                "title": j.sheet.title,
                "verdict": j.verdict.kind.value,
                "verdict_label": j.verdict.kind.label(decision.language),
                "confidence": j.verdict.confidence,
                "facts_version": j.sheet.version,
            }
            for j in decision.compared
        ]
    if decision.ranking:
        data["ranking"] = [
            {
                "rank": i.rank,
                "sku": i.sku,
                "title": i.title,
                "metric": i.metric,
                "value": i.value,
                "count": i.count,
            }
            for i in decision.ranking
        ]
    if decision.status in (DecisionStatus.AMBIGUOUS, DecisionStatus.UNKNOWN_PRODUCT):
        data["candidates"] = candidates_payload(decision)
    return data


def candidates_payload(decision: Decision) -> list[dict[str, Any]]:
    return [
        {
            "mention": r.mention,
            "status": r.status.value,
            "candidates": [
                {"sku": c.sku, "title": c.title, "score": c.score} for c in r.candidates
            ],
        }
        for r in decision.resolutions
    ]


def explanation_payload(explanation: Explanation | None) -> dict[str, Any]:
    if explanation is None:
        return {"explanation": None, "explanation_source": None, "finish_reason": None}
    data: dict[str, Any] = {
        "explanation": explanation.text,
        "explanation_source": explanation.source,
        "finish_reason": explanation.finish_reason,
    }
    if explanation.source == "llm":
        data["cached"] = explanation.cached
        if explanation.generated_at is not None:
            data["generated_at"] = explanation.generated_at
    if explanation.fallback_reason:
        data["fallback_reason"] = explanation.fallback_reason
        data["ungrounded"] = list(explanation.ungrounded)
    return data


DONE_FIELDS = ("finish_reason", "explanation_source", "explanation", "cached", "generated_at",
               "fallback_reason", "ungrounded", "timings_ms", "tokens", "priority",
               "request_id", "receipt")  # fmt: skip
"""What the SSE `done` event carries: the answer's end, without repeating the verdict."""


def answer_payload(finished: Finished) -> dict[str, Any]:
    """The whole answer: the verdict's fields, the explanation, timings and accounting."""
    data = verdict_payload(finished.decision)
    data.update(_ending(finished))
    return data


def done_payload(finished: Finished) -> dict[str, Any]:
    """The answer's end alone: the verdict's fields were sent first, so not built again."""
    ending = _ending(finished)
    return {key: ending[key] for key in DONE_FIELDS if key in ending}


def _ending(finished: Finished) -> dict[str, Any]:
    data = explanation_payload(finished.explanation)
    data["tokens"] = dict(finished.explanation.tokens) if finished.explanation else {}
    data["timings_ms"] = finished.timings_ms
    data["priority"] = finished.priority.name.lower()
    data["request_id"] = finished.request_id
    if finished.receipt is not None:
        data["receipt"] = finished.receipt.to_dict()
    return data


def facts_summary(sheet: FactSheet) -> dict[str, Any]:
    """The few facts a verdict card shows; the whole sheet is at /products/{sku}/facts."""
    window = sheet.window(90)
    return {
        "currency": sheet.currency,
        "current_price": sheet.current_price,
        "price_age_days": sheet.price_age_days,
        "price_stale": sheet.price_stale,
        "list_price": sheet.list_price,
        "all_time_low": sheet.all_time_low,
        "all_time_low_at": sheet.all_time_low_at,
        "avg_90d": window.avg if window else None,
        "percentile_90d": sheet.percentile_90d,
        "rating": sheet.rating.bayesian,
        "rating_count": sheet.rating.count,
        "stock": sheet.stock,
        "days_tracked": sheet.days_tracked,
        "observations": sheet.observations,
        "upcoming_promotions": [
            {"name": p.name, "starts": p.starts, "price": p.price}
            for p in sheet.upcoming_promotions
        ],
    }
