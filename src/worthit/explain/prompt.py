"""The explanation prompt: built from the explanation's inputs alone, kept short.

Every token of it is prefilled on a cold request, and a 135M-parameter model follows a
short prompt better than a long one. The instructions come first and are the same for
every product in a language, so the engine's prefix cache holds them once; what differs
per product (title, verdict, two reason sentences; a calendar sale's as a short line of its
prices, `inputs.model_text`) is about 60 tokens. The answer is started for the model with
the verdict's label ("Better to wait because"), which keeps a small model on topic far
better than instructions do. The old prompt (~560 tokens: the whole fact sheet, two quoted
reviews and the question) could not be prefilled inside an 800 ms answer on two cores
(docs/benchmarks.md).
"""

from __future__ import annotations

from worthit.explain.inputs import ExplanationInputs

INSTRUCTIONS = {
    "en": (
        "You are a shopping assistant. In one or two short sentences, tell the shopper "
        "why the verdict below is right. Use only the numbers in the reasons. Never "
        "change the verdict."
    ),
    "zh": "你是购物助手。用一到两句简短的话告诉购物者为什么下面的结论是对的。"
    "只使用理由中的数字，不要改变结论。",
    "ja": "あなたは買い物アシスタントです。下の判定が正しい理由を、短い一、二文で買い物客に"
    "伝えてください。理由にある数字だけを使い、判定は変えないでください。",
}
_FIELDS = {
    "en": ("Product", "Verdict", "Reasons"),
    "zh": ("商品", "结论", "理由"),
    "ja": ("商品", "判定", "理由"),
}
_ANSWER_PREFIX = {"en": "{label} because", "zh": "{label}，因为", "ja": "{label}、なぜなら"}


def build_messages(inputs: ExplanationInputs) -> list[dict[str, str]]:
    """The instructions (shared by every product in the language), then the product's part."""
    product, verdict, reasons = _FIELDS[inputs.language]
    colon = "：" if inputs.language in ("zh", "ja") else ": "
    lines = [f"{product}{colon}{inputs.title}", f"{verdict}{colon}{inputs.label}"]
    lines.append(reasons + colon.rstrip())
    lines += [f"- {reason}" for reason in inputs.reasons]
    return [
        {"role": "system", "content": INSTRUCTIONS[inputs.language]},
        {"role": "user", "content": "\n".join(lines)},
    ]


def answer_prefix(inputs: ExplanationInputs) -> str:
    """How the model's answer starts: the verdict's label, then "because"."""
    return _ANSWER_PREFIX[inputs.language].format(label=inputs.label)
