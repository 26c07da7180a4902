"""Explanation quality as the strict checker reads it: faithful, specific, fluent, all three.

Scores every explanation with `worthit.explain.checker` against the inputs it was written
from, prints the shares per language, and writes each (inputs, text, verdicts) to a jsonl
for people to read beside the figures. Three sources of explanations:

    # the model writes them for held-out gold inputs (the bare bundled model by default;
    # --lora for a task adapter): the "bare model" baseline and the adapter's figure
    .venv/bin/python bench/explanation_quality.py --gold data/explanations/heldout.jsonl \
        --per-language 60 --out var/quality-bare.jsonl

    # the model writes them for products of a market (decided as of its last price)
    .venv/bin/python bench/explanation_quality.py --db var/demo.db --per-language 60

    # explanations already written, one record a line: the gold fields (language, title,
    # verdict, codes, polarities?, reasons) and "text" (or "target")
    .venv/bin/python bench/explanation_quality.py --pairs served.jsonl

The model runs through llama-cpp-python with the service's own prompt: the messages of
`worthit.explain.prompt.build_messages`, rendered with the GGUF's chat template
(`worthit.engine.chat.ChatTemplate`), then the answer prefix (`answer_prefix`), greedy,
at most 64 tokens: the service's first try. Its text is shaped as the service shapes it
before any check (one paragraph; only whole sentences, so a run cut by max_tokens keeps
the sentences it finished), but not filtered: the figure is what the model writes, not
what survives the guard.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import re
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import VerdictKind
from worthit.engine.chat import ChatTemplate
from worthit.engine.model_files import resolve_model_path
from worthit.explain.checker import CheckInputs, CheckResult, check_explanation
from worthit.explain.explainer import DEFAULT_MAX_TOKENS, token_budget
from worthit.explain.inputs import ExplanationInputs
from worthit.explain.prompt import answer_prefix, build_messages
from worthit.facts.builder import FactsBuilder
from worthit.market.store import MarketStore
from worthit.text.sentences import last_sentence_end

MAX_TOKENS = DEFAULT_MAX_TOKENS
LANGUAGES = ("en", "zh")
_LETTER = re.compile(r"[^\W\d_]")


@dataclass
class Scored:
    record: dict[str, Any]
    """The inputs as a gold record (language, title, verdict, codes, polarities, reasons)."""
    text: str
    result: CheckResult
    seconds: float = 0.0


# --- the model ---------------------------------------------------------------------------------


class Writer:
    """The bundled model (or `--model`), optionally with a LoRA adapter, writing one
    explanation for one set of inputs the way the service's first try does."""

    def __init__(self, model: str | None, lora: str | None, threads: int) -> None:
        from llama_cpp import Llama  # the bench's only model dependency, loaded on use

        path = resolve_model_path(model)
        self.llm = Llama(
            model_path=str(path),
            n_ctx=2048,
            n_threads=threads,
            n_threads_batch=threads,
            lora_path=lora,
            seed=0,
            verbose=False,
        )
        meta = self.llm.metadata
        bos = self.llm.detokenize([self.llm.token_bos()]).decode("utf-8", "replace")
        eos = self.llm.detokenize([self.llm.token_eos()]).decode("utf-8", "replace")
        self.template = ChatTemplate(meta.get("tokenizer.chat_template"), bos, eos)
        self.identity = f"{path.name}" + (f" + {Path(lora).name}" if lora else "")

    def write(self, inputs: ExplanationInputs) -> str:
        prefix = answer_prefix(inputs)
        prompt = self.template.render(build_messages(inputs)) + prefix
        tokens = self.llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        out: Any = self.llm.create_completion(
            tokens,
            max_tokens=token_budget(inputs.language),
            temperature=0.0,
            top_k=1,
            seed=0,
        )
        return shaped(prefix, str(out["choices"][0]["text"]))


