"""`worthit serve`: the HTTP service (decision API, OpenAI-compatible API, web page)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from worthit.answer.facts_refresh import DEFAULT_REFRESH_SHARE
from worthit.audit import LogBusyError
from worthit.audit.issued import check_unlocked
from worthit.cli.market import build_demo, catch_up_demo, redis_url
from worthit.cli.options import (
    AuditDbOption,
    DbOption,
    LoraOption,
    StalePriceOption,
    audit_paths,
    market_db,
    model_files,
    shown,
)
from worthit.cli.progress import stderr
from worthit.decide.forecast_advice import DEFAULT_REFIT_S
from worthit.engine.config import EngineConfig
from worthit.engine.model_files import MODEL_ENV
from worthit.explain.store import DEFAULT_CAPACITY
from worthit.facts.builder import DEFAULT_STALE_PRICE_DAYS
from worthit.facts.cache import DEFAULT_WARM_S
from worthit.market.ingest.feed import DEFAULT_INTERVAL_S, FeedConfig
from worthit.market.ingest.redis_stream import DEFAULT_STREAM, StreamConfig
from worthit.market.store import MarketStore
from worthit.service.settings import STREAM_LIFE_S, TENANT_CONNECTIONS, TENANT_STREAMS

if TYPE_CHECKING:
    from worthit.engine.remote.router import Router
    from worthit.service.https import TlsFiles
    from worthit.service.settings import ServiceSettings
    from worthit.service.transport import TransportLimits

LOOPBACK = ("127.0.0.1", "localhost", "::1")
DEMO_TICKER_RATE = 80.0
"""Live events a second in the demo: each of its 2,000 products hears from the feed
about every 30 s, inside the 60 s freshness objective."""


def serve_command(
    db: DbOption = None,
    audit_db: AuditDbOption = None,
    model: Annotated[
        Path | None,
        typer.Option("--model", envvar=MODEL_ENV, help="A GGUF model (default: bundled SmolLM2)."),
    ] = None,
    lora: LoraOption = None,
    engines: Annotated[
        list[str] | None,
        typer.Option(
            "--engine",
            metavar="URL",
            help="Use the OpenAI-compatible engine at this base URL (e.g. "
            "http://127.0.0.1:8001/v1: `worthit engine serve`, llama-server, llama_cpp.server, "
            "vLLM, SGLang) instead of loading a model here; repeat for replicas. "
            "`?concurrency=N` sends it at most N requests at once (default: 1 for "
            "llama_cpp.server, llama-server's slots, no limit for the others).",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    demo: Annotated[
        bool,
        typer.Option(
            "--demo",
            help="Demo mode: build the demo market if absent, no API keys, loopback only.",
        ),
    ] = False,
    threads: Annotated[int, typer.Option(min=1, help="CPU threads for llama.cpp.")] = 2,
    context: Annotated[int, typer.Option(min=512, help="KV cells shared by all requests.")] = 8192,
    host_cache_mb: Annotated[
        int,
        typer.Option(min=0, help="Host RAM (MiB) for evicted prefixes' KV (0: off)."),
    ] = EngineConfig.host_cache_bytes >> 20,
    background: Annotated[
        bool,
        typer.Option(
            "--background/--no-background",
            help="Write explanations in the engine's idle time, in order of expected demand.",
        ),
    ] = True,
    explanations: Annotated[
        int, typer.Option(min=1, help="Explanations the store keeps (least recently used out).")
    ] = DEFAULT_CAPACITY,
    warm_s: Annotated[
        float,
        typer.Option(
            "--warm-s",
            min=0,
            help="Seconds spent at start-up building the fact sheets of the best sellers "
            "(each worker its own), so the first questions find them; 0: none.",
        ),
    ] = DEFAULT_WARM_S,
    refresh_share: Annotated[
        float,
        typer.Option(
            "--refresh-share",
            min=0,
            max=1,
            help="At most this share of the time between questions goes on rebuilding the "
            "fact sheets events dropped or about to expire; 0: each is built by the next "
            "question about it.",
        ),
    ] = DEFAULT_REFRESH_SHARE,
    max_sequences: Annotated[int, typer.Option(min=1, max=64)] = 16,
    deadline_ms: Annotated[
        int, typer.Option(min=100, help="Default latency objective of an answer.")
    ] = 800,
    open_operations: Annotated[
        bool,
        typer.Option(
            "--open-operations",
            help="Serve /metrics, /docs and /openapi.json without a key (they need one).",
        ),
    ] = False,
    max_connections: Annotated[
        int | None,
        typer.Option(min=1, help="Open connections at once (default 1024); more get 503."),
    ] = None,
    reserved_connections: Annotated[
        int | None,
        typer.Option(
            min=0,
            help="Connections past --max-connections kept for /healthz, /readyz and the "
            "page (default 32): no API client can take them.",
        ),
    ] = None,
    tenant_connections: Annotated[
        int,
        typer.Option(
            min=1,
            help="Requests one tenant (API key) may have in flight at once, its event streams "
            "included; more get 429 with Retry-After.",
        ),
    ] = TENANT_CONNECTIONS,
    tenant_streams: Annotated[
        int,
        typer.Option(
            min=1, help="Event streams (GET /v1/watches/events) one tenant may hold open at once."
        ),
    ] = TENANT_STREAMS,
    stream_life_s: Annotated[
        float,
        typer.Option(
            "--stream-life-s",
            min=1,
            help="Seconds an event stream lasts before the server ends it; its client "
            "reconnects with Last-Event-ID and misses nothing.",
        ),
    ] = STREAM_LIFE_S,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            max=64,
            help="API processes sharing the port and the store; with more than one, the "
            "model runs in an engine process of its own (or at --engine) that they all reach "
            "over the OpenAI-compatible wire.",
        ),
    ] = 1,
    live_rate: Annotated[
        float | None,
        typer.Option(
            min=0,
            help=f"Run the live simulator in the server at this many events a second "
            f"(default: {DEMO_TICKER_RATE:g} with --demo, else 0: off).",
            show_default=False,
        ),
    ] = None,
    stale_price_days: StalePriceOption = DEFAULT_STALE_PRICE_DAYS,
    forecast_refit_s: Annotated[
        float,
        typer.Option(
            "--forecast-refit-s",
            min=0,
            help="Fit the store's forecaster from its own history at start and again this "
            "often (seconds), in a process of its own; 0: the verdict rules alone.",
        ),
    ] = DEFAULT_REFIT_S,
    freshness: Annotated[
        bool | None,
        typer.Option(
            "--freshness/--no-freshness",
            help="Hold answers to the freshness objective (default: on when the live "
            "simulator runs or --redis is given; turn it on when a feed posts events to "
            "/v1/events).",
            show_default=False,
        ),
    ] = None,
    redis: Annotated[
        str | None,
        typer.Option(
            "--redis",
            help="Also consume events from a Redis stream (redis://host:port/db), in a "
            "consumer group shared by every server on it, and share through it the rate "
            "limits, fact cache, explanation store and watch notifications.",
            show_default=False,
        ),
    ] = None,
    redis_stream: Annotated[
        str, typer.Option("--redis-stream", help="With --redis: the stream's key.")
    ] = DEFAULT_STREAM,
    feed: Annotated[
        list[str] | None,
        typer.Option(
            "--feed",
            metavar="URL[@SECONDS]",
            help=f"Also poll a JSON, JSONL or CSV feed of events at this URL, every SECONDS "
            f"(default {DEFAULT_INTERVAL_S:g}), with conditional GETs; repeat for several.",
            show_default=False,
        ),
    ] = None,
    tls_cert: Annotated[
        Path | None,
        typer.Option(
            "--tls-cert",
            help="Serve HTTPS (TLS 1.3, HTTP/2) with this PEM certificate chain; needs --tls-key.",
            show_default=False,
        ),
    ] = None,
    tls_key: Annotated[
        Path | None,
        typer.Option(
            "--tls-key",
            help="With --tls-cert: its unencrypted PEM private key.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve worthit over HTTP until interrupted."""
    from worthit.engine.engine import Engine
    from worthit.engine.runner import LlamaRunner
    from worthit.http.app import create_app
    from worthit.service import runtime
    from worthit.service.settings import ServiceSettings
    from worthit.service.transport import DEFAULT_LIMITS, TransportLimits

    if redis is not None:
        redis = redis_url(redis)
    feeds = tuple(feed_config(spec) for spec in feed or ())
    tls = tls_files(tls_cert, tls_key)
    remote = engine_router(engines)
    model_path, lora_path = model_files(model, lora) if remote is None else (None, None)
    if demo and host not in LOOPBACK:
        stderr.print(f"[red]error:[/] --demo turns auth off, so it binds loopback only, not {host}")
        raise typer.Exit(2)
    path = market_db(db)
    audit = audit_paths(path, audit_db)
    try:
        check_unlocked(audit.issued)
    except LogBusyError as exc:
        stderr.print(f"[red]error:[/] {exc}: is another `worthit serve` running on {path}?")
        raise typer.Exit(2) from None
    store = MarketStore(path)
    if store.count_products() == 0:
        if not demo:
            stderr.print(
                f"[red]error:[/] no products in {shown(path)}: import some, or run with --demo"
            )
            raise typer.Exit(2)
        stderr.print(f"no market at {shown(path)}: building the demo market first")
        build_demo(store)
    else:
        catch_up_demo(store)
    store.close()
    rate = live_rate if live_rate is not None else (DEMO_TICKER_RATE if demo else 0.0)
    config = EngineConfig(
        context_size=context,
        host_cache_bytes=host_cache_mb << 20,
        n_threads=threads,
        max_sequences=max_sequences,
        default_deadline_s=deadline_ms / 1000,
    )
    settings = ServiceSettings(
        db_path=path,
        audit_db=audit.db,
        model_path=model_path,
        lora_path=lora_path,
        engine_config=config,
        auth=not demo,
        open_operations=open_operations,
        default_deadline_ms=deadline_ms,
        background=background,
        explanation_capacity=explanations,
        warm_s=warm_s,
        refresh_share=refresh_share,
        ticker_rate=rate,
        freshness=freshness
        if freshness is not None
        else rate > 0 or redis is not None or bool(feeds),
        stale_price_days=stale_price_days,
        forecast_refit_s=forecast_refit_s,
        redis_url=redis,
        redis_stream=redis_stream,
        feeds=feeds,
        tenant_connections=tenant_connections,
        tenant_streams=tenant_streams,
        stream_life_s=stream_life_s,
    )
    limits = TransportLimits(
        max_connections=max_connections or DEFAULT_LIMITS.max_connections,
        reserved_connections=DEFAULT_LIMITS.reserved_connections
        if reserved_connections is None
        else reserved_connections,
    )
    if workers > 1:
        serve_with_workers(settings, workers, host, port, limits, engines, tls)
        return
    engine = None
    if model_path is not None:
        engine = Engine(LlamaRunner(model_path, config, lora_path), config)
        engine.claim_current_thread()
    app = create_app(settings, engine=engine, remote=remote)
    adapter = f" + adapter {lora_path.name}" if lora_path else ""
    serving = (
        f"model {model_path.name}{adapter}" if model_path else f"engines {', '.join(engines or ())}"
    )
    url = served_url(host, port, tls)
    stderr.print(f"worthit on {url}  ({serving}, market {shown(path)})")
    if demo:
        stderr.print("[yellow]demo mode: API keys are OFF; listening on loopback only[/]")
    if rate > 0:
        into = shown(path) if isinstance(path, str) else path.name
        stderr.print(f"live simulator: {rate:g} events a second into {into}")
    if redis is not None:
        where = StreamConfig(redis, redis_stream).where
        stderr.print(f"events: Redis stream {redis_stream} at {where} (group worthit)")
    for feed_settings in feeds:
        stderr.print(f"events: feed {feed_settings.where} every {feed_settings.interval_s:g} s")
    stderr.print(
        f"try:  curl -N -H 'Accept: text/event-stream' -H 'Content-Type: application/json' "
        f'-d \'{{"question": "Is the Aurora NC700 worth buying?"}}\' {url}/v1/decide'
    )
    runtime.run(app, engine, host, port, engine_nice=runtime.ENGINE_NICE, limits=limits, tls=tls)


