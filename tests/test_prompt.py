"""The explanation prompt depends on the explanation's inputs and on nothing else."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import VerdictKind
from worthit.explain.explainer import ExplanationRun
from worthit.explain.guard import allowed_numbers, check_grounding
from worthit.explain.inputs import ExplanationInputs
from worthit.explain.prompt import INSTRUCTIONS, answer_prefix, build_messages
from worthit.explain.templates import template_explanation
from worthit.facts.sheet import CategoryOccurrence, FactSheet

from factories import make_event, make_plain_sheet, make_reason, make_sheet, make_verdict


def prompt_of(sheet=None, verdict=None) -> tuple[list[dict[str, str]], str]:  # type: ignore[no-untyped-def]
    sheet = sheet or make_sheet()
    verdict = verdict or decide_verdict(sheet, "en")
    inputs = ExplanationInputs.of(sheet.title, verdict, sheet.currency)
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


# --- a calendar sale reaches the model as a short line of its prices -------------------

SAME = (
    CategoryOccurrence("double12", "Double 12", "双12", 2025, 12.0, 40),
    CategoryOccurrence("double12", "Double 12", "双12", 2024, 18.0, 38),
)
OTHER = (
    CategoryOccurrence("double11", "Double 11", "双11", 2026, 12.0, 40),
    CategoryOccurrence("618", "618", "618", 2026, 18.0, 38),
)
SALE_EVENTS = [  # this product's past discounts, else its category's; the prices the model reads
    ((21.0, 18.0), (), "$237.00 to $246.00"),
    ((12.0,), (), "$264.00"),
    ((), SAME, "$246.00 to $264.00"),
    ((), SAME[:1], "$264.00"),
    ((), OTHER, "$246.00 to $264.00"),
    ((), OTHER[1:], "$246.00"),
]


def sale_event_sheet(
    past: tuple[float, ...], category_past: tuple[CategoryOccurrence, ...] = (), **fields: Any
) -> FactSheet:
    event = make_event(
        past_discounts_pct=past, past_years=(2025, 2024)[: len(past)], category_past=category_past
    )
    return make_plain_sheet(coming_events=(event,), **fields)


@pytest.mark.parametrize(("past", "category_past", "prices"), SALE_EVENTS)
def test_a_sale_event_reason_reaches_the_model_as_its_prices_only(
    past: tuple[float, ...], category_past: tuple[CategoryOccurrence, ...], prices: str
) -> None:
    """The shopper reads the whole sentence (the evidence, the discounts, the 30 days);
    the model reads the event, its days, the prices it would bring and today's, each a
    number the guard allows."""
    sheet = sale_event_sheet(past, category_past)
    verdict = decide_verdict(sheet, "en")
    line = f"Double 12 is in 11 days: expected price {prices} (today $300.00)."
    reason = verdict.reasons[0]
    assert reason.code == "sale_event" and len(reason.text) > 2 * len(line)
    messages, _ = prompt_of(sheet, verdict)
    assert messages[1]["content"].split("\n")[3] == f"- {line}"
    assert reason.text in template_explanation(verdict, sheet)
    assert check_grounding(line, allowed_numbers(sheet, verdict)).ok


def test_a_chinese_sale_event_line_in_the_sheets_currency() -> None:
    sheet = sale_event_sheet((21.0, 18.0), currency="CNY")
    messages = ExplanationRun(sheet, decide_verdict(sheet, "zh")).messages
    assert "- 11天后是双12：预计价格¥237.00至¥246.00（现价¥300.00）。" in messages[1]["content"]
    once = sale_event_sheet((), SAME[:1])
    messages, _ = prompt_of(once, decide_verdict(once, "zh"))
    assert "- 11天后是双12：预计价格US$264.00（现价US$300.00）。" in messages[1]["content"]
