"""Prometheus metrics of the answer flow: where explanations came from, and how full the
explanation store is. Its own registry, served at /metrics beside the engine's."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

GENERATION_BUCKETS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 32.0)


class AnswerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.explanations = Counter(
            "worthit_explanations_served",
            "Explanations sent with an answer, by where the text came from "
            "(stored: the model's, from the store; live: the model's, written meanwhile; "
            "template) and language.",
            ["source", "language"], registry=r,
        )  # fmt: skip
        self.generated = Counter(
            "worthit_explanations_generated",
            "Explanations the model wrote for the store, by method and outcome "
            "(kept, failed: every try failed the checks).",
            ["method", "outcome"], registry=r,
        )  # fmt: skip
        self.tries = Histogram(
            "worthit_explanation_tries",
            "Tries best-of-k needed for a kept explanation.",
            buckets=(1, 2, 3, 4, 6, 8), registry=r,
        )  # fmt: skip
        self.generation_time = Histogram(
            "worthit_explanation_generation_seconds",
            "Time to write one stored explanation, every try included.",
            buckets=GENERATION_BUCKETS, registry=r,
        )  # fmt: skip
        self.stored = Gauge(
            "worthit_explanations_stored", "Explanations in the store (kept ones).", registry=r
        )
        self.covered = Gauge(
            "worthit_explanations_demand_covered_ratio",
            "Share of expected demand (last week's sales × language share) whose current "
            "explanation is in the store, as of the generator's last look.", registry=r,
        )  # fmt: skip