def shaped(prefix: str, continuation: str) -> str:
    """The answer as the service would show it before checking: the prefix and the
    model's first paragraph (a new line before any word is a space), white space
    collapsed, cut after its last whole sentence when one ended after the prefix."""
    kept: list[str] = []
    for i, part in enumerate(continuation.split("\n")):
        if i and _LETTER.search("".join(kept)):
            break
        kept.append((" " if i else "") + part)
    text = " ".join((prefix + "".join(kept)).split())
    end = last_sentence_end(text)
    return text[:end] if end > len(prefix) else text


# --- sources -------------------------------------------------------------------------------


def _gold_inputs(record: Mapping[str, Any]) -> ExplanationInputs:
    return ExplanationInputs(
        title=str(record["title"]),
        verdict=VerdictKind(str(record["verdict"])),
        reasons=tuple(str(r) for r in record["reasons"]),
        language=str(record["language"]),
    )


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _per_language(records: list[dict[str, Any]], n: int | None, seed: int) -> list[dict[str, Any]]:
    """`n` records per language, drawn with a fixed seed (all of them when n is None)."""
    if n is None:
        return records
    out = []
    for language in LANGUAGES:
        mine = [r for r in records if r.get("language") == language]
        random.Random(f"{seed}:{language}").shuffle(mine)
        out += mine[:n]
    return out


def from_market(db: str, n: int, seed: int) -> Iterator[dict[str, Any]]:
    """Products of the market, judged in each language as of its last recorded price."""
    store = MarketStore(db)
    span = store.price_span()
    if span is None:
        raise SystemExit(f"no prices in {db}")
    builder = FactsBuilder(store)
    skus = sorted(hit.sku for hit in store.all_names())
    random.Random(seed).shuffle(skus)
    for language in LANGUAGES:
        taken = 0
        for sku in skus:
            if taken >= n:
                break
            sheet = builder.build(sku, span[1])
            if sheet is None:
                continue
            verdict = decide_verdict(sheet, language)
            checked = CheckInputs.of(sheet.title, verdict, sheet.currency)
            if not checked.reasons:
                continue
            taken += 1
            yield {
                "id": f"{sku}-{language}",
                "language": language,
                "title": checked.title,
                "verdict": verdict.kind.value,
                "codes": [r.code for r in checked.reasons],
                "polarities": [r.polarity.value for r in checked.reasons],
                "reasons": [r.text for r in checked.reasons],
                "currency": sheet.currency,
            }


# --- scoring and report --------------------------------------------------------------------


def score(record: dict[str, Any], text: str, seconds: float = 0.0) -> Scored:
    return Scored(record, text, check_explanation(text, CheckInputs.from_record(record)), seconds)


def shares(scored: list[Scored]) -> dict[str, float]:
    n = max(1, len(scored))
    return {
        "n": len(scored),
        "faithful": 100 * sum(s.result.faithful for s in scored) / n,
        "specific": 100 * sum(s.result.specific for s in scored) / n,
        "fluent": 100 * sum(s.result.fluent for s in scored) / n,
        "all": 100 * sum(s.result.ok for s in scored) / n,
    }


def report(scored: list[Scored], title: str) -> dict[str, dict[str, float]]:
    print(title)
    print(f"  {'':8s} {'n':>5s} {'faithful':>9s} {'specific':>9s} {'fluent':>9s} {'all 3':>9s}")
    figures = {}
    for language in (*LANGUAGES, "all"):
        mine = [s for s in scored if language == "all" or s.record.get("language") == language]
        if not mine:
            continue
        f = figures[language] = shares(mine)
        print(
            f"  {language:8s} {f['n']:5.0f} {f['faithful']:8.1f}% {f['specific']:8.1f}% "
            f"{f['fluent']:8.1f}% {f['all']:8.1f}%"
        )
    reasons = collections.Counter(code for s in scored for code, _ in s.result.failures)
    if reasons:
        counted = ", ".join(f"{code} {count}" for code, count in reasons.most_common())
        print(f"  why refused (every failed check counted): {counted}")
    return figures