def serve_with_workers(
    settings: ServiceSettings,
    workers: int,
    host: str,
    port: int,
    limits: TransportLimits,
    engines: list[str] | None,
    tls: TlsFiles | None,
) -> None:
    """`--workers N`: the engine in its own process (unless --engine names replicas), N
    API processes on the port (service/workers.py)."""
    from worthit.http.app import create_app
    from worthit.service.workers import WorkerPlan, engine_command, serve_workers

    config = settings.engine_config
    command: tuple[str, ...] = ()
    if not engines:
        assert settings.model_path is not None and config is not None
        command = engine_command(
            settings.model_path,
            lora=settings.lora_path,
            threads=config.n_threads,
            context=config.context_size,
            max_sequences=config.max_sequences,
            deadline_ms=settings.default_deadline_ms,
        )
    url = served_url(host, port, tls)
    where = ", ".join(engines) if engines else f"an engine process ({settings.model_path})"
    stderr.print(f"worthit on {url}: {workers} workers, market {settings.db_path}, {where}")
    if not settings.auth:
        stderr.print("[yellow]demo mode: API keys are OFF; listening on loopback only[/]")
    serve_workers(
        WorkerPlan(
            settings,
            workers,
            host,
            port,
            limits,
            tuple(engines or ()),
            command,
            tls,
            make_app=create_app,
        )
    )


