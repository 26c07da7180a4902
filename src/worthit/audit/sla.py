"""Latency evidence from the log: percentiles an auditor can check, with honest intervals.

For each stage (each key of the leaves' `timings_ms`, `total` being end to end) the
report gives the count and P50/P95/P99 as order statistics of every sample in the
window (none dropped as an outlier), each with a distribution-free 95 % confidence
interval from `scipy.stats.quantile_test` (binomial / order statistics, no assumption
about the shape of the distribution). A percentile is claimed only when the sample can
bound it from above at 95 % (one-sided): P99 needs n ≥ 299, P95 n ≥ 59, P50 n ≥ 5.

An objective ("to_verdict P99 ≤ 120 ms") passes when that one-sided upper bound is at
or under the threshold: the log shows, at 95 % confidence, that the percentile meets
it. It is `violated` when even the one-sided lower bound is above the threshold. The
intervals assume the samples are independent; answers that share a cause (one slow
minute, one overloaded host) are not, and then the true uncertainty is wider.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats  # type: ignore[import-untyped]  # scipy ships no type hints

from worthit.audit.record import ANSWER, AuditRecord

REPORT_FORMAT = "worthit-audit-sla/1"
CONFIDENCE = 0.95
PERCENTILES = (50, 95, 99)
INDEPENDENCE = (
    "The intervals are distribution-free (binomial order statistics) and assume the samples "
    "are independent; answers that share a cause (a slow minute, a busy host) are not, and "
    "then the true uncertainty is wider."
)
METHOD = (
    "Every answer leaf in the window (from inclusive, to exclusive) within the anchored tree "
    "size; no sample is dropped. Estimate: the nearest-rank order statistic. Interval: "
    "scipy.stats.quantile_test confidence_interval, two-sided 95%. A percentile is claimed "
    "only when a one-sided 95% upper bound exists; an objective passes when that bound is at "
    "or under its threshold, and is violated when the one-sided 95% lower bound is above it."
)


@dataclass(frozen=True)
class Objective:
    stage: str
    percentile: float
    threshold_ms: float

    _SYNTAX = re.compile(
        r"^\s*([A-Za-z0-9_.-]+)\s*:\s*[pP](\d+(?:\.\d+)?)\s*<=\s*(\d+(?:\.\d+)?)\s*$"
    )

    @classmethod
    def parse(cls, text: str) -> Objective:
        """`to_verdict:p99<=120`: the stage, the percentile and the bound in milliseconds."""
        match = cls._SYNTAX.match(text)
        if match is None:
            raise ValueError(f"expected STAGE:pNN<=MS (like to_verdict:p99<=120), got {text!r}")
        percentile = float(match[2])
        if not 0 < percentile < 100:
            raise ValueError(f"a percentile is between 0 and 100, got {percentile:g}")
        return cls(match[1], percentile, float(match[3]))

    def __str__(self) -> str:
        return f"{self.stage}:p{self.percentile:g}<={self.threshold_ms:g}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "percentile": self.percentile,
            "threshold_ms": self.threshold_ms,
        }


DEFAULT_OBJECTIVES = (Objective("to_verdict", 99.0, 120.0), Objective("total", 95.0, 800.0))


def min_samples(percentile: float, confidence: float = CONFIDENCE) -> int:
    """The smallest n whose largest sample bounds the percentile from above at `confidence`:
    1 − p^n ≥ confidence."""
    p = percentile / 100
    return math.ceil(math.log(1 - confidence) / math.log(p) - 1e-9)


def percentile_summary(
    ordered: np.ndarray, percentile: float, confidence: float = CONFIDENCE
) -> dict[str, Any]:
    """One percentile of a sorted sample: the claim, or why none is made."""
    n = len(ordered)
    p = percentile / 100
    needed = min_samples(percentile, confidence)
    upper = _bound(ordered, p, confidence, "less", "high")
    if upper is None:
        return {
            "claimed": False,
            "reason": f"needs at least {needed} samples for a one-sided {confidence:.0%} "
            f"upper bound, has {n}",
            "min_samples": needed,
        }
    return {
        "claimed": True,
        "estimate_ms": float(ordered[max(math.ceil(p * n), 1) - 1]),
        "ci_ms": list(interval(ordered, p, confidence)),
        "upper_bound_ms": upper,
        "lower_bound_ms": _bound(ordered, p, confidence, "greater", "low"),
        "min_samples": needed,
    }


def interval(
    ordered: np.ndarray, p: float, confidence: float = CONFIDENCE
) -> tuple[float | None, float | None]:
    """The two-sided interval for the p-quantile: two order statistics (None: unbounded)."""
    found = stats.quantile_test(ordered, p=p).confidence_interval(confidence)
    return _finite(found.low), _finite(found.high)


def upper_bound(ordered: np.ndarray, p: float, confidence: float = CONFIDENCE) -> float | None:
    """The one-sided upper bound for the p-quantile, or None when the sample is too small."""
    return _bound(ordered, p, confidence, "less", "high")


def judge(
    ordered: np.ndarray, objective: Objective, confidence: float = CONFIDENCE
) -> dict[str, Any]:
    p = objective.percentile / 100
    upper = _bound(ordered, p, confidence, "less", "high")
    lower = _bound(ordered, p, confidence, "greater", "low")
    if upper is None:
        outcome = "insufficient"
    elif upper <= objective.threshold_ms:
        outcome = "pass"
    else:
        outcome = "fail"
    return {
        **objective.to_dict(),
        "objective": str(objective),
        "count": len(ordered),
        "upper_bound_ms": upper,
        "lower_bound_ms": lower,
        "outcome": outcome,
        "passed": outcome == "pass",
        "violated": lower is not None and lower > objective.threshold_ms,
        "min_samples": min_samples(objective.percentile, confidence),
    }


def build_report(
    records: Iterable[tuple[int, AuditRecord]],
    *,
    origin: str,
    from_ms: int,
    to_ms: int,
    tree_size: int,
    root_b64: str,
    objectives: Sequence[Objective] = DEFAULT_OBJECTIVES,
    confidence: float = CONFIDENCE,
) -> dict[str, Any]:
    """The report over `records` (the window's leaves below `tree_size`, in index order)."""
    samples: dict[str, list[float]] = {}
    answers = lost = 0
    first = last = None
    for index, record in records:
        first = index if first is None else first
        last = index
        if record.kind != ANSWER:
            lost += 1
            continue
        answers += 1
        for stage, value in record.timings_ms.items():
            samples.setdefault(stage, []).append(float(value))
    ordered = {stage: np.sort(np.asarray(values)) for stage, values in samples.items()}
    empty = np.asarray([], dtype=float)
    return {
        "format": REPORT_FORMAT,
        "origin": origin,
        "from_ms": from_ms,
        "to_ms": to_ms,
        "tree_size": tree_size,
        "root": root_b64,
        "leaves": {"answers": answers, "lost": lost, "first_index": first, "last_index": last},
        "confidence": confidence,
        "stages": {stage: _stage(values, confidence) for stage, values in sorted(ordered.items())},
        "objectives": [judge(ordered.get(o.stage, empty), o, confidence) for o in objectives],
        "method": METHOD,
        "assumption": INDEPENDENCE,
    }


def objectives_of(report: Mapping[str, Any]) -> list[Objective]:
    """The objectives a report was built with, to build it again."""
    return [
        Objective(str(o["stage"]), float(o["percentile"]), float(o["threshold_ms"]))
        for o in report["objectives"]
    ]


def _stage(ordered: np.ndarray, confidence: float) -> dict[str, Any]:
    return {
        "count": len(ordered),
        "max_ms": float(ordered[-1]),
        **{f"p{p}": percentile_summary(ordered, p, confidence) for p in PERCENTILES},
    }


def _bound(
    ordered: np.ndarray, p: float, confidence: float, alternative: str, side: str
) -> float | None:
    if len(ordered) == 0:
        return None
    interval = stats.quantile_test(ordered, p=p, alternative=alternative).confidence_interval(
        confidence
    )
    return _finite(getattr(interval, side))


def _finite(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None