def _row(s: Scored) -> dict[str, Any]:
    """A scored pair for reading: the inputs, the text and what the checker found."""
    row = dict(s.record)
    row.pop("target", None)
    row.update(
        text=s.text,
        faithful=s.result.faithful,
        specific=s.result.specific,
        fluent=s.result.fluent,
        failures=[f"{code}: {detail}" for code, detail in s.result.failures],
    )
    if s.seconds:
        row["seconds"] = round(s.seconds, 3)
    return row


def write_out(scored: list[Scored], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for s in scored:
            f.write(json.dumps(_row(s), ensure_ascii=False) + "\n")


def generate_all(
    writer: Writer, records: list[dict[str, Any]], progress: Path | None = None
) -> list[Scored]:
    """Each record's explanation, scored; with `progress`, each scored pair is also
    appended there as it is done, so a long run on a busy host can be read before it ends."""
    scored = []
    if progress is not None:
        progress.parent.mkdir(parents=True, exist_ok=True)
        progress.write_text("")
    for i, record in enumerate(records, 1):
        started = time.perf_counter()
        text = writer.write(_gold_inputs(record))
        scored.append(score(record, text, time.perf_counter() - started))
        if progress is not None:
            with progress.open("a", encoding="utf-8") as f:
                f.write(json.dumps(_row(scored[-1]), ensure_ascii=False) + "\n")
        mark = "ok" if scored[-1].result.ok else scored[-1].result.code
        print(f"{i:4d}/{len(records)} {record['language']} {mark}", file=sys.stderr)
    return scored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--gold", type=Path, help="a gold jsonl: the model writes for its inputs")
    source.add_argument("--db", help="a market database: the model writes for its products")
    source.add_argument("--pairs", type=Path, help="a jsonl of inputs with their text")
    parser.add_argument("--per-language", type=int, default=None, help="records per language")
    parser.add_argument("--seed", type=int, default=25)
    parser.add_argument("--model", default=None, help="a GGUF (default: the bundled model)")
    parser.add_argument("--lora", default=None, help="a LoRA adapter in GGUF")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="llama.cpp threads (1: on a busy shared host two spin-waiting threads ran "
        "about 20 times slower than one)",
    )
    parser.add_argument("--out", type=Path, default=None, help="write each scored pair here")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()

    if args.pairs:
        records = _per_language(_read(args.pairs), args.per_language, args.seed)
        scored = [score(r, str(r.get("text", r.get("target", "")))) for r in records]
        figures = report(scored, f"{args.pairs}: {len(scored)} explanations")
    else:
        if args.gold:
            records = _per_language(_read(args.gold), args.per_language, args.seed)
        else:
            records = list(from_market(args.db, args.per_language or 60, args.seed))
        writer = Writer(args.model, args.lora, args.threads)
        started = time.perf_counter()
        progress = None if args.out is None else args.out.with_suffix(".partial.jsonl")
        scored = generate_all(writer, records, progress)
        elapsed = time.perf_counter() - started
        where = args.gold or args.db
        title = (
            f"{writer.identity} on {where}: {len(scored)} explanations, greedy, "
            f"{MAX_TOKENS} tokens at most, 1.75x in Chinese ({elapsed:.0f} s)"
        )
        figures = report(scored, title)
        if args.gold:
            started = time.perf_counter()
            gold = [score(r, str(r["target"])) for r in records]
            per_check_ms = (time.perf_counter() - started) * 1000 / max(1, len(gold))
            report(gold, f"the gold targets of the same inputs ({per_check_ms:.2f} ms a check)")
    if args.out:
        write_out(scored, args.out)
        args.out.with_suffix(".partial.jsonl").unlink(missing_ok=True)
        print(f"pairs written to {args.out}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
