"""What an engine reports about its load: the local engine's `EngineStatus`, the
router's `RouterStatus` over its replicas.

Plain frozen records in a module of their own, so that the metrics that read them and the
engines that produce them each import this and not one another.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineStatus:
    """The engine's load, for health checks and metrics."""

    model_id: str
    running: int
    """Interactive requests holding KV."""
    waiting: int
    """Interactive requests queued for KV."""
    kv_usage: float
    """KV blocks in use / KV blocks."""
    cached_prefixes: int
    batch_window: int
    preemptions: int
    prefix_queried_tokens: int
    prefix_hit_tokens: int
    background_running: int
    """Background requests holding KV: generating while no interactive work runs, else paused."""
    background_waiting: int
    """Background requests queued (at most max_background_waiting admitted)."""
    tenants: int = 0
    """Tenants with interactive requests queued or running (anonymous requests are one)."""
    host_cache_bytes: int = 0
    """Host RAM holding evicted prefixes' KV (kv/host_cache.py)."""
    host_cache_restores: int = 0
    """Prefixes restored from host RAM since start, instead of prefilled again."""
    step_model_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """The interactive step-time model admission prices with: overhead, per token, per
    sampled row (timing/latency.py). What a refusal's price was made of, afterwards."""


@dataclass(frozen=True)
class ReplicaStatus:
    url: str
    model_id: str
    wire: str
    healthy: bool
    in_flight: int
    failures: int
    ejections: int
    ttft_s: float
    """The measured pace (moving averages) that maps a deadline to max_tokens for
    servers that take no deadline: time to first token, then per token."""
    token_s: float
    concurrency: int | None = None
    """Requests it is sent at once (None: no limit; engine/remote/slots.py)."""
    waiting: int = 0
    """Requests waiting here for one of those slots."""


@dataclass(frozen=True)
class RouterStatus:
    model_id: str
    replicas: tuple[ReplicaStatus, ...]

    @property
    def healthy(self) -> int:
        return sum(r.healthy for r in self.replicas)

    @property
    def running(self) -> int:
        return sum(r.in_flight for r in self.replicas)
