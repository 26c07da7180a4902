"""`python -m train.adapter`: train the explanation LoRA and write it beside the package.

One command from the data to the file the engine loads: read the gold examples, format
them as the engine prompts (train/examples.py), fine-tune the bundled SmolLM2 GGUF with
LoRA on the CPU (train/lora.py), convert the adapter to GGUF with llama.cpp's converter
(train/export.py), and write a manifest beside it that says what it was made from (the
base model's and the data's sha256), so the adapter's identity can be checked and joined
to the model identity of stored explanations.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

import peft
import torch
import transformers

from worthit.engine.model_files import resolve_model_path

from .examples import PromptTokenizer, file_sha256, focused, load_examples
from .export import convert, converter_dir, llama_cpp_python_version, write_base_config
from .from_gguf import outtype_of, peft_from_gguf, same_adapter
from .lora import (
    TARGET_MODULES,
    TrainConfig,
    collate,
    completion_loss,
    load_base,
    train,
    with_lora,
)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRAIN = ROOT / "data" / "explanations" / "train.jsonl"
DEFAULT_HELDOUT = ROOT / "data" / "explanations" / "heldout.jsonl"
DEFAULT_OUT = ROOT / "src" / "worthit" / "explain" / "adapters" / "explain-lora.gguf"
DEFAULT_WORK = ROOT / "build" / "adapter"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(prog="python -m train.adapter", description=__doc__)
    parser.add_argument("--train", type=Path, default=DEFAULT_TRAIN, help="gold examples (jsonl)")
    parser.add_argument("--heldout", type=Path, default=DEFAULT_HELDOUT,
                        help="examples for the held-out loss in the manifest (skipped if absent)")
    parser.add_argument("--heldout-limit", type=int, default=120)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="the adapter GGUF to write")
    parser.add_argument("--model", type=Path, default=None,
                        help="base GGUF (default: the bundled SmolLM2, as the engine finds it)")
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK,
                        help="scratch: the PEFT adapter, the base config, the converter")
    parser.add_argument("--llama-cpp", type=Path, default=None,
                        help="a llama.cpp tree with convert_lora_to_gguf.py (default: taken "
                        "from the installed llama-cpp-python's sdist)")
    parser.add_argument("--resume", type=Path, default=None,
                        help="go on training an adapter: a saved PEFT directory (e.g. "
                        "build/adapter/peft) or a GGUF this command wrote (e.g. the shipped "
                        "src/worthit/explain/adapters/explain-lora.gguf); its rank and targets "
                        "are kept; pass another --seed for new batches")
    parser.add_argument("--focus", default=None, metavar="CODE[,CODE]",
                        help="train on the lines whose leading reasons include one of these "
                        "codes and as many other lines drawn at random (--seed): for a "
                        "resumed run after a reason code is added")
    parser.add_argument("--limit", type=int, default=None,
                        help="train on the first N examples only (speed checks)")
    parser.add_argument("--epochs", type=float, default=defaults.epochs)
    parser.add_argument("--max-steps", type=int, default=None)
    parser.add_argument("--max-minutes", type=float, default=None,
                        help="end training by then, the learning rate paced to it")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--rank", type=int, default=defaults.rank)
    parser.add_argument("--alpha", type=int, default=defaults.alpha)
    parser.add_argument("--dropout", type=float, default=defaults.dropout)
    parser.add_argument("--lr", type=float, default=defaults.learning_rate)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--threads", type=int, default=defaults.threads)
    parser.add_argument("--outtype", choices=("f32", "f16", "q8_0"), default="f16",
                        help="adapter tensor type in the GGUF")
    return parser.parse_args(argv)


def log(message: str) -> None:
    print(f"[{dt.datetime.now(dt.UTC):%H:%M:%S}] {message}", flush=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    model_path = resolve_model_path(args.model)
    config = TrainConfig(
        rank=args.rank, alpha=args.alpha, dropout=args.dropout, learning_rate=args.lr,
        batch_size=args.batch_size, epochs=args.epochs, max_steps=args.max_steps,
        max_minutes=args.max_minutes, seed=args.seed, threads=args.threads,
    )
    started = time.monotonic()
    tokenizer = PromptTokenizer(model_path)
    examples = load_examples(args.train, tokenizer)[: args.limit]
    if args.focus:
        examples = focused(examples, frozenset(args.focus.split(",")), args.seed)
    if not examples:
        log(f"no examples in {args.train}")
        return 1
    tokens = sum(e.length for e in examples)
    log(f"{len(examples)} examples from {args.train} ({tokens / len(examples):.0f} tokens each, "
        f"{sum(len(e.completion_ids) for e in examples) / len(examples):.0f} of them answer)")

    base = load_base(model_path)
    base_dir, peft_dir = args.work / "base", args.work / "peft"
    write_base_config(base.config, type(base).__name__, base_dir)
    resumed = None
    if args.resume:
        resume_dir = args.resume
        if args.resume.suffix == ".gguf":
            resumed = earlier_run(args.resume)
            resume_dir = peft_from_gguf(
                args.resume, args.work / "resumed", base.config.num_attention_heads,
                base.config.num_key_value_heads, args.dropout,
            )
            check = args.work / "resumed.gguf"
            convert(resume_dir, base_dir, check, converter_dir(args.work.parent, args.llama_cpp),
                    outtype_of(args.resume))
            if not same_adapter(args.resume, check):
                log(f"{args.resume} read back does not convert to the same file: not resumed")
                return 1
            log(f"resuming {args.resume} (read back into {resume_dir}, converts back the same)")
        model = peft.PeftModel.from_pretrained(base, str(resume_dir), is_trainable=True)
    else:
        model = with_lora(base, config)
    result = train(model, examples, config, tokenizer.eos_id, log)
    model.save_pretrained(peft_dir)
    log(f"trained: {result.steps} steps, {result.examples_seen} examples in "
        f"{result.seconds / 60:.1f} min, final loss {result.final_loss:.4f}")

    heldout_loss = None
    if args.heldout.is_file():
        heldout = load_examples(args.heldout, tokenizer)[: args.heldout_limit]
        heldout_loss = mean_loss(model, heldout, tokenizer.eos_id, config.batch_size)
        log(f"held-out loss {heldout_loss:.4f} on {len(heldout)} examples")

    llama_cpp_dir = converter_dir(args.work.parent, args.llama_cpp)
    convert(peft_dir, base_dir, args.out, llama_cpp_dir, args.outtype)
    manifest = build_manifest(args, config, model_path, examples, result, heldout_loss,
                              llama_cpp_dir, time.monotonic() - started, resumed)
    manifest_path = args.out.with_suffix(".json")
    manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    log(f"wrote {args.out} ({args.out.stat().st_size / 1e6:.1f} MB) and {manifest_path.name}")
    return 0


def earlier_run(gguf_file: Path) -> dict[str, Any]:
    """What the adapter being resumed is (its digest) and how it was trained (its
    manifest, read before this run writes over it), so the chain stays on record."""
    manifest = gguf_file.with_suffix(".json")
    earlier = json.loads(manifest.read_text()) if manifest.is_file() else {}
    return {
        "file": str(gguf_file),
        "sha256": file_sha256(gguf_file),
        "command": earlier.get("command"),
        "training": earlier.get("training"),
        "resumed_from": earlier.get("resumed_from"),
    }


@torch.no_grad()
def mean_loss(model: peft.PeftModel, examples: list[Any], pad_id: int, batch_size: int) -> float:
    """Completion-token loss over examples, weighted by each batch's answer tokens."""
    total, count = 0.0, 0
    ordered = sorted(examples, key=lambda e: (e.language, e.length))
    for i in range(0, len(ordered), batch_size):
        batch = collate(ordered[i : i + batch_size], pad_id)
        n = int((batch.labels[:, 1:] != -100).sum())
        total += float(completion_loss(model, batch)) * n
        count += n
    return total / max(1, count)


