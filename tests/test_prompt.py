"""The explanation prompt depends on the explanation's inputs and on nothing else."""

from __future__ import annotations

import dataclasses

from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import VerdictKind
from worthit.explain.inputs import ExplanationInputs
from worthit.explain.prompt import INSTRUCTIONS, answer_prefix, build_messages

from factories import make_reason, make_sheet, make_verdict


def prompt_of(sheet=None, verdict=None) -> tuple[list[dict[str, str]], str]:  # type: ignore[no-untyped-def]
    sheet = sheet or make_sheet()
    inputs = ExplanationInputs.of(sheet.title, verdict or decide_verdict(sheet, "en"))
    return build_messages(inputs), answer_prefix(inputs)


def test_the_prompt_is_the_title_the_verdict_and_its_leading_reasons() -> None:
    verdict = make_verdict(
        reasons=(
            make_reason(text="A sale starts in 5 days at $259.00, 13.4% below today."),
            make_reason(text="It is 3.3% above its 90-day average of $309.25."),
            make_reason(code="x", text="Third, not shown."),
        )
    )
    messages, prefix = prompt_of(verdict=verdict)
    assert messages[0] == {"role": "system", "content": INSTRUCTIONS["en"]}
    assert messages[1]["content"] == (
        "Product: Aurora NC700 Wireless Noise-Cancelling Headphones\n"
        "Verdict: Better to wait\n"
        "Reasons:\n"
        "- A sale starts in 5 days at $259.00, 13.4% below today.\n"
        "- It is 3.3% above its 90-day average of $309.25."
    )
    assert prefix == "Better to wait because"


def test_the_same_inputs_give_byte_identical_prompts_whatever_else_changed() -> None:
    """Not the question (it is no input), the facts version, the time, nor a fact that
    changes no reason (stock 950 → 949)."""
    sheet = make_sheet(stock=950)
    later = dataclasses.replace(
        sheet,
        stock=949,
        version="v8-0000",
        as_of="2026-03-14T09:31:07Z",
        data_age_ms=99_000,
    )
    assert decide_verdict(later, "en").reasons == decide_verdict(sheet, "en").reasons
    assert prompt_of(later) == prompt_of(sheet)


def test_an_input_that_changes_changes_the_prompt() -> None:
    base = prompt_of()
    assert prompt_of(make_sheet(title="Aurora NC800")) != base
    cheaper = make_sheet(current_price=251.0)
    assert decide_verdict(cheaper, "en").reasons != decide_verdict(make_sheet(), "en").reasons
    assert prompt_of(cheaper) != base
    assert prompt_of(verdict=make_verdict(kind=VerdictKind.BUY)) != prompt_of(
        verdict=make_verdict()
    )


def test_chinese_inputs_get_a_chinese_prompt_and_answer_start() -> None:
    verdict = make_verdict(
        kind=VerdictKind.BUY, language="zh", reasons=(make_reason(text="便宜。"),)
    )
    messages, prefix = prompt_of(verdict=verdict)
    assert messages[0]["content"] == INSTRUCTIONS["zh"]
    assert messages[1]["content"].startswith("商品：Aurora NC700")
    assert "结论：值得现在买" in messages[1]["content"]
    assert prefix == "值得现在买，因为"