def served_url(host: str, port: int, tls: TlsFiles | None) -> str:
    return f"{'http' if tls is None else 'https'}://{'[::1]' if host == '::1' else host}:{port}"


def tls_files(cert: Path | None, key: Path | None) -> TlsFiles | None:
    """Both or neither; a usage error naming the option at fault when the server could
    not use them (checked here, before the model loads)."""
    from worthit.service.https import TlsFileError, TlsFiles, check_tls_files

    if cert is None and key is None:
        return None
    if cert is None or key is None:
        missing = "--tls-cert" if cert is None else "--tls-key"
        raise typer.BadParameter("--tls-cert and --tls-key go together", param_hint=missing)
    tls = TlsFiles(cert, key)
    try:
        check_tls_files(tls)
    except TlsFileError as exc:
        raise typer.BadParameter(str(exc), param_hint=f"--tls-{exc.which}") from None
    return tls


def engine_router(urls: list[str] | None) -> Router | None:
    """--engine URLs → the router over them; a usage error naming --engine otherwise."""
    from worthit.engine.remote.client import engine_address
    from worthit.engine.remote.router import Router

    if not urls:
        return None
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise typer.BadParameter(f"{url!r} is not an http(s) URL", param_hint="--engine")
        try:
            engine_address(url)
        except ValueError as exc:
            raise typer.BadParameter(f"{url!r}: {exc}", param_hint="--engine") from None
    return Router(urls)


def feed_config(spec: str) -> FeedConfig:
    """`URL` or `URL@SECONDS` → the feed's settings; a usage error naming --feed otherwise.
    Only a number after the last `@` is an interval, so a URL with credentials
    (`https://user:pw@host/f.csv`) reads as it should."""
    head, at, tail = spec.rpartition("@")
    seconds = _seconds(tail) if at else None
    url, interval_s = (head, seconds) if seconds is not None else (spec, DEFAULT_INTERVAL_S)
    try:
        return FeedConfig(url, interval_s=interval_s)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--feed") from None


def _seconds(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
