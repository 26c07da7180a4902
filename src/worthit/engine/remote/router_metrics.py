"""Prometheus metrics of the remote engine replicas a `Router` sends to.

What a replica's health and load are is read from the router at scrape time, so the
numbers are the router's own (what it routes by), never a second bookkeeping that could
drift from them; what only a stream's end knows (its finish reason, its time to first
token as this side saw it, network included) is observed there. Its own
CollectorRegistry, as the engine's (engine/metrics.py): several routers can live in one process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from worthit.engine.metrics import LATENCY_BUCKETS
from worthit.engine.sequence import FinishReason

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from worthit.engine.status import RouterStatus


class RouterMetrics:
    """`registry` holds every replica's series, labelled `replica` (its base URL)."""

    def __init__(
        self, status: Callable[[], RouterStatus], registry: CollectorRegistry | None = None
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.finished = Counter(
            "worthit_replica_requests_finished",
            "Requests a replica ended, by reason.", ["replica", "finish_reason"], registry=r,
        )  # fmt: skip
        self.ttft = Histogram(
            "worthit_replica_time_to_first_token_seconds",
            "Submission to the first text from a replica, as the router saw it.",
            ["replica"], buckets=LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        r.register(_ReplicaCollector(status))

    def ended(self, replica: str, finish: FinishReason, ttft_s: float | None) -> None:
        self.finished.labels(replica, finish.value).inc()
        if ttft_s is not None:
            self.ttft.labels(replica).observe(ttft_s)


class _ReplicaCollector(Collector):
    def __init__(self, status: Callable[[], RouterStatus]) -> None:
        self._status = status

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "worthit_replica_up", "1 while the replica takes requests, 0 once ejected.",
            labels=["replica"],
        )  # fmt: skip
        in_flight = GaugeMetricFamily(
            "worthit_replica_in_flight_requests", "Requests placed on the replica, not ended.",
            labels=["replica"],
        )  # fmt: skip
        failures = GaugeMetricFamily(
            "worthit_replica_consecutive_failures",
            "Failures since the replica's last success (ejected at the router's threshold).",
            labels=["replica"],
        )  # fmt: skip
        ejections = CounterMetricFamily(
            "worthit_replica_ejections", "Times the replica was ejected.", labels=["replica"]
        )
        ttft = GaugeMetricFamily(
            "worthit_replica_pace_ttft_seconds",
            "Moving average of time to first token: maps a deadline to max_tokens.",
            labels=["replica"],
        )  # fmt: skip
        token = GaugeMetricFamily(
            "worthit_replica_pace_token_seconds",
            "Moving average of time per further token: maps a deadline to max_tokens.",
            labels=["replica"],
        )  # fmt: skip
        for replica in self._status().replicas:
            label = [replica.url]
            up.add_metric(label, float(replica.healthy))
            in_flight.add_metric(label, replica.in_flight)
            failures.add_metric(label, replica.failures)
            ejections.add_metric(label, replica.ejections)
            ttft.add_metric(label, replica.ttft_s)
            token.add_metric(label, replica.token_s)
        yield from (up, in_flight, failures, ejections, ttft, token)
