"""`worthit import` and `worthit simulate`: getting a market into the store."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from datetime import date
from pathlib import Path
from typing import Annotated

import typer

from worthit.cli.options import DbOption, JsonOption, market_db, shown
from worthit.cli.progress import bar, stderr
from worthit.demo.catchup import DemoBuild, catch_up, remember
from worthit.demo.simulator import SimulationSummary, simulate
from worthit.demo.ticker import MarketTicker, run_ticker
from worthit.market.bus import EventBus
from worthit.market.ingest.importer import run_import
from worthit.market.ingest.redis_stream import DEFAULT_STREAM, StreamConfig, StreamPublisher
from worthit.market.store import MarketStore
from worthit.text.time import from_ms, now_ms

DEMO_SKUS = 2000
DEMO_DAYS = 180
DEMO_SEED = 7
LIVE_RATE = 50.0
MAX_ERRORS_SHOWN = 20
FUTURE_LINES_SHOWN = 10
REDIS_SCHEMES = ("redis://", "rediss://", "unix://")


def import_command(
    file: Annotated[str, typer.Argument(help="JSONL file to import, or - for stdin.")],
    db: DbOption = None,
    reject_future: Annotated[
        bool,
        typer.Option(
            "--reject-future",
            help="Refuse lines stamped more than 5 minutes after now (by default they are "
            "stored and reported: no answer reads them as current before their time).",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Import products, prices, stock, reviews, promotions and sales from JSONL."""
    if file != "-" and not Path(file).is_file():
        stderr.print(f"[red]error:[/] no such file: {file}")
        raise typer.Exit(2)
    store = MarketStore(market_db(db))
    total = None if file == "-" else _count_lines(Path(file))
    handle = sys.stdin if file == "-" else open(file, encoding="utf-8")  # noqa: SIM115
    try:
        with bar("importing", total) as update:
            report = run_import(store, handle, update, reject_future=reject_future)
    finally:
        if handle is not sys.stdin:
            handle.close()
    if as_json:
        import json

        print(
            json.dumps(
                {
                    "lines": report.lines,
                    "written": report.written,
                    "unchanged": report.unchanged,
                    "errors": [
                        {"line": e.line, "field": e.field, "message": e.message}
                        for e in report.errors
                    ],
                    "future": {"count": len(report.future), "lines": report.future[:100]},
                },
                ensure_ascii=False,
            )
        )
    else:
        for error in report.errors[:MAX_ERRORS_SHOWN]:
            stderr.print(f"[yellow]{error}[/]", markup=True, highlight=False)
        hidden = len(report.errors) - MAX_ERRORS_SHOWN
        if hidden > 0:
            stderr.print(f"… and {hidden} more bad lines")
        if report.future:
            stderr.print(f"[yellow]warning:[/] {_future_warning(report.future)}", highlight=False)
        print(
            f"{report.lines} lines: {report.written} written, {report.unchanged} unchanged, "
            f"{len(report.errors)} rejected"
        )
    if report.errors:
        raise typer.Exit(1)


def _future_warning(lines: list[int]) -> str:
    first = ", ".join(str(n) for n in lines[:FUTURE_LINES_SHOWN])
    more = ", …" if len(lines) > FUTURE_LINES_SHOWN else ""
    return (
        f"{len(lines)} lines stamped in the future (lines {first}{more}): stored, but no "
        "answer reads them as current before their time; check the feed's clock and time "
        "zone, or use --reject-future to refuse them"
    )


