"""Training examples as the engine will see them: the same prompt tokens, then the answer.

The adapter only helps if it is trained on exactly the token sequence it will be asked to
continue at serve time. So the prompt is not rebuilt here: it is the project's own
`build_messages` and `answer_prefix` (worthit.explain.prompt), rendered with the chat
template stored in the GGUF through the engine's own `ChatTemplate`, and tokenized by
llama.cpp's tokenizer from the same GGUF with the engine's flags (special tokens parsed,
BOS only where the model asks for one). The completion (the gold text after the answer
prefix) is tokenized on its own and closed with the end-of-turn token, so the model learns
where to stop; the loss is taken on those tokens alone.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp

from worthit.decide.verdict import VerdictKind
from worthit.engine.chat import ChatTemplate
from worthit.explain.inputs import ExplanationInputs
from worthit.explain.prompt import answer_prefix, build_messages


@dataclass(frozen=True, slots=True)
class Example:
    id: str
    language: str
    inputs: ExplanationInputs
    completion: str
    """The gold text after the answer prefix (the part the model writes)."""
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    """The completion's tokens, ending with the end-of-turn token."""
    codes: tuple[str, ...] = ()

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)


class ExampleError(ValueError):
    """A line of the data that cannot become an example; the message names the line."""


def inputs_of(record: dict[str, Any]) -> ExplanationInputs:
    """The engine's inputs for one data line (title, verdict, reasons, language)."""
    return ExplanationInputs(
        title=str(record["title"]),
        verdict=VerdictKind(record["verdict"]),
        reasons=tuple(str(r) for r in record["reasons"]),
        language=str(record["language"]),
    )


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    records = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ExampleError(f"{path}:{number}: not JSON ({exc})") from exc
    return records


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class PromptTokenizer:
    """The engine's prompt, as token ids, from the GGUF's own template and vocabulary.

    Loads the vocabulary only (no weights, no context), so it is cheap to build here and
    in the quality check."""

    def __init__(self, model_path: Path) -> None:
        self._llama = llama_cpp.Llama(
            model_path=str(model_path), vocab_only=True, verbose=False
        )
        self.eos_id = int(self._llama.token_eos())
        self.template = ChatTemplate(
            self._llama.metadata.get("tokenizer.chat_template"),
            self._piece(int(self._llama.token_bos())),
            self._piece(self.eos_id),
        )

    def _piece(self, token: int) -> str:
        return self._llama.detokenize([token], special=True).decode("utf-8", "replace")

    def prompt_text(self, inputs: ExplanationInputs) -> str:
        """The text the engine tokenizes: rendered messages, then the answer prefix."""
        return self.template.render(build_messages(inputs)) + answer_prefix(inputs)

    def prompt_ids(self, inputs: ExplanationInputs) -> list[int]:
        # add_special=True, parse_special=True: LlamaRunner.tokenize's flags
        return self._llama.tokenize(self.prompt_text(inputs).encode(), add_bos=True, special=True)

    def completion_ids(self, completion: str) -> list[int]:
        # plain text: nothing in the gold text is read as chat markup
        ids = self._llama.tokenize(completion.encode(), add_bos=False, special=False)
        return [*ids, self.eos_id]

    def detokenize(self, ids: list[int]) -> str:
        return self._llama.detokenize(ids).decode("utf-8", "replace")


def example_of(record: dict[str, Any], tokenizer: PromptTokenizer) -> Example:
    inputs = inputs_of(record)
    prefix = answer_prefix(inputs)
    target = str(record["target"])
    if not target.startswith(prefix):
        raise ExampleError(
            f"example {record.get('id')}: target does not start with the answer prefix "
            f"{prefix!r}: {target[:60]!r}"
        )
    completion = target[len(prefix) :]
    return Example(
        id=str(record.get("id", "")),
        language=inputs.language,
        inputs=inputs,
        completion=completion,
        prompt_ids=tuple(tokenizer.prompt_ids(inputs)),
        completion_ids=tuple(tokenizer.completion_ids(completion)),
        codes=tuple(record.get("codes", ())),
    )


def load_examples(path: Path, tokenizer: PromptTokenizer) -> list[Example]:
    return [example_of(record, tokenizer) for record in read_jsonl(path)]


def focused(examples: list[Example], codes: frozenset[str], seed: int) -> list[Example]:
    """The lines whose leading reasons include one of `codes`, with as many other lines
    drawn at random: a resumed run teaches a new reason code within the minutes it has
    (a fraction of an epoch of the whole file would show it a few dozen times) and
    rehearses the rest, so what the adapter already writes well is not forgotten."""
    chosen = [e for e in examples if codes & set(e.codes)]
    others = [e for e in examples if not codes & set(e.codes)]
    rehearsed = random.Random(seed).sample(others, min(len(others), len(chosen)))
    return chosen + rehearsed
