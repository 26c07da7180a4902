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

WARM_SEQUENCE_CELLS = 512
"""KV cells of each explanation's own stream (`EngineConfig.kv_streams`): the longest, a
Japanese prompt of about 380 tokens with 112 to write, fits. In one pool shared by the
batch, llama.cpp's flash attention visits every cell up to the highest in use for every
token of a step, so each explanation in flight made every other one's tokens dearer (40 %
of the engine's time at 8 in flight, py-spy on the Xeon); in streams a token visits its
own explanation's cells alone."""
WARM_CACHED_PREFIXES = 0
"""Finished prompts kept: none. Every product of a language shares the instructions, and
a running explanation in the same language holds them; in streams a kept prompt would
take a sequence id among the running ones, and llama.cpp batches sequences of streams
together only while their ids run on by one."""
WARM_PARALLEL = 8
"""Explanations in flight. In one pool 4 wrote the most (the pool's size priced every
token); in streams 6 to 16 write about the same (150-s runs on a 2-core EPYC: 1.60, 1.68,
1.66, 1.72 explanations a second at 6, 8, 12, 16), all ahead of the pool's 4 at 1.28-1.41
(docs/benchmarks.md)."""
WARM_STEP_S = 0.5
"""Longest engine step. `worthit serve` keeps background steps to 30 ms so that a live
request never waits long for the engine; alone on the machine there is none to wait, and
a 30-ms step holds about five tokens on a 2.1-GHz Xeon, too few to decode the batch
together: 48 explanations written 8 at once took 80 s in 30-ms steps and 48-64 s in
0.25-1 s steps (bench/guard.py)."""


def warm_engine_config(threads: int, parallel: int) -> EngineConfig:
    """The engine of a run that writes explanations alone on the machine (`explain --warm`
    and `bench/guard.py`): every thread on background work, in long steps, a KV stream for
    each of the `parallel` explanations in flight and none for finished prompts."""
    return EngineConfig(
        kv_streams=True,
        max_sequences=parallel,
        max_cached_prefixes=WARM_CACHED_PREFIXES,
        context_size=WARM_SEQUENCE_CELLS * (parallel + WARM_CACHED_PREFIXES),
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