def build_manifest(
    args: argparse.Namespace, config: TrainConfig, model_path: Path, examples: list[Any],
    result: Any, heldout_loss: float | None, llama_cpp_dir: Path, seconds: float,
    resumed: dict[str, Any] | None = None,
) -> dict[str, Any]:
    languages: dict[str, int] = {}
    for example in examples:
        languages[example.language] = languages.get(example.language, 0) + 1
    return {
        "adapter": {
            "file": args.out.name,
            "sha256": file_sha256(args.out),
            "bytes": args.out.stat().st_size,
            "type": args.outtype,
        },
        "base_model": {"file": model_path.name, "sha256": file_sha256(model_path)},
        "data": {
            "train": str(args.train.relative_to(ROOT) if args.train.is_relative_to(ROOT)
                         else args.train),
            "sha256": file_sha256(args.train),
            "examples": len(examples),
            "languages": languages,
            "limit": args.limit,
            "focus": args.focus,
        },
        "resumed_from": resumed or (str(args.resume) if args.resume else None),
        "lora": {"rank": config.rank, "alpha": config.alpha, "dropout": config.dropout,
                 "target_modules": list(TARGET_MODULES)},
        "training": {
            "planned_steps": result.planned_steps,
            "steps": result.steps,
            "time_capped": result.time_capped,
            "batch_size": config.batch_size,
            "examples_seen": result.examples_seen,
            "epochs": round(result.examples_seen / len(examples), 3),
            "learning_rate": config.learning_rate,
            "seed": config.seed,
            "threads": config.threads,
            "first_loss": round(result.losses[0], 4),
            "final_loss": round(result.final_loss, 4),
            "heldout_loss": None if heldout_loss is None else round(heldout_loss, 4),
            "train_seconds": round(result.seconds, 1),
            "seconds_per_example": round(result.seconds / max(1, result.examples_seen), 3),
            "total_seconds": round(seconds, 1),
        },
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "peft": peft.__version__,
            "llama_cpp_python": llama_cpp_python_version(),
            "converter": str(llama_cpp_dir.name),
        },
        "created": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": "python -m train.adapter " + " ".join(sys.argv[1:]),
    }


if __name__ == "__main__":
    sys.exit(main())
