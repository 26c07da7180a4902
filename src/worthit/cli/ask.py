"""`worthit ask`: the verdict at once, the explanation streamed after it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from worthit.answer.answer_events import Finished, VerdictReady
from worthit.answer.payload import answer_payload
from worthit.cli.engine_host import run_with_engine
from worthit.cli.options import (
    AsOfOption,
    DbOption,
    JsonOption,
    LoraOption,
    StalePriceOption,
    as_of_ms,
    db_exists,
    market_db,
    model_files,
    refuse_unanswerable,
)
from worthit.cli.progress import stderr
from worthit.cli.render import print_timings, print_unresolved, print_verdict
from worthit.db.open import is_postgres
from worthit.decide.calibration import Calibration
from worthit.decide.decider import Decision, DecisionStatus
from worthit.engine.model_files import MODEL_ENV
from worthit.explain.explainer import DEFAULT_MAX_TOKENS, TextPiece
from worthit.explain.store import SqliteExplanationStore
from worthit.explain.store_key import model_identity
from worthit.facts.builder import DEFAULT_STALE_PRICE_DAYS
from worthit.market.store import MarketStore
from worthit.service.build import build_answerer
from worthit.text.time import fixed_clock, iso, now_ms

EXIT_UNKNOWN = 3
EXIT_AMBIGUOUS = 4
ASK_CONTEXT = 4096
"""KV cells for one question at a time: a ~600-token prompt and its answer fit many times."""


def ask_command(
    question: Annotated[str, typer.Argument(help="The shopper's question, English or Chinese.")],
    db: DbOption = None,
    model: Annotated[
        Path | None,
        typer.Option("--model", envvar=MODEL_ENV, help="A GGUF model (default: bundled SmolLM2)."),
    ] = None,
    sku: Annotated[
        str | None, typer.Option(help="Skip product resolution: ask about this SKU.")
    ] = None,
    max_tokens: Annotated[int, typer.Option(min=1, max=512)] = DEFAULT_MAX_TOKENS,
    deadline_ms: Annotated[
        int | None,
        typer.Option(
            min=50,
            help="Latency objective of the whole answer; past it the template is used. "
            "Default: none, the model finishes.",
        ),
    ] = None,
    lora: LoraOption = None,
    threads: Annotated[int, typer.Option(min=1, help="CPU threads for llama.cpp.")] = 2,
    as_of: AsOfOption = None,
    stale_price_days: StalePriceOption = DEFAULT_STALE_PRICE_DAYS,
    no_llm: Annotated[
        bool, typer.Option("--no-llm", help="Template explanation only; no model is loaded.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Is it worth buying? Prints the verdict, then streams the explanation."""
    if not question.strip():
        stderr.print("[red]error:[/] the question is empty")
        raise typer.Exit(2)
    moment = as_of_ms(as_of)
    engine = None
    model_id = None
    if not no_llm:  # llama.cpp and the engine are imported only for the model's answer
        from worthit.engine.config import EngineConfig
        from worthit.engine.engine import Engine
        from worthit.engine.runner import LlamaRunner

        config = EngineConfig(context_size=ASK_CONTEXT, n_threads=threads, max_sequences=2)
        model_path, lora_path = model_files(model, lora)
        engine = Engine(LlamaRunner(model_path, config, lora_path), config)
        model_id = model_identity(model_path, lora_path)
    try:
        store = _open_or_build(market_db(db), catch_up=moment is None)
        refuse_unanswerable(moment, store)
        if sku is not None and not store.has_sku(sku):
            stderr.print(f"[red]error:[/] unknown sku {sku!r}")
            raise typer.Exit(EXIT_UNKNOWN)
    except BaseException:
        if engine is not None:
            engine.close()
        raise
    # the server's calibration (Calibration.open); its feedback store is a SQLite file
    calibration = None if is_postgres(store.path) else Calibration.open(store.path)
    answerer = build_answerer(
        store,
        engine,
        clock=now_ms if moment is None else fixed_clock(moment),
        explanations=SqliteExplanationStore(store.path) if engine is not None else None,
        model=model_id,
        calibration=calibration,
        stale_price_days=stale_price_days,
    )
    out = Console(highlight=False, soft_wrap=True)
    # the model's first words can take a minute on a loaded machine: say it is writing
    waiting = stderr.status("[dim]the model is writing the explanation…[/]", spinner="dots")
    spin = engine is not None and not as_json and stderr.is_terminal

    async def answer() -> Finished:
        finished: Finished | None = None
        events = answerer.ask(
            question,
            sku=sku,
            deadline_s=None if deadline_ms is None else deadline_ms / 1000,
            max_tokens=max_tokens,
        )
        try:
            async for event in events:
                if isinstance(event, VerdictReady):
                    if not as_json:
                        _show_decision(out, event, moment)
                    if spin and event.decision.status is DecisionStatus.ANSWERED:
                        waiting.start()
                elif isinstance(event, TextPiece):
                    waiting.stop()  # before stdout writes under the spinner's line
                    if not as_json:
                        out.print(event.text, end="", markup=False)
                else:
                    finished = event
        finally:
            waiting.stop()
        assert finished is not None
        return finished

    try:
        finished = run_with_engine(engine, answer, calibrate=deadline_ms is not None)
    finally:
        if calibration is not None:
            calibration.close()
    if answerer.explanations is not None:
        answerer.explanations.close()  # writes the hits' last use, which LRU order reads
    if as_json:
        payload = answer_payload(finished)
        if moment is not None:
            payload["as_of"] = iso(moment)
        print(json.dumps(payload, ensure_ascii=False))
    else:
        _show_end(out, finished)
    status = finished.decision.status
    if status is DecisionStatus.UNKNOWN_PRODUCT or status is DecisionStatus.NOT_UNDERSTOOD:
        raise typer.Exit(EXIT_UNKNOWN)
    if status is DecisionStatus.AMBIGUOUS:
        raise typer.Exit(EXIT_AMBIGUOUS)


