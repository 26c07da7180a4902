"""`worthit calibration`: how often the rules' confidence came true, from the backtest and
from shoppers' feedback, as a reliability table and the posteriors answers use."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from worthit.cli.backtest import EveryOption, HorizonOption, SkusOption
from worthit.cli.options import DbOption, JsonOption, db_exists, market_db
from worthit.cli.progress import bar, stderr
from worthit.decide.backtest import DEFAULT_EVERY, DEFAULT_HORIZON, plan_replay
from worthit.decide.calibration import (
    CREDIBLE,
    DEFAULT_BINS,
    Calibration,
    Evidence,
    backtest_evidence,
    calibration_error,
    feedback_evidence,
    reliability,
    tallies,
)
from worthit.decide.feedback import FeedbackStore
from worthit.facts.builder import FactsBuilder
from worthit.market.store import MarketStore


def calibration_command(
    db: DbOption = None,
    every: EveryOption = DEFAULT_EVERY,
    horizon: HorizonOption = DEFAULT_HORIZON,
    skus: SkusOption = None,
    bins: Annotated[
        int, typer.Option(min=1, max=100, help="Confidence bins of the table.")
    ] = DEFAULT_BINS,
    stored: Annotated[
        bool,
        typer.Option("--stored", help="Use the backtest evidence saved last, do not replay."),
    ] = False,
    save: Annotated[
        bool,
        typer.Option("--save", help="Save the replayed evidence: the server calibrates on it."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Replay the backtest and read the feedback; print the rules' confidence against how
    often the advice was right (a reliability table), and the calibrated confidence per
    verdict and category."""
    path = market_db(db, create=False)
    if not db_exists(path):
        stderr.print(f"[red]error:[/] no database at {path} (run `worthit simulate` first)")
        raise typer.Exit(2)
    store = MarketStore(path)
    feedback = FeedbackStore(path)
    try:
        if stored:
            replayed: list[Evidence] = []
            saved = [
                Evidence(t.verdict, t.category, t.confidence, t.success, "backtest", t.n)
                for t in feedback.backtest()
            ]
        else:
            try:
                plan = plan_replay(store, None, None, every, horizon)
            except ValueError as exc:
                stderr.print(f"[red]error:[/] {exc}")
                raise typer.Exit(2) from None
            names = [hit.sku for hit in store.all_names()]
            chosen = names[:skus] if skus is not None else names
            with bar("replaying", len(chosen)) as update:
                replayed = list(backtest_evidence(FactsBuilder(store), plan, chosen, update))
            saved = replayed
            if save:
                feedback.replace_backtest(tallies(replayed))
        shoppers = [e for f in feedback.all() if (e := feedback_evidence(f)) is not None]
    finally:
        feedback.close()
        store.close()
    report = _report([*saved, *shoppers], bins)
    report["saved"] = save and not stored
    if as_json:
        print(json.dumps(report))
        return
    console = Console(highlight=False, soft_wrap=True)
    console.print(
        f"{report['evidence']['backtest']} backtest outcomes, "
        f"{report['evidence']['feedback']} feedback outcomes"
    )
    console.print(_reliability_table(report["reliability"]))
    ece = report["calibration_error"]
    console.print(f"expected calibration error: {'—' if ece is None else f'{100 * ece:.1f} pts'}")
    console.print(_posterior_table(report["posteriors"]))
    console.print(LEGEND, highlight=False)
    if report["saved"]:
        console.print(
            f"saved: the server calibrates on these outcomes from its next start ({path})"
        )
    elif not stored:
        console.print(
            "not saved: answers calibrate only on outcomes saved with --save and on "
            "shoppers' feedback"
        )


LEGEND = "\n".join((
    "[dim]advice is right: a BUY unless a price at least 5% lower came within the horizon; "
    "a WAIT when following it paid less than buying at once; from feedback, what the "
    "shopper did (docs/verdict.md)",
    "first table, per bin of the rules' confidence: n outcomes; predicted, their mean "
    "confidence; observed, the share right, with its Clopper–Pearson 95% interval; "
    "sources, where the outcomes came from",
    "expected calibration error: the outcome-weighted mean of |observed − predicted|",
    "second table, per verdict and category: rule, the mean confidence; observed, the share "
    "right; calibrated, what answers show (the rule's confidence as a prior, moved toward "
    "observed as outcomes add up), with its credible interval[/]",
))  # fmt: skip
"""What the columns mean, printed under the tables."""


def _report(evidence: list[Evidence], bins: int) -> dict[str, Any]:
    table = reliability(evidence, bins)
    ece = calibration_error(table)
    counts = {"backtest": 0, "feedback": 0}
    for item in evidence:
        counts[item.source] += item.n
    return {
        "evidence": counts,
        "reliability": [b.to_dict() for b in table],
        "calibration_error": None if ece is None else round(ece, 4),
        "posteriors": _posteriors(evidence),
    }


def _posteriors(evidence: list[Evidence]) -> list[dict[str, Any]]:
    """Per (verdict, category): the mean rule confidence, and the posterior an answer with
    that confidence gets, with its credible interval."""
    calibration = Calibration(evidence)
    rules: dict[tuple[str, str], list[float]] = {}
    for item in evidence:
        if item.confidence is not None:
            rules.setdefault((item.verdict, item.category), []).extend([item.confidence] * item.n)
    rows = []
    for (verdict, category), confidences in sorted(rules.items()):
        mean_rule = sum(confidences) / len(confidences)
        tally = calibration.tally(verdict, category)
        posterior = calibration.posterior(verdict, category, mean_rule)
        low, high = posterior.interval(CREDIBLE)
        rows.append(
            {
                "verdict": verdict,
                "category": category,
                "n": tally.n,
                "successes": tally.successes,
                "rule_confidence": round(mean_rule, 4),
                "observed": round(tally.successes / tally.n, 4) if tally.n else None,
                "calibrated": round(float(posterior.mean()), 4),
                "credible": [round(float(low), 4), round(float(high), 4)],
            }
        )
    return rows


def _reliability_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("confidence", "n", "predicted", "observed", "95% interval", "sources",
                  box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)  # fmt: skip
    for row in rows:
        low, high = row["observed_95"]
        sources = ", ".join(f"{k} {v}" for k, v in row["sources"].items())
        table.add_row(
            f"{row['low']:.1f}–{row['high']:.1f}",
            str(row["n"]),
            _pct(row["predicted"]),
            _pct(row["observed"]),
            f"{_pct(low)}–{_pct(high)}",
            sources,
        )
    return table


def _posterior_table(rows: list[dict[str, Any]]) -> Table:
    table = Table("verdict", "category", "n", "rule", "observed", "calibrated",
                  f"{CREDIBLE:.0%} credible", box=box.SIMPLE_HEAD, pad_edge=False,
                  collapse_padding=True)  # fmt: skip
    for row in rows:
        low, high = row["credible"]
        table.add_row(
            row["verdict"],
            row["category"],
            str(row["n"]),
            _pct(row["rule_confidence"]),
            _pct(row["observed"]),
            _pct(row["calibrated"]),
            f"{_pct(low)}–{_pct(high)}",
        )
    return table


def _pct(share: float | None) -> str:
    return "—" if share is None else f"{100 * share:.1f}%"