def simulate_command(
    skus: Annotated[int, typer.Option(min=1, help="How many products.")] = DEMO_SKUS,
    days: Annotated[int, typer.Option(min=1, max=3650, help="Days of history.")] = DEMO_DAYS,
    seed: Annotated[int, typer.Option(help="Same seed, same market.")] = DEMO_SEED,
    end: Annotated[
        str | None, typer.Option(help="Last simulated day, YYYY-MM-DD (default: today, UTC).")
    ] = None,
    db: DbOption = None,
    live: Annotated[
        bool,
        typer.Option(
            "--live",
            help="Then keep publishing live changes (prices, stock, reviews) into the store "
            "until interrupted; a market already there is kept as it is.",
        ),
    ] = False,
    rate: Annotated[float, typer.Option(min=0.1, help="With --live: events a second.")] = LIVE_RATE,
    duration: Annotated[
        float | None,
        typer.Option(min=0, help="With --live: stop after this many seconds.", show_default=False),
    ] = None,
    redis: Annotated[
        str | None,
        typer.Option(
            "--redis",
            help="With --live: publish to this Redis (redis://host:port/db) stream instead "
            "of applying, for the servers consuming it (worthit serve --redis).",
            show_default=False,
        ),
    ] = None,
    redis_stream: Annotated[
        str, typer.Option("--redis-stream", help="With --redis: the stream's key.")
    ] = DEFAULT_STREAM,
) -> None:
    """Build a deterministic demo market (same seed and end day → same content)."""
    try:
        end_day = date.fromisoformat(end) if end else None
    except ValueError:
        stderr.print(f"[red]error:[/] --end must be YYYY-MM-DD, got {end!r}")
        raise typer.Exit(2) from None
    if redis is not None:
        redis = redis_url(redis)
        if not live:
            stderr.print("[red]error:[/] --redis publishes live events: give --live too")
            raise typer.Exit(2)
    store = MarketStore(market_db(db))
    if not live or store.count_products() == 0:
        print(_describe(build_demo(store, skus, days, seed, end_day)))
    if live and redis is not None:
        where = StreamConfig(redis, redis_stream).where
        stderr.print(f"live: {rate:g} events a second to {redis_stream} at {where} (Ctrl-C stops)")
        started = time.monotonic()
        publisher = StreamPublisher(redis, redis_stream)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_publish_ticker(store, publisher, rate, seed, duration))
        print(
            f"live: {publisher.published} events in {time.monotonic() - started:.1f} s "
            f"published to {redis_stream} ({publisher.retries} retried sends)"
        )
    elif live:
        stderr.print(f"live: {rate:g} events a second into {shown(store.path)} (Ctrl-C stops)")
        started = time.monotonic()
        bus = EventBus(store)
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_run_ticker(store, bus, rate, seed, duration))
        stats = bus.stats
        print(
            f"live: {stats.published} events in {time.monotonic() - started:.1f} s: "
            f"{stats.applied} applied, {stats.duplicates} duplicates, {stats.rejected} rejected"
        )


async def _run_ticker(
    store: MarketStore, bus: EventBus, rate: float, seed: int, duration: float | None
) -> None:
    """The demo ticker into the store through this process's own bus; a server on the
    same file sees the changes by their revisions."""
    bus.start()
    try:
        await run_ticker(MarketTicker(store, seed=seed), bus.publish, rate, duration_s=duration)
    finally:
        await bus.stop()


async def _publish_ticker(
    store: MarketStore, publisher: StreamPublisher, rate: float, seed: int, duration: float | None
) -> None:
    """The demo ticker into a Redis stream: the servers consuming it apply the events."""
    try:
        await run_ticker(
            MarketTicker(store, seed=seed), publisher.publish, rate, duration_s=duration
        )
    finally:
        await publisher.close()


def redis_url(url: str) -> str:
    """`url` when it names a Redis server; a usage error naming --redis otherwise."""
    if not url.startswith(REDIS_SCHEMES):
        raise typer.BadParameter(
            f"expected a URL starting with {', '.join(REDIS_SCHEMES)}, got {url!r}",
            param_hint="--redis",
        )
    return url


def build_demo(
    store: MarketStore,
    skus: int = DEMO_SKUS,
    days: int = DEMO_DAYS,
    seed: int = DEMO_SEED,
    end: date | None = None,
) -> SimulationSummary:
    """Simulate the demo market into `store` and mark it as the demo, so that serving or
    asking on it later may bring it up to that day (`catch_up_demo`)."""
    with bar(f"simulating {skus} products × {days} days", skus) as update:
        summary = simulate(
            store,
            skus=skus,
            days=days,
            seed=seed,
            end=end,
            progress=lambda done, _total: update(done),
        )
    remember(store.path, DemoBuild(skus, days, seed, summary.end, summary.end))
    return summary


def catch_up_demo(store: MarketStore) -> None:
    """Simulate the days a demo market missed since its last one, through today, so that
    its prices are not stale (INSUFFICIENT_DATA) when served or asked; any other market
    is left as it is. An unmarked demo is one `serve --demo` or `ask` built before builds
    were marked, so with their sizes."""
    today = from_ms(now_ms()).date()
    with stderr.status("[dim]bringing the demo market up to today…[/]", spinner="dots"):
        caught = catch_up(store, today, unmarked=(DEMO_DAYS, DEMO_SEED))
    if caught is not None:
        stderr.print(caught.line(), highlight=False)


def _describe(summary: SimulationSummary) -> str:
    return (
        f"demo market ready (through {summary.end}): {summary.products} products, "
        f"{summary.prices} prices, {summary.stock} stock levels, {summary.reviews} reviews, "
        f"{summary.promotions} promotions, {summary.sales} sales days; "
        f"{summary.written} rows written"
    )


def _count_lines(path: Path) -> int:
    with path.open("rb") as handle:
        return sum(1 for _ in handle)
