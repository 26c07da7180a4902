"""How answers and fact sheets look: on a terminal, and as JSON for machines."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from worthit.answer.answer_events import Finished
from worthit.decide.decider import Decision, DecisionStatus
from worthit.facts.sheet import FactSheet
from worthit.text.money import money

_COLOURS = {"BUY": "bold green", "WAIT": "bold yellow", "SKIP": "bold red"}


def print_verdict(console: Console, decision: Decision) -> None:
    verdict, sheet = decision.verdict, decision.sheet
    if verdict is None or sheet is None:
        for reason in decision.summary:
            console.print(reason.text, highlight=False)
        return
    colour = _COLOURS.get(verdict.kind.value, "bold")
    console.print(
        f"[{colour}]{verdict.kind.value}[/] (confidence {verdict.confidence:.2f})  "
        f"{sheet.title} [dim]\\[{sheet.sku}][/]",
        highlight=False,
    )
    for reason in decision.summary:
        console.print(f"  {reason.text}", highlight=False)
    for reason in verdict.reasons:
        console.print(f"  • {reason.text} [dim]({reason.code})[/]", highlight=False)


def print_unresolved(console: Console, decision: Decision) -> None:
    if decision.status is DecisionStatus.NOT_UNDERSTOOD:
        console.print(
            "[red]Could not find a product or category in the question.[/] "
            'Try e.g. "Is the Aurora NC700 worth buying?"'
        )
        return
    for resolution in decision.resolutions:
        if resolution.status.value == "resolved":
            continue
        label = "ambiguous" if resolution.status.value == "ambiguous" else "unknown product"
        console.print(f"[red]{label}:[/] {resolution.mention!r}", highlight=False)
        if resolution.candidates:
            console.print("  closest matches:")
            for c in resolution.candidates:
                console.print(
                    f"    {c.sku:>6}  {c.title}  [dim]({c.score:.0f})[/]", highlight=False
                )


def print_timings(console: Console, finished: Finished) -> None:
    parts = [f"{k} {v:.1f} ms" for k, v in finished.timings_ms.items()]
    console.print("[dim]timings: " + " · ".join(parts) + "[/]", highlight=False)
    sheet = finished.decision.sheet
    if sheet is not None:
        console.print(
            f"[dim]data age {format_age(sheet.data_age_ms)} · facts {sheet.version}[/]",
            highlight=False,
        )


def format_age(ms: int) -> str:
    if ms < 0:
        return "unknown"
    seconds = ms // 1000
    if seconds < 120:
        return f"{seconds}s"
    minutes = seconds // 60
    if minutes < 120:
        return f"{minutes}m"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours}h{minutes:02d}m"
    return f"{hours // 24}d{hours % 24:02d}h"


def facts_table(sheet: FactSheet) -> Table:
    table = Table(title=f"{sheet.title} [{sheet.sku}]", show_header=False, title_justify="left")
    table.add_column("fact", style="dim")
    table.add_column("value")

    def m(value: float | None) -> str:
        return "—" if value is None else money(value, sheet.currency, "en")

    rows: list[tuple[str, str]] = [
        ("brand / category", f"{sheet.brand} / {sheet.category}"),
        ("current price", f"{m(sheet.current_price)} at {sheet.current_price_at or '—'}"),
        ("seller's list price", f"{m(sheet.list_price)} (not trusted)"),
    ]
    for w in sheet.windows:
        rows.append(
            (
                f"{w.days}-day min / avg / median",
                f"{m(w.min)} / {m(w.avg)} / {m(w.median)}  ({w.observations} obs)",
            )
        )
    r = sheet.rating
    rows += [
        (
            "all-time low / high",
            f"{m(sheet.all_time_low)} ({sheet.all_time_low_at or '—'}) / {m(sheet.all_time_high)}",
        ),
        ("90-day percentile", _n(sheet.percentile_90d)),
        ("30-day trend", f"{_n(sheet.trend_30d_pct)}%"),
        ("90-day volatility", f"{_n(sheet.volatility_90d_pct)}%"),
        (
            "tracked",
            f"{sheet.days_tracked} days, {sheet.observations} observations, "
            f"since {sheet.first_seen or '—'}",
        ),
        (
            "rating (Bayesian)",
            f"{_n(r.bayesian)} from {r.count} reviews "
            f"(mean {_n(r.mean)}, category prior {r.prior_mean})",
        ),
        (
            "recent rating",
            f"{_n(r.recent_mean)} over 30 days ({r.recent_count} reviews), "
            f"earlier {_n(r.earlier_mean)}, trend {_n(r.trend)}",
        ),
        ("stock", f"{sheet.stock if sheet.stock is not None else '—'} at {sheet.stock_at or '—'}"),
        (
            "active promotions",
            "; ".join(f"{p.name} {m(p.price)} until {p.ends}" for p in sheet.active_promotions)
            or "none",
        ),
        (
            "upcoming promotions",
            "; ".join(f"{p.name} {m(p.price)} from {p.starts}" for p in sheet.upcoming_promotions)
            or "none",
        ),
        ("sales, last 3 days", str(sheet.sales_3d)),
        ("facts version", f"{sheet.version} (revision {sheet.revision})"),
        ("data age", format_age(sheet.data_age_ms)),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _n(value: float | None) -> str:
    return "—" if value is None else f"{value:g}"
