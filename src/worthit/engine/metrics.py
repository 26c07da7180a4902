"""Prometheus metrics of one engine.

Each engine registers into its own CollectorRegistry (not the process-global one), so
tests and benchmarks can run several engines in one process; the server exposes the
engine's registry at /metrics. Background requests are labelled ``priority="background"``
and have gauges of their own, so the interactive gauges keep meaning interactive load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

if TYPE_CHECKING:
    from worthit.engine.status import EngineStatus
    from worthit.engine.streams import Completion

LATENCY_BUCKETS = (
    0.005, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4,
    0.5, 0.65, 0.8, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 240.0,
)  # fmt: skip
"""Fine below the 800 ms an answer has, and on to 240 s: a loaded CPU host takes tens of
seconds to write a long completion, and a histogram whose last finite bucket is below that
reads every slow request as that bucket in `histogram_quantile`. vLLM's TTFT buckets end at
2,560 s and its e2e at 7,680 s; llama-server reports only means, so these follow vLLM's
doubling steps above 10 s to the 4 minutes a CPU replica's longest requests can take."""

STEP_MODEL_TERMS = ("overhead", "per_token", "per_sample")


class EngineMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.ttft = Histogram(
            "worthit_engine_time_to_first_token_seconds",
            "Submission to first streamed token.",
            ["priority"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.inter_token = Histogram(
            "worthit_engine_inter_token_latency_seconds",
            "Time between consecutive tokens of one request.",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.queue_time = Histogram(
            "worthit_engine_queue_time_seconds",
            "Submission to the first scheduled prefill chunk.",
            ["priority"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.prefill_time = Histogram(
            "worthit_engine_prefill_time_seconds",
            "Step time spent on a request's prompt, pro rata of its tokens per step.",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.e2e = Histogram(
            "worthit_engine_e2e_latency_seconds",
            "Submission to the last token.",
            ["priority", "finish_reason"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.step_time = Histogram(
            "worthit_engine_step_seconds",
            "Duration of one llama_decode step with its sampling.",
            buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.kv_usage = Gauge(
            "worthit_engine_kv_usage_ratio", "KV blocks in use / KV blocks.", registry=r
        )
        self.prefix_queried = Counter(
            "worthit_engine_prefix_cache_queried_tokens",
            "Prompt tokens looked up in the prefix cache.", registry=r,
        )  # fmt: skip
        self.prefix_hit = Counter(
            "worthit_engine_prefix_cache_hit_tokens",
            "Prompt tokens served from the prefix cache.", registry=r,
        )  # fmt: skip
        self.host_cache_bytes = Gauge(
            "worthit_engine_host_cache_bytes",
            "Host RAM holding the KV of prefixes evicted from the KV cells.", registry=r,
        )  # fmt: skip
        self.host_cache_restores = Counter(
            "worthit_engine_host_cache_restores",
            "Prefixes copied back from host RAM instead of prefilled again.", registry=r,
        )  # fmt: skip
        self.preemptions = Counter(
            "worthit_engine_preemptions", "Running requests preempted for KV.", registry=r
        )
        self.refusals = Counter(
            "worthit_engine_admission_refusals",
            "Requests refused at submission.", ["reason"], registry=r,
        )  # fmt: skip
        self.finished = Counter(
            "worthit_engine_requests_finished",
            "Requests finished, by reason.", ["finish_reason"], registry=r,
        )  # fmt: skip
        self.running = Gauge(
            "worthit_engine_running_requests", "Interactive requests holding KV.", registry=r
        )
        self.waiting = Gauge(
            "worthit_engine_waiting_requests", "Interactive requests queued for KV.", registry=r
        )
        self.background_running = Gauge(
            "worthit_engine_background_running_requests",
            "Background requests holding KV (generating, or paused for interactive work).",
            registry=r,
        )  # fmt: skip
        self.background_waiting = Gauge(
            "worthit_engine_background_waiting_requests",
            "Background requests queued for KV.", registry=r,
        )  # fmt: skip
        self.batch_window = Gauge(
            "worthit_engine_batch_window", "Adaptive limit of running requests.", registry=r
        )
        self.tenants = Gauge(
            "worthit_engine_tenants",
            "Tenants with interactive requests queued or running.",
            registry=r,
        )
        self.step_model = Gauge(
            "worthit_engine_step_model_seconds",
            "The fitted step-time model admission prices with: a step costs overhead + "
            "per_token * tokens + per_sample * sampled rows.",
            ["term"], registry=r,
        )  # fmt: skip
        self._totals = (0, 0, 0, 0)

    def observe_finished(self, priority: str, done: Completion) -> None:
        self.e2e.labels(priority, done.finish_reason.value).observe(done.e2e_s)
        self.finished.labels(done.finish_reason.value).inc()
        if done.queue_s is not None:
            self.queue_time.labels(priority).observe(done.queue_s)
            self.prefill_time.observe(done.prefill_s)

    def record_load(self, status: EngineStatus) -> None:
        """Set the gauges from status; advance the counters by what it added since the
        last call (the engine keeps running totals, Prometheus wants increments)."""
        self.kv_usage.set(status.kv_usage)
        self.running.set(status.running)
        self.waiting.set(status.waiting)
        self.background_running.set(status.background_running)
        self.background_waiting.set(status.background_waiting)
        self.batch_window.set(status.batch_window)
        self.tenants.set(status.tenants)
        for term, seconds in zip(STEP_MODEL_TERMS, status.step_model_s, strict=True):
            self.step_model.labels(term).set(seconds)
        self.host_cache_bytes.set(status.host_cache_bytes)
        totals = (
            status.prefix_queried_tokens,
            status.prefix_hit_tokens,
            status.preemptions,
            status.host_cache_restores,
        )
        self.prefix_queried.inc(totals[0] - self._totals[0])
        self.prefix_hit.inc(totals[1] - self._totals[1])
        self.preemptions.inc(totals[2] - self._totals[2])
        self.host_cache_restores.inc(totals[3] - self._totals[3])
        self._totals = totals
