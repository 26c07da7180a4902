"""`worthit backtest`: replay the store and score the verdicts against buying at once."""

from __future__ import annotations

import json
import time
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from worthit.cli.options import DbOption, JsonOption, StalePriceOption, db_exists, market_db
from worthit.cli.progress import bar, stderr
from worthit.decide.backtest import (
    DEFAULT_EVERY,
    DEFAULT_HORIZON,
    Score,
    Summary,
    plan_replay,
    replay,
)
from worthit.decide.forecast_replay import compare_policies
from worthit.facts.builder import DEFAULT_STALE_PRICE_DAYS, FactsBuilder
from worthit.market.store import MarketStore

REASONS_SHOWN = 8


EveryOption = Annotated[int, typer.Option(min=1, help="Days between decision days.")]
HorizonOption = Annotated[
    int, typer.Option(min=1, help="Days a WAIT may wait before it buys anyway.")
]
SkusOption = Annotated[
    int | None,
    typer.Option(min=1, help="Only the first N products (default: all).", show_default=False),
]
"""The replay's options, shared with `worthit calibration`, which replays the same way."""


def backtest_command(
    db: DbOption = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="First decision day, YYYY-MM-DD (default: the first price).",
            show_default=False,
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option(
            "--to",
            help="Last decision day, YYYY-MM-DD (default and at most: the horizon before the "
            "last price).",
            show_default=False,
        ),
    ] = None,
    every: EveryOption = DEFAULT_EVERY,
    horizon: HorizonOption = DEFAULT_HORIZON,
    skus: SkusOption = None,
    stale_price_days: StalePriceOption = DEFAULT_STALE_PRICE_DAYS,
    as_json: JsonOption = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Also write every decision to this JSONL file.", show_default=False
        ),
    ] = None,
    anchors: Annotated[
        bool,
        typer.Option(
            "--anchors",
            help="Also score the Keepa-style and camelcamelcamel-style rules and always-wait "
            "on the same decisions.",
        ),
    ] = False,
    forecast: Annotated[
        bool,
        typer.Option(
            "--forecast",
            help="Also score the forecaster learned from the store's history: with the rules "
            "(what `worthit serve` answers) and alone (the Keepa rule where it has no model); "
            "implies --anchors.",
        ),
    ] = False,
) -> None:
    """Replay the market: the verdict as of each decision day, a shopper who follows it,
    and the share of the clairvoyant saving that shopper captures."""
    path = market_db(db, create=False)
    if not db_exists(path):
        stderr.print(f"[red]error:[/] no database at {path} (run `worthit simulate` first)")
        raise typer.Exit(2)
    store = MarketStore(path)
    try:
        plan = plan_replay(store, _day(start, "--from"), _day(end, "--to"), every, horizon)
    except ValueError as exc:
        stderr.print(f"[red]error:[/] {exc}")
        raise typer.Exit(2) from None
    names = [hit.sku for hit in store.all_names()]
    chosen = names[:skus] if skus is not None else names
    summary = Summary()
    policies: dict[str, Score] = {}
    started = time.perf_counter()
    cpu_started = time.process_time()
    builder = FactsBuilder(store, stale_price_days=stale_price_days)
    sink = open(out, "w", encoding="utf-8") if out is not None else None  # noqa: SIM115
    try:
        with bar("replaying", len(chosen)) as update:
            if anchors or forecast:
                span = store.price_span()
                assert span is not None  # plan_replay refused a market without prices
                outcomes = compare_policies(
                    builder, plan, chosen, span, policies, forecast=forecast, progress=update
                )
            else:
                outcomes = replay(builder, plan, chosen, update)
            for outcome in outcomes:
                summary.add(outcome)
                if sink is not None:
                    sink.write(json.dumps(outcome.to_dict(), ensure_ascii=False) + "\n")
    finally:
        if sink is not None:
            sink.close()
    wall_s = round(time.perf_counter() - started, 1)
    cpu_s = round(time.process_time() - cpu_started, 1)
    params: dict[str, Any] = {
        "from": plan.first.isoformat(),
        "to": plan.last.isoformat(),
        "every": plan.every,
        "horizon": plan.horizon,
        "products": len(chosen),
        "decision_days": len(plan.days),
        "stale_price_days": stale_price_days,
    }
    if as_json:
        extra = {"policies": {k: v.to_dict() for k, v in policies.items()}} if policies else {}
        print(json.dumps({"params": params, "wall_s": wall_s, "cpu_s": cpu_s,
                          **summary.to_dict(), **extra}))  # fmt: skip
        return
    console = Console(highlight=False, soft_wrap=True)
    console.print(
        f"decisions {params['from']} to {params['to']} every {every} days, "
        f"{horizon}-day horizon, {len(chosen)} products: {wall_s} s ({cpu_s} s CPU)"
    )
    rows = [("all", summary.overall), *sorted(summary.by_category.items())]
    console.print(_table("category", rows))
    costly = sorted(summary.by_reason.items(), key=lambda kv: _missed(kv[1]), reverse=True)
    console.print("the reasons behind the decisions that missed the most saving:")
    console.print(_table("reason", costly[:REASONS_SHOWN], by_reason=True))
    if policies:
        console.print("other advice on the same decisions (those worthit bought or waited on):")
        console.print(_table("policy", [("worthit", summary.overall), *policies.items()]))
    console.print(legend(horizon), highlight=False)
    if out is not None:
        console.print(f"{summary.overall.decisions} decisions written to {out}")


