"""The bundled model as shipped (Q4_1) against the weights the engine loads (its Q8_0
upcast, `worthit.engine.weights`): llama.cpp's prefill and batched decode on the runner,
with the shipped adapter applied at run time, side by side in one run; and with the
adapter folded into the upcast (`engine.lora_merge`), the file the engine loads with it.

Each round runs every variant once, in turn, so a busy neighbour slows all alike; the
figures are medians over rounds; the ratios are upcast over shipped and folded over
upcast (both with the adapter).

    .venv/bin/python bench/weights.py --rounds 3 --threads 1,2 --batch 1,8
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

from worthit.engine.config import EngineConfig
from worthit.engine.model_files import resolve_model_path
from worthit.engine.runner import LlamaRunner
from worthit.engine.sequence import SamplingParams
from worthit.engine.weights import compute_weights, weights_for
from worthit.explain.adapter import bundled_adapter_path

PROMPT_TOKENS = 100
DECODE_STEPS = 40
TEXT = "Worth buying now because it is 12.5% under its 90-day average of $412.20. " * 12


def measure(model: Path, lora: Path | None, threads: int, batch: int) -> tuple[float, float]:
    """(prefill ms a token, decode tokens a second) for `batch` sequences of a
    PROMPT_TOKENS prompt, prefilled one by one, then decoded together."""
    config = EngineConfig(n_threads=threads, background_threads=threads, context_size=4096)
    runner = LlamaRunner(model, config, lora)
    try:
        tokens = runner.tokenize(TEXT)[:PROMPT_TOKENS]
        samplers = {s: runner.new_sampler(SamplingParams(temperature=0.0), 1) for s in range(batch)}

        def chunk(seq: int, start: int, toks: list[int]) -> SimpleNamespace:
            return SimpleNamespace(seq=None, seq_id=seq, start=start, tokens=toks, sample=True)

        started = time.perf_counter()
        last = {s: runner.step([chunk(s, 0, tokens)], samplers)[s] for s in range(batch)}
        prefilled = time.perf_counter()
        for step in range(DECODE_STEPS):
            last = runner.step(
                [chunk(s, PROMPT_TOKENS + step, [last[s]]) for s in range(batch)], samplers
            )
        decoded = time.perf_counter()
        for sampler in samplers.values():
            runner.free_sampler(sampler)
    finally:
        runner.close()
    prefill_ms = 1000 * (prefilled - started) / (batch * PROMPT_TOKENS)
    return prefill_ms, batch * DECODE_STEPS / (decoded - prefilled)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a Q4_1 GGUF (default: the bundled one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--batch", default="1,8")
    parser.add_argument("--no-lora", action="store_true", help="the bare model")
    args = parser.parse_args()
    shipped = resolve_model_path(args.model)
    lora = None if args.no_lora else bundled_adapter_path()
    with tempfile.TemporaryDirectory() as cache:
        upcast = compute_weights(shipped, Path(cache))
        if upcast == shipped:
            raise SystemExit(f"{shipped.name} is not of a type the engine upcasts")
        variants: dict[str, tuple[Path, Path | None]] = {
            "shipped": (shipped, lora),
            "upcast": (upcast, lora),
        }
        if lora is not None:
            folded, left = weights_for(shipped, lora, Path(cache))
            if left is not None:
                raise SystemExit(f"{lora.name} could not be folded into {shipped.name}")
            variants["folded"] = (folded, None)
        cases = [(int(t), int(b)) for t in args.threads.split(",") for b in args.batch.split(",")]
        results: dict[tuple[str, int, int], list[tuple[float, float]]] = {}
        for _ in range(args.rounds):
            for threads, batch in cases:
                for name, (path, adapter) in variants.items():
                    results.setdefault((name, threads, batch), []).append(
                        measure(path, adapter, threads, batch)
                    )
    print(f"{shipped.name} ({'bare' if lora is None else 'with ' + lora.name}), "
          f"{args.rounds} rounds, medians")  # fmt: skip
    names = list(variants)
    ratios = [("upcast", "shipped")] + ([("folded", "upcast")] if "folded" in variants else [])
    header = " ".join(names) + " " + " ".join(f"{a}/{b}" for a, b in ratios)
    print(f"threads batch | prefill ms/token {header} | decode tokens/s {header}")
    for threads, batch in cases:
        row = {}
        for name in names:
            runs = results[(name, threads, batch)]
            row[name] = (
                statistics.median(r[0] for r in runs),
                statistics.median(r[1] for r in runs),
            )
        prefill = (
            " ".join(f"{row[n][0]:6.2f}" for n in names)
            + " "
            + " ".join(f"{row[b][0] / row[a][0]:5.2f}x" for a, b in ratios)
        )
        decode = (
            " ".join(f"{row[n][1]:6.1f}" for n in names)
            + " "
            + " ".join(f"{row[a][1] / row[b][1]:5.2f}x" for a, b in ratios)
        )
        print(f"{threads:7} {batch:5} | {prefill} | {decode}")


if __name__ == "__main__":
    main()