def _open_or_build(path: str | Path, *, catch_up: bool) -> MarketStore:
    """The market at `path`: the demo built when there is none, and a demo brought up to
    today when the answer is for now (an --as-of answer reads only what was stamped by
    then, and must not write)."""
    fresh = not db_exists(path)
    store = MarketStore(path)
    if fresh or store.count_products() == 0:
        from worthit.cli.market import build_demo  # the simulator, only to build

        stderr.print(f"no market at {path}: building the demo market first")
        build_demo(store)
    elif catch_up:
        from worthit.cli.market import catch_up_demo

        catch_up_demo(store)
    return store


def _show_decision(out: Console, event: VerdictReady, moment: int | None) -> None:
    decision = event.decision
    if moment is not None:
        out.print(f"[dim]as of {iso(moment)}: from data stamped up to then[/]")
    if decision.status is DecisionStatus.ANSWERED:
        print_verdict(out, decision)
        _show_calibrated(out, decision)
        out.print()
    else:
        print_unresolved(out, decision)


def _show_calibrated(out: Console, decision: Decision) -> None:
    """Where calibration stands, beside the rule's confidence (the API's
    `calibrated_confidence` and `calibration_evidence`): with no recorded outcome the
    calibrated figure is the rules' own, and saying "calibrated" then would be false."""
    calibrated = decision.calibrated
    if calibrated is None:
        return
    if calibrated.evidence == 0:
        line = "not calibrated yet: 0 outcomes; rules' own confidence (worthit calibration --save)"
    else:
        line = (
            f"calibrated confidence {calibrated.confidence:.2f} "
            f"(from {calibrated.evidence} outcomes)"
        )
    out.print(f"  [dim]{line}[/]", highlight=False)


def _show_end(out: Console, finished: Finished) -> None:
    explanation = finished.explanation
    if explanation is not None and explanation.fallback_reason == "summary":
        pass  # a ranking or a comparison: its sentences are already printed above
    elif explanation is not None:
        if explanation.source == "template":
            out.print(explanation.text, markup=False)
        else:
            out.print()
        stored = f" (stored, written {explanation.generated_at})" if explanation.cached else ""
        out.print(f"[dim]explanation: {explanation.source}{stored}[/]")
    print_timings(out, finished)
