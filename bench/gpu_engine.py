"""worthit routing to an engine on a GPU: start an OpenAI-compatible server there (vLLM by
default), put `worthit serve --engine URL` in front of it, and run shoppers against
worthit, as `bench/service.py` does on the CPU.

For the lent GPU machine (the device tool's H200): nothing there can be downloaded, so
the model must be one it has or one carried to it (a Hugging Face folder; vLLM also reads
a GGUF such as the bundled SmolLM2's with `--tokenizer HuggingFaceTB/SmolLM2-135M-Instruct`
when that tokenizer is there), and vLLM itself must be installed there or carried as
wheels. Without vLLM the script says so and exits 2; `--server llama_cpp` runs the same
measurement against `python -m llama_cpp.server` on the CPU, which is how the script
itself is checked here. Nothing in CI runs it.

    python3 bench/gpu_engine.py --model /models/SmolLM2-135M-Instruct --db /tmp/gpu.db
    .venv/bin/python bench/gpu_engine.py --server llama_cpp --db /tmp/cpu.db --seconds 20

It prints one JSON line per level (bench/service.py's summary: where explanations came
from, `verdict`, first text and `done` percentiles), and the engine's own model id.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from service import by_popularity, free_port, level, wait_ready

READY_S = 900.0
"""vLLM compiles and captures CUDA graphs before it answers: minutes, not seconds."""


def engine_command(args: argparse.Namespace, port: int) -> list[str]:
    if args.server == "vllm":
        command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server",
                   "--model", args.model, "--port", str(port), "--host", "127.0.0.1",
                   "--max-model-len", str(args.context),
                   "--gpu-memory-utilization", str(args.gpu_memory)]  # fmt: skip
        if args.tokenizer:
            command += ["--tokenizer", args.tokenizer]
        return command
    from worthit.engine.model_files import resolve_model_path

    model = str(resolve_model_path(args.model))
    return [sys.executable, "-m", "llama_cpp.server", "--model", model, "--port", str(port),
            "--host", "127.0.0.1", "--n_ctx", str(args.context)]  # fmt: skip


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=("vllm", "llama_cpp"), default="vllm")
    parser.add_argument(
        "--model", default=None, help="model folder or GGUF (llama_cpp: default bundled)"
    )
    parser.add_argument("--tokenizer", default=None, help="vLLM with a GGUF: its tokenizer")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--gpu-memory", type=float, default=0.5)
    parser.add_argument("--db", required=True, help="a market (built here if missing)")
    parser.add_argument("--levels", default="1,10,50")
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--think-ms", type=float, default=1000.0)
    parser.add_argument("--workers", type=int, default=1, help="worthit API processes")
    args = parser.parse_args()
    if args.server == "vllm" and importlib.util.find_spec("vllm") is None:
        print("vLLM is not installed here: install it (or carry its wheels) and give --model "
              "a model this machine has; --server llama_cpp measures the same on the CPU",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    if args.server == "vllm" and args.model is None:
        sys.exit("--model: vLLM needs a model folder or GGUF on this machine")
    db = Path(args.db)
    if not db.exists():
        subprocess.run([sys.executable, "-m", "worthit", "simulate", "--db", str(db)], check=True)
    scratch = Path(tempfile.mkdtemp(prefix="worthit-gpu-"))
    engine_port, port = free_port(), free_port()
    engine_url = f"http://127.0.0.1:{engine_port}/v1"
    engine = subprocess.Popen(engine_command(args, engine_port), stdout=subprocess.DEVNULL,
                              stderr=(scratch / "engine.log").open("wb"))  # fmt: skip
    server: subprocess.Popen[bytes] | None = None
    try:
        wait_ready(engine_url + "/models", engine, READY_S)
        model_id = httpx.get(engine_url + "/models", timeout=5).json()["data"][0]["id"]
        server = subprocess.Popen(
            [sys.executable, "-m", "worthit", "serve", "--demo", "--db", str(db), "--port",
             str(port), "--engine", engine_url, "--workers", str(args.workers),
             "--live-rate", "0", "--audit-db", str(scratch / "audit.db")],
            stderr=(scratch / "serve.log").open("wb"), env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        wait_ready(base + "/readyz", server, 120)
        print(json.dumps({"server": args.server, "model": model_id, "workers": args.workers}))
        products = by_popularity(db)
        for i, clients in enumerate(int(x) for x in args.levels.split(",")):
            result = asyncio.run(
                level(base, products, clients, args.seconds, i + 1, args.think_ms / 1000, 0.25)
            )
            print(json.dumps(result, ensure_ascii=False), flush=True)
    finally:
        if server is not None:
            stop(server)
        stop(engine)
        print(f"logs in {scratch}", file=sys.stderr)


if __name__ == "__main__":
    main()
