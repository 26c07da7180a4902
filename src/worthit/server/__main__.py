"""``python -m worthit.server``: the engine alone behind the OpenAI-compatible API, for
benchmarks against llama-server and llama_cpp.server on the same GGUF."""

from __future__ import annotations

import argparse

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.engine.model_files import resolve_model_path
from worthit.engine.runner import LlamaRunner
from worthit.server import runtime
from worthit.server.app import create_app
from worthit.server.settings import ServiceSettings


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m worthit.server")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--model", default=None, help="GGUF path (default: bundled SmolLM2)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--max-sequences", type=int, default=16)
    parser.add_argument("--cached-prefixes", type=int, default=48)
    parser.add_argument("--block-size", type=int, default=EngineConfig.block_size)
    parser.add_argument("--tpot-target-ms", type=float, default=40.0)
    parser.add_argument(
        "--default-deadline-ms",
        type=float,
        default=None,
        help="latency objective for requests without deadline_ms (drives admission)",
    )
    args = parser.parse_args()
    config = EngineConfig(
        context_size=args.context,
        n_threads=args.threads,
        max_sequences=args.max_sequences,
        max_cached_prefixes=args.cached_prefixes,
        block_size=args.block_size,
        tpot_target_s=args.tpot_target_ms / 1000,
        default_deadline_s=(
            None if args.default_deadline_ms is None else args.default_deadline_ms / 1000
        ),
    )
    engine = Engine(LlamaRunner(resolve_model_path(args.model), config), config)
    engine.claim_current_thread()
    app = create_app(ServiceSettings(db_path=None, auth=False), engine=engine)
    runtime.run(app, engine, args.host, args.port)


if __name__ == "__main__":
    main()
