"""Japanese questions are understood and answered in Japanese: intent, reasons, labels,
the template and the prompt."""

from __future__ import annotations

import string

import pytest

from worthit.decide import phrasing
from worthit.decide.intent import IntentKind, parse_intent
from worthit.decide.verdict import Polarity, Reason, Verdict, VerdictKind
from worthit.explain.inputs import ExplanationInputs
from worthit.explain.prompt import answer_prefix, build_messages
from worthit.explain.templates import language_of


@pytest.mark.parametrize(
    ("question", "kind", "mentions"),
    [
        ("Aurora NC700は買い時ですか？", IntentKind.WAIT_OR_BUY, ("Aurora NC700",)),
        ("Aurora NC700は買うべきですか", IntentKind.WORTH_BUYING, ("Aurora NC700",)),
        ("Kestrel Q5は待つべきですか", IntentKind.WAIT_OR_BUY, ("Kestrel Q5",)),
        ("Kestrel Q5って安い？", IntentKind.WORTH_BUYING, ("Kestrel Q5",)),
        ("Kestrel Q5って買い？", IntentKind.WORTH_BUYING, ("Kestrel Q5",)),
        ("Lumina 55U8はセールまで待つべき？", IntentKind.WAIT_OR_BUY, ("Lumina 55U8",)),
        ("Aurora NC700を買うべきか教えてください", IntentKind.WORTH_BUYING, ("Aurora NC700",)),
        (
            "Anker Prime Wall Charger は買い時ですか？",
            IntentKind.WAIT_OR_BUY,
            ("Anker Prime Wall Charger",),
        ),
        (
            "Aurora NC700とKestrel Q5どっちがいい？",
            IntentKind.COMPARE,
            ("Aurora NC700", "Kestrel Q5"),
        ),
        (
            "CIO SMARTCOBY SLIMとCIO SMARTCOBY Pro SLIMの違いは？",
            IntentKind.COMPARE,
            ("CIO SMARTCOBY SLIM", "CIO SMARTCOBY Pro SLIM"),
        ),
    ],
)
def test_japanese_questions_about_products(
    question: str, kind: IntentKind, mentions: tuple[str, ...]
) -> None:
    intent = parse_intent(question)
    assert (intent.kind, intent.mentions, intent.language) == (kind, mentions, "ja")


def test_a_japanese_top_n_with_window_and_metric() -> None:
    intent = parse_intent("最近3日間の売れ筋ヘッドホントップ3")
    assert intent.kind is IntentKind.TOP_N
    assert (intent.category, intent.n, intent.window_days, intent.metric) == (
        "headphones",
        3,
        3,
        "sales",
    )


def test_a_japanese_budget() -> None:
    intent = parse_intent("3万円以下のヘッドホンでおすすめは？")
    assert (intent.budget, intent.category, intent.language) == (30000.0, "headphones", "ja")


def test_kanji_alone_is_still_chinese() -> None:
    assert parse_intent("极光NC700值不值得买").language == "zh"


def test_every_reason_has_a_japanese_sentence_with_the_same_numbers() -> None:
    def fields(text: str) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name}

    for code in phrasing.codes():
        assert fields(phrasing.template(code, "ja")) == fields(phrasing.template(code, "en"))


def test_the_verdict_template_and_prompt_are_japanese() -> None:
    reason = Reason("out_of_stock", Polarity.WAIT, {}, phrasing.sentence("out_of_stock", "ja", {}))
    verdict = Verdict(VerdictKind.WAIT, 0.7, (reason,), "S1", "ja", "v1")
    assert VerdictKind.WAIT.label("ja") == "待った方がよい"
    assert language_of(verdict) == "ja"
    inputs = ExplanationInputs.of("Aurora NC700 Wireless Headphones", verdict)
    system, user = build_messages(inputs)
    assert "買い物アシスタント" in system["content"] and "判定：待った方がよい" in user["content"]
    assert answer_prefix(inputs) == "待った方がよい、なぜなら"
