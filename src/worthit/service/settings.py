"""What one `worthit serve` is configured with: every choice `create_app` acts on."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from worthit.answer.facts_refresh import DEFAULT_REFRESH_SHARE
from worthit.audit import CheckpointPolicy
from worthit.engine.config import EngineConfig
from worthit.explain.store import DEFAULT_CAPACITY
from worthit.facts.builder import DEFAULT_STALE_PRICE_DAYS
from worthit.facts.cache import DEFAULT_WARM_S
from worthit.text.time import Clock, now_ms

if TYPE_CHECKING:  # httpx and pydantic: what a server's feeds need, not `ask`
    from worthit.market.ingest.feed import FeedConfig

TENANT_CONNECTIONS = 256
"""A quarter of a process's 1,024 connections: four tenants at their cap leave the rest."""
TENANT_STREAMS = 32
"""A retailer's servers each hold one watch stream; 32 is room for many, far from 1,024."""
STREAM_LIFE_S = 600.0
"""Ten minutes: long enough that reconnects cost nothing, short enough that a share held
by forgotten streams comes back."""


@dataclass(frozen=True)
class ServiceSettings:
    db_path: str | Path | None
    """The market database: a SQLite file, or a postgresql:// URL. None serves the engine
    alone: the OpenAI-compatible API over the GGUF, with no decisions, products or page
    (`worthit engine serve`)."""
    audit_db: Path | None = None
    """The audit log's SQLite file; None: beside a SQLite market (`<market>.audit.db`). A
    PostgreSQL market needs one (`worthit serve` picks it: `cli.options.audit_paths`)."""
    model_path: Path | None = None
    """The GGUF to load at start-up, when no engine is handed to `create_app`."""
    lora_path: Path | None = None
    """The LoRA adapter applied to `model_path`; part of the stored explanations' key."""
    engine_config: EngineConfig | None = None
    auth: bool = True
    """API keys required on every route but the open ones (`--demo` turns it off, and
    then the service answers only to loopback Host names)."""
    open_operations: bool = False
    """With auth on, leave /metrics, /docs and /openapi.json open without a key (for a
    Prometheus scraper on a private network); off, they need a key like /v1."""
    default_deadline_ms: int = 800
    explanation_capacity: int = DEFAULT_CAPACITY
    """Explanations the store keeps (least recently used out first)."""
    warm_s: float = DEFAULT_WARM_S
    """At start-up, before the first question, build the fact sheets of last week's best
    sellers (then the other products) for at most this long (`Answerer.warm`); 0: none."""
    refresh_share: float = DEFAULT_REFRESH_SHARE
    """At most this share of the time between questions goes on rebuilding the fact
    sheets events dropped and those about to expire (answer/facts_refresh.py); 0: none,
    each is built by the next question that needs it."""
    background: bool = True
    """Write explanations in the engine's idle time, in order of expected demand."""
    clock: Clock = now_ms
    """What "now" is for fact sheets; tests pin it, so answers do not depend on the day."""
    stale_price_days: float = DEFAULT_STALE_PRICE_DAYS
    """A product whose last price is older than this gets no price verdict: its sheet
    says the price is stale, and the verdict is INSUFFICIENT_DATA (`stale_price`)."""
    forecast_refit_s: float = 0.0
    """Fit the store's forecaster from its own history at start and again this often, in
    a process of its own; verdicts read the latest fit (decide/forecast_refit.py). 0: the
    rules alone (`worthit serve` fits every `DEFAULT_REFIT_S` unless told otherwise)."""
    audit: bool = True
    """Append every answer to the audit log beside the market (`<market>.audit.db`)."""
    audit_policy: CheckpointPolicy = field(default_factory=CheckpointPolicy)
    """How often the log signs a checkpoint (every 1024 leaves or 5 s)."""
    ticker_rate: float = 0.0
    """Events a second the demo ticker (demo/ticker.py) publishes into the service's own
    event bus (`worthit serve --live-rate`; 0: none)."""
    freshness: bool = False
    """Hold answers to the freshness objective (decide/rules.py): an answer on data older
    than it says so and is less confident. For a store fed live: the demo ticker above, or
    a retailer's feed through POST /v1/events."""
    ticker_seed: int = 7
    redis_url: str | None = None
    """Consume events from a Redis stream too (`worthit serve --redis`; None: only the
    in-process bus), and share the rate limits, fact cache, explanation store and watch
    notifications with the other servers on the store (service/shared_state.py). Redis
    being unreachable degrades /readyz; answers go on."""
    redis_stream: str = "worthit:events"
    """The stream's key; entries that cannot be applied go to this key + ':dead'."""
    redis_group: str = "worthit"
    """The consumer group every `worthit serve` on the stream joins."""
    redis_claim_idle_s: float = 30.0
    """Entries pending this long (a dead consumer's, a rejected event's) are delivered again."""
    feeds: tuple[FeedConfig, ...] = ()
    """JSON, JSONL or CSV files at URLs, each polled into the bus on its own interval
    (`worthit serve --feed`); one that fails degrades /readyz, answers go on."""
    watch_hooks_private: bool = False
    """Let price watches' webhooks go to loopback and private addresses (tests, a receiver
    on the retailer's own network). Off, only public addresses are called (SSRF); the
    keyless demo always allows them."""
    watch_attempts: int = 8
    """Attempts at one watch webhook before it is marked failed."""
    watch_retry_s: float = 2.0
    """The first retry's backoff; each later one doubles it (with jitter, at most 10 min)."""
    deliver_watches: bool = True
    """Send the watches' webhooks from this process. `--workers` leaves it to worker 0,
    which then also looks every `watch_poll_s` for deliveries the others queued."""
    watch_poll_s: float | None = None
    """How often to look for webhook deliveries queued by other processes (None: only
    this one queues them, and it wakes the sender itself)."""
    tenant_connections: int = TENANT_CONNECTIONS
    """Requests one tenant may have in flight at once, its event streams included
    (http/shares.py): one more is 429 with Retry-After, so no key takes every connection."""
    tenant_streams: int = TENANT_STREAMS
    """Event streams (`GET /v1/watches/events`) one tenant may hold open at once."""
    stream_life_s: float = STREAM_LIFE_S
    """An event stream ends after this long; its client reconnects with Last-Event-ID and
    misses nothing, and a tenant's share held by streams comes free."""
    audit_origin: str | None = None
    """The audit log's origin line, for a log created now (None: `worthit.local/audit`);
    each worker of `--workers` names its own."""
    worker: int | None = None
    """Which worker of `worthit serve --workers` this process is (None: the only one)."""