def legend(horizon: int) -> str:
    """What each column means, printed under the tables: the scores are Etzioni et al.'s
    (docs/verdict.md), which a reader of the table should not need to look up."""
    return "\n".join((
        "[dim]n: decisions (one product on one decision day); BUY WAIT SKIP N/A: the verdicts "
        "(N/A: insufficient data)",
        "captured: the saving against buying at once, as a share of a clairvoyant's who "
        f"paid the lowest price of the next {horizon} days (BUY and WAIT decisions)",
        "worse: the share of those decisions that paid more than buying at once",
        "regret: the mean of 100 · (paid − lowest) / lowest, in %",
        f"BUY↓5%: the share of BUYs followed by a price at least 5% lower within {horizon} days",
        "missed: the clairvoyant saving those decisions did not capture, in the market's "
        "currency[/]",
    ))  # fmt: skip


def _day(text: str | None, option: str) -> date | None:
    if text is None:
        return None
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise typer.BadParameter(f"expected YYYY-MM-DD, got {text!r}", param_hint=option) from None


def _missed(score: Score) -> float:
    """The clairvoyant saving the decisions of a reason did not capture."""
    return score.clairvoyant - score.saving


def _table(first: str, rows: list[tuple[str, Score]], by_reason: bool = False) -> Table:
    """Shares as percentages; `by_reason` trades the verdict counts for the saving missed."""
    counts = () if by_reason else ("BUY", "WAIT", "SKIP", "N/A")
    extra = ("missed",) if by_reason else ()
    table = Table(first, "n", *counts, "captured", "worse", "regret", "BUY↓5%", *extra,
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)  # fmt: skip
    table.columns[0].no_wrap = True
    for name, score in rows:
        data = score.to_dict()
        verdicts = data["verdicts"]
        cells = [name, str(data["decisions"])]
        if not by_reason:
            cells += [str(verdicts[kind]) for kind in ("BUY", "WAIT", "SKIP", "INSUFFICIENT_DATA")]
        cells += [_pct(data["captured"]), _pct(data["worse_off"]),
                  _num(data["mean_regret_pct"], "%"), _pct(data["buy_then_lower"])]  # fmt: skip
        if by_reason:
            cells.append(f"{_missed(score):,.0f}")
        table.add_row(*cells)
    return table


def _pct(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.1f}%"


def _num(value: float | None, unit: str) -> str:
    return "—" if value is None else f"{value:.2f}{unit}"
