"""`python -m train.evaluate`: the adapter against the bare model on held-out inputs.

Both run as the engine runs them: llama.cpp on the bundled Q4_1 GGUF (the adapter applied
at run time through llama-cpp-python's `lora_path`), the engine's prompt tokens
(train/examples.py), greedy decoding to the end-of-turn token. Each text is the answer
prefix plus what the model wrote, scored by the project's strict checker
(worthit.explain.checker: faithful, specific, fluent) and by a plain number check (every
number written is one of the inputs', and at least one is written), so the figures mean
what the served explanations' figures mean.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import llama_cpp

from worthit.engine.model_files import resolve_model_path
from worthit.explain.checker import CheckInputs, check_explanation
from worthit.explain.prompt import answer_prefix

from .examples import PromptTokenizer, example_of, read_jsonl

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_HELDOUT = ROOT / "data" / "explanations" / "heldout.jsonl"
DEFAULT_ADAPTER = ROOT / "src" / "worthit" / "explain" / "adapters" / "explain-lora.gguf"
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")


@dataclass(frozen=True, slots=True)
class Scored:
    id: str
    language: str
    text: str
    ok: bool
    faithful: bool
    specific: bool
    fluent: bool
    failure: str | None
    numbers_ok: bool
    stopped: bool
    """Ended at the end-of-turn token (not cut at max_tokens)."""
    seconds: float


def numbers(text: str) -> set[str]:
    return {m.group().replace(",", "") for m in _NUMBER.finditer(text)}


def numbers_copied(text: str, record: dict[str, Any], prefix: str) -> bool:
    """Every number written is in the title or the reasons, and one at least is written
    where the reasons have any (a crude, checker-independent view of number copying)."""
    given = numbers(record["title"] + " " + " ".join(record["reasons"]))
    written = numbers(text[len(prefix) :])
    return written <= given and (bool(written) or not given)


def load_llama(model_path: Path, adapter: Path | None, threads: int) -> llama_cpp.Llama:
    return llama_cpp.Llama(
        model_path=str(model_path),
        lora_path=str(adapter) if adapter else None,
        n_ctx=1024,
        n_batch=512,
        n_threads=threads,
        n_threads_batch=threads,
        seed=0,
        verbose=False,
    )


def generate(llm: llama_cpp.Llama, prompt_ids: Sequence[int], max_tokens: int) -> tuple[str, bool]:
    """Greedy continuation of the prompt tokens; whether it ended at end of turn."""
    llm.reset()
    out: list[int] = []
    stopped = False
    for token in llm.generate(list(prompt_ids), top_k=1, top_p=1.0, temp=0.0,
                              repeat_penalty=1.0, reset=True):
        if llama_cpp.llama_vocab_is_eog(llm._model.vocab, token):
            stopped = True
            break
        out.append(token)
        if len(out) >= max_tokens:
            break
    return llm.detokenize(out).decode("utf-8", "replace"), stopped


def score(
    llm: llama_cpp.Llama, tokenizer: PromptTokenizer, records: Sequence[dict[str, Any]],
    max_tokens: int,
) -> list[Scored]:
    results = []
    for record in records:
        example = example_of(record, tokenizer)
        prefix = answer_prefix(example.inputs)
        started = time.monotonic()
        written, stopped = generate(llm, example.prompt_ids, max_tokens)
        seconds = time.monotonic() - started
        text = prefix + written
        check = check_explanation(text.strip(), CheckInputs.from_record(record))
        results.append(Scored(
            id=example.id, language=example.language, text=text, ok=check.ok,
            faithful=check.faithful, specific=check.specific, fluent=check.fluent,
            failure=check.code, numbers_ok=numbers_copied(text, record, prefix),
            stopped=stopped, seconds=seconds,
        ))
    return results


def summary(results: Sequence[Scored]) -> dict[str, float]:
    n = max(1, len(results))
    return {
        "n": len(results),
        "ok": round(sum(r.ok for r in results) / n, 3),
        "faithful": round(sum(r.faithful for r in results) / n, 3),
        "specific": round(sum(r.specific for r in results) / n, 3),
        "fluent": round(sum(r.fluent for r in results) / n, 3),
        "numbers_ok": round(sum(r.numbers_ok for r in results) / n, 3),
        "stopped": round(sum(r.stopped for r in results) / n, 3),
        "seconds_each": round(sum(r.seconds for r in results) / n, 3),
    }


def pick(records: Sequence[dict[str, Any]], per_language: int) -> list[dict[str, Any]]:
    """`per_language` records of each language at an even stride through the file: the
    held-out file is grouped by verdict, so its first lines would all be one verdict."""
    chosen: list[dict[str, Any]] = []
    for language in ("en", "zh"):
        mine = [r for r in records if r["language"] == language]
        n = min(per_language, len(mine))
        chosen += [mine[i * len(mine) // n] for i in range(n)]
    return chosen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m train.evaluate", description=__doc__)
    parser.add_argument("--heldout", type=Path, default=DEFAULT_HELDOUT)
    parser.add_argument("--adapter", type=Path, default=DEFAULT_ADAPTER)
    parser.add_argument("--model", type=Path, default=None)
    parser.add_argument("--per-language", type=int, default=40)
    parser.add_argument("--max-tokens", type=int, default=96)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--show", type=int, default=10, help="sample texts printed per language")
    parser.add_argument("--only", choices=("adapter", "bare"), default=None,
                        help="score one system (default: both)")
    parser.add_argument("--json", type=Path, default=None, help="write every text and score")
    args = parser.parse_args(argv)

    model_path = resolve_model_path(args.model)
    tokenizer = PromptTokenizer(model_path)
    records = pick(read_jsonl(args.heldout), args.per_language)
    systems = {"adapter": args.adapter, "bare": None}
    if args.only:
        systems = {args.only: systems[args.only]}
    scored: dict[str, list[Scored]] = {}
    for name, adapter in systems.items():
        llm = load_llama(model_path, adapter, args.threads)
        scored[name] = score(llm, tokenizer, records, args.max_tokens)
        llm.close()

    report: dict[str, Any] = {"heldout": str(args.heldout), "adapter": str(args.adapter)}
    for name, results in scored.items():
        for language in ("en", "zh"):
            mine = [r for r in results if r.language == language]
            report[f"{name}/{language}"] = summary(mine)
            fails: dict[str, int] = {}
            for r in mine:
                if r.failure:
                    fails[r.failure] = fails.get(r.failure, 0) + 1
            report[f"{name}/{language}"]["failures"] = dict(
                sorted(fails.items(), key=lambda kv: -kv[1])
            )
    for language in ("en", "zh"):
        print(f"\n== {language}: samples (adapter, then bare) ==")
        rows = [i for i, r in enumerate(records) if r["language"] == language][: args.show]
        for i in rows:
            print(f"- {records[i]['id']} {records[i]['verdict']} {records[i]['codes']}")
            print(f"  reasons: {' | '.join(records[i]['reasons'])}")
            for name, results in scored.items():
                mark = "ok" if results[i].ok else f"x {results[i].failure}"
                print(f"  {name:7} [{mark}] {results[i].text!r}")
    print("\n== scores ==")
    for key, value in report.items():
        if isinstance(value, dict):
            print(f"{key:12} {json.dumps(value, ensure_ascii=False)}")
    if args.json:
        report["texts"] = {name: [asdict(r) for r in res] for name, res in scored.items()}
        args.json.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
