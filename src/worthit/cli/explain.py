"""`worthit explain --warm`: fill the explanation store offline, in order of demand."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer

from worthit.answer.background import ExplanationGenerator, GeneratorStats
from worthit.answer.generation import DEFAULT_TRIES
from worthit.cli.engine_host import run_with_engine
from worthit.cli.options import (
    DbOption,
    JsonOption,
    LoraOption,
    db_exists,
    market_db,
    model_files,
)
from worthit.cli.progress import bar, stderr
from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.model_files import MODEL_ENV
from worthit.engine.runner import LlamaRunner
from worthit.explain.store import DEFAULT_CAPACITY, SqliteExplanationStore
from worthit.explain.store_key import model_identity
from worthit.market.store import MarketStore
from worthit.service.build import build_answerer

WARM_CELLS_PER_EXPLANATION = 256
"""KV cells per explanation in flight. The engine's KV is one pool (`kv_unified`), and
llama.cpp's flash attention visits every cell up to the highest one in use for every
query token and head, reading the mask of the cells it cannot see too; a pool the size of
`serve`'s (8,192 cells) fills with cached prefixes, and every token of the batch then scans
all of them. Cached prefixes are worth
nothing here (each product is written once per language), so the pool holds the batch: an
English explanation needs about 200 cells (135 prompt tokens and 64 to write), a Chinese
one about 330, which then waits for cells rather than make every token scan more. 8 in
flight in 2,048 cells wrote 1.70-1.81 explanations a second where 8,192 cells wrote 1.44-1.47
(docs/benchmarks.md)."""
WARM_PARALLEL = 4
"""Explanations in flight. Every token of the batch, prompt or answer, has flash attention
visit the pool up to its highest cell in use, so the pool's size (256 cells an explanation
in flight) prices every token: 8 in flight spent 40 % of the engine's time in attention
(py-spy, 2026-12-03). Side by side on this 2-core Xeon (`explain --warm --budget-s 240`,
fresh copies of the demo market, one after the other), 4 at once wrote 1.32 explanations a
second, 5 1.26, 6 1.27 and 8 1.23; in 90- and 150-s runs 4 led 8 each time by 7-20 %. 2 or
3 in flight batch too little (1.43-1.44 where 4 wrote 1.51-1.65 in 90 s)."""
WARM_MIN_CONTEXT = 1024
"""Room for the longest explanation alone: a Japanese prompt runs to 380 tokens, with 112
to write."""
WARM_STEP_S = 0.5
"""Longest engine step. `worthit serve` keeps background steps to 30 ms so that a live
request never waits long for the engine; alone on the machine there is none to wait, and
a 30-ms step holds about five tokens on a 2.1-GHz Xeon, too few to decode the batch
together: 48 explanations written 8 at once took 80 s in 30-ms steps and 48-64 s in
0.25-1 s steps (bench/guard.py)."""


def warm_engine_config(threads: int, parallel: int) -> EngineConfig:
    """The engine of a run that writes explanations alone on the machine (`explain --warm`
    and `bench/guard.py`): every thread on background work, in long steps, KV for the
    `parallel` explanations in flight and no more."""
    return EngineConfig(
        context_size=max(WARM_MIN_CONTEXT, WARM_CELLS_PER_EXPLANATION * parallel),
        n_threads=threads,
        background_threads=threads,
        max_background_step_s=WARM_STEP_S,
    )


def explain_command(
    db: DbOption = None,
    warm: Annotated[
        bool, typer.Option("--warm", help="Write the missing explanations (else: only count).")
    ] = False,
    budget_s: Annotated[
        float | None, typer.Option("--budget-s", min=1, help="Stop after this many seconds.")
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option("--model", envvar=MODEL_ENV, help="A GGUF model (default: bundled SmolLM2)."),
    ] = None,
    lora: LoraOption = None,
    threads: Annotated[int, typer.Option(min=1, help="CPU threads for llama.cpp.")] = 2,
    parallel: Annotated[
        int, typer.Option(min=1, max=32, help="Explanations written at once (one batch).")
    ] = WARM_PARALLEL,
    tries: Annotated[
        int, typer.Option(min=1, max=8, help="Tries per explanation (best-of-k).")
    ] = DEFAULT_TRIES,
    capacity: Annotated[
        int, typer.Option("--explanations", min=1, help="Explanations the store keeps.")
    ] = DEFAULT_CAPACITY,
    as_json: JsonOption = False,
) -> None:
    """How much of the market's expected demand the explanation store covers; with
    --warm, have the model write what is missing, most-asked-for first."""
    path = market_db(db, create=False)
    if not db_exists(path):
        stderr.print(f"[red]error:[/] no database at {path} (run `worthit simulate` first)")
        raise typer.Exit(2)
    store = MarketStore(path)
    model_path, lora_path = model_files(model, lora)
    engine = None
    if warm:
        config = warm_engine_config(threads, parallel)
        engine = Engine(LlamaRunner(model_path, config, lora_path), config)
    explanations = SqliteExplanationStore(path, capacity)
    answerer = build_answerer(
        store, engine, explanations=explanations, model=model_identity(model_path, lora_path)
    )
    generator = ExplanationGenerator(answerer, parallel=parallel, tries=tries, method="warm")
    started = time.monotonic()

    async def fill() -> GeneratorStats:
        if not warm:
            return await generator.run(write=False)
        with bar("explanations (‰ of demand covered)", 1000) as update:
            return await generator.run(
                budget_s=budget_s,
                until_covered=True,
                progress=lambda stats: update(round(stats.coverage * 1000)),
            )

    stats = run_with_engine(engine, fill)
    explanations.close()
    summary = {
        "explanations": len(explanations),
        "pairs": stats.pairs,
        "covered_pairs": stats.covered_pairs,
        "demand_covered": round(stats.coverage, 4),
        "written": stats.kept,
        "failed": stats.failed,
        "tries": dict(sorted(stats.tries.items())),
        "seconds": round(time.monotonic() - started, 1),
        "per_second": round(stats.per_second, 3),
        "completion_tokens": stats.completion_tokens,
    }
    if as_json:
        print(json.dumps(summary))
        return
    print(
        f"{summary['covered_pairs']} of {summary['pairs']} (product, language) pairs explained, "
        f"covering {100 * stats.coverage:.1f}% of last week's demand; "
        f"{len(explanations)} explanations stored"
    )
    if warm:
        tried = ", ".join(
            f"{k} tr{'y' if k == 1 else 'ies'}: {n}" for k, n in sorted(stats.tries.items())
        )
        print(
            f"this run: {stats.kept} written, {stats.failed} failed every try, "
            f"{summary['per_second']}/s over {summary['seconds']} s ({tried or 'none written'})"
        )
