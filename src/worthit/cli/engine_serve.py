"""`worthit engine serve`: the engine alone behind the OpenAI-compatible API.

What `worthit serve --engine URL` routes to (one process per replica), and what the
engine benchmark compares with llama-server and llama_cpp.server on the same GGUF.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from worthit.cli.errors import user_errors
from worthit.cli.options import LoraOption, Weights, WeightsOption, model_files
from worthit.engine.config import EngineConfig
from worthit.engine.model_files import MODEL_ENV

engine_app = typer.Typer(
    help="The LLM engine on its own, over the OpenAI-compatible wire.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def engine_serve_command(
    host: Annotated[str, typer.Option(help="Address to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535)] = 8000,
    model: Annotated[
        Path | None,
        typer.Option("--model", envvar=MODEL_ENV, help="A GGUF model (default: bundled SmolLM2)."),
    ] = None,
    lora: LoraOption = None,
    weights: WeightsOption = Weights.UPCAST,
    threads: Annotated[int, typer.Option(min=1, help="CPU threads for llama.cpp.")] = 2,
    context: Annotated[int, typer.Option(min=256, help="KV cells shared by all requests.")] = 4096,
    host_cache_mb: Annotated[
        int,
        typer.Option(min=0, help="Host RAM (MiB) for evicted prefixes' KV (0: off)."),
    ] = EngineConfig.host_cache_bytes >> 20,
    max_sequences: Annotated[int, typer.Option(min=1, max=64)] = 16,
    cached_prefixes: Annotated[int, typer.Option(min=0, help="Prefixes the KV cache keeps.")] = 48,
    block_size: Annotated[
        int, typer.Option(min=1, help="Tokens per KV block (prefix sharing unit).")
    ] = EngineConfig.block_size,
    tpot_target_ms: Annotated[
        float, typer.Option(min=1, help="Time per output token the batch is held to.")
    ] = 40.0,
    default_deadline_ms: Annotated[
        float | None,
        typer.Option(
            min=1,
            help="Latency objective for requests without deadline_ms (drives admission).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve the engine alone (no market) until interrupted."""
    from worthit.engine.engine import Engine
    from worthit.engine.runner import LlamaRunner
    from worthit.http.app import create_app
    from worthit.service import runtime
    from worthit.service.settings import ServiceSettings

    config = EngineConfig(
        context_size=context,
        host_cache_bytes=host_cache_mb << 20,
        n_threads=threads,
        max_sequences=max_sequences,
        max_cached_prefixes=cached_prefixes,
        block_size=block_size,
        tpot_target_s=tpot_target_ms / 1000,
        default_deadline_s=None if default_deadline_ms is None else default_deadline_ms / 1000,
    )
    model_path, lora_path = model_files(model, lora, weights)
    engine = Engine(LlamaRunner(model_path, config, lora_path), config)
    engine.claim_current_thread()
    app = create_app(ServiceSettings(db_path=None, auth=False), engine=engine)
    runtime.run(app, engine, host, port)


engine_app.command("serve")(user_errors(engine_serve_command))
