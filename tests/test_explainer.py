"""The explanation flow around the model: guard while streaming, template on any failure.

The engine here is a scripted fake (this is a unit test of the flow); the real bundled
model runs in tests/test_ask_e2e.py.
"""

from __future__ import annotations

import asyncio
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scripted_engine import ScriptedEngine
from worthit.answer.on_demand import explain_on_demand
from worthit.decide.decider import Decision, DecisionStatus
from worthit.decide.intent import parse_intent
from worthit.decide.verdict import Polarity, Verdict, VerdictKind
from worthit.engine.sequence import FinishReason
from worthit.explain.explainer import Explanation, TextPiece
from worthit.explain.guard import allowed_numbers
from worthit.explain.guarded_stream import GuardedStream, UngroundedError
from worthit.explain.sanity import problem, repetitive
from worthit.explain.templates import template_explanation

from factories import make_reason, make_sheet, make_verdict


def Scripted(*pieces: str) -> ScriptedEngine:  # noqa: N802 - reads as the fake it makes
    """An engine whose one request streams these pieces, then stops."""
    return ScriptedEngine(pieces)


BUY = make_verdict(
    kind=VerdictKind.BUY,
    reasons=(
        make_reason(
            code="near_all_time_low",
            polarity=Polarity.BUY,
            numbers={"current": 299.0, "low": 249.0, "gap_pct": 2.4},
            text="At $299.00 it is within 2.4% of its all-time low of $249.00.",
        ),
        make_reason(
            code="well_rated",
            polarity=Polarity.BUY,
            numbers={"mean": 4.4, "count": 128},
            text="Well rated: 4.4/5 from 128 reviews.",
        ),
    ),
)
"""Every kept text below is faithful to these reasons and names the strongest one's number:
the strict checker (tests/test_checker.py) runs on every sentence, as in production."""


def run(engine: ScriptedEngine | None, verdict: Verdict = BUY) -> tuple[str, Explanation]:
    decision = Decision(
        question="Worth it?",
        intent=parse_intent("Is the Aurora NC700 worth it?"),
        status=DecisionStatus.ANSWERED,
        verdict=verdict,
        sheet=make_sheet(),
    )

    async def collect() -> list[TextPiece | Explanation]:
        return [item async for item in explain_on_demand(decision, engine)]  # type: ignore[arg-type]

    items = asyncio.run(collect())
    final = items[-1]
    assert isinstance(final, Explanation)
    return "".join(i.text for i in items[:-1] if isinstance(i, TextPiece)), final


def test_grounded_text_streams_and_is_kept() -> None:
    model = Scripted(
        " it is only 2.4", "% above its all-time low of $249", ".00. It is", " well rated."
    )
    shown, final = run(model)
    assert final.source == "llm"
    assert final.text == (
        "Worth buying now because it is only 2.4% above its all-time low of $249.00. "
        "It is well rated."
    )
    assert shown.startswith("Worth buying now because it is only")
    assert model.calls[0]["answer_prefix"] == "Worth buying now because"
    assert model.calls[0]["params"].stop == ()


@pytest.mark.parametrize(
    ("pieces", "kept"),
    [
        ((":", " ", "1. It is only 2.4", "% above it."), "because: It is only 2.4% above it."),
        ((":\n", "1) it is only 2.4% above its low."), "because: it is only 2.4% above its low."),
        ((":\n- it is", " within 2.4% of its low."), "because: it is within 2.4% of its low."),
        (
            (" it is within 2.4% of its low.\n", "Verdict: buy."),
            "because it is within 2.4% of its low.",
        ),
        ((" it is within 2.4% of its\nlow and well rated.",), None),  # cut mid-sentence
        (
            (" of: 1. It is within 2.4% of its low", ", 2", ". It is well rated."),
            "because of: It is within 2.4% of its low.",
        ),
        (
            (" of: 1. It is within 2.4% of its low; 2. It is well rated.",),
            "because of: It is within 2.4% of its low.",
        ),
        (
            (": it is rated 4", ".4", "/5 and within 2.4% of its low."),
            "because: it is rated 4.4/5 and within 2.4% of its low.",
        ),
        (
            (": it is within 2.4% of its low, rated 4.4/5.", " 2. No."),
            "because: it is within 2.4% of its low, rated 4.4/5.",
        ),
    ],
)
def test_one_paragraph_without_a_list_marker(pieces: tuple[str, ...], kept: str | None) -> None:
    """'because: 1. The price…' read to the guard as the number 1 and to the sentence counter
    as a full stop; a new line before any word is layout, after words the end."""
    model = Scripted(*pieces)
    _, final = run(model)
    if kept is None:
        assert final.source == "template"
    else:
        assert (final.source, final.text) == ("llm", f"Worth buying now {kept}")


def test_a_false_comparison_falls_back_naming_the_claim() -> None:
    """Both numbers are facts (the price 299, the all-time low 249); the claim is not."""
    model = Scripted(" at $299, which is lower than the all-time low of $249. ")
    _, final = run(model)
    assert final.source == "template"
    assert final.fallback_reason == "false_comparison"
    assert final.ungrounded == ("$299, which is lower than the all-time low of $249",)


def test_stops_reading_the_model_after_the_sentences_served_in_english() -> None:
    """English answers read the model's first two sentences (explainer.MODEL_SENTENCES):
    why, then what to do; the engine is not read further."""
    model = Scripted(
        " it is within 2.4% of its low. ", "Go ahead and buy it if you need it. ", "Third one. ",
        "Four.",
    )  # fmt: skip
    _, final = run(model)
    assert final.source == "llm"
    assert final.text == (
        "Worth buying now because it is within 2.4% of its low. Go ahead and buy it if you need it."
    )
    assert model.streams[0].consumed == 2
    assert final.tokens == {"completion": 2}  # what it was sent, the engine not yet done


def test_chinese_answers_read_the_models_first_sentence_only() -> None:
    """Chinese keeps the model's first sentence (why): its advice sentences read wrong too
    often to be shown."""
    zh_buy = make_verdict(
        kind=VerdictKind.BUY,
        language="zh",
        reasons=(
            make_reason(
                code="near_all_time_low",
                polarity=Polarity.BUY,
                numbers={"current": 299.0, "low": 249.0, "gap_pct": 2.4},
                text="当前价$299.00，距历史最低价$249.00（2026-11-05）仅高2.4%。",
            ),
        ),
    )
    model = Scripted(
        "现价$299.00离历史最低价$249.00只差2.4%。", "需要的话现在就可以买。", "第三句。"
    )
    _, final = run(model, zh_buy)
    assert final.source == "llm", final.fallback_reason
    assert final.text == "值得现在买，因为现价$299.00离历史最低价$249.00只差2.4%。"
    assert model.streams[0].consumed == 1


def test_a_chinese_reason_of_four_characters_is_served() -> None:
    """"建议再等等，因为目前缺货。" is a whole answer; it was refused as too short (a run
    of Chinese characters counted as one word plus half its length) and the template
    served instead."""
    zh_wait = make_verdict(
        kind=VerdictKind.WAIT,
        language="zh",
        reasons=(
            make_reason(code="out_of_stock", polarity=Polarity.WAIT, text="目前缺货。"),
        ),
    )
    _, final = run(Scripted("目前缺货。", "等到货再买，补货时我可以提醒你。"), zh_wait)
    assert final.source == "llm", final.fallback_reason
    assert final.text == "建议再等等，因为目前缺货。"


def test_a_sale_named_with_a_number_at_a_sentence_end_is_no_list_marker() -> None:
    """ "…ahead of Double 12. Wait for it…" read " 12." as the next list item and served
    "ahead of Double ." with the sale's name cut."""
    wait = make_verdict(
        kind=VerdictKind.WAIT,
        reasons=(
            make_reason(
                code="pre_sale_hike",
                polarity=Polarity.WAIT,
                numbers={"raised_pct": 15.7, "raised_from": 187.71},
                text="A pre-sale hike: the price was raised 15.7% above $187.71 over the last "
                "14 days, ahead of Double 12.",
            ),
        ),
    )
    model = Scripted(
        " the price was raised 15.7% above $187.71 over the last 14 days, ahead of Double",
        " 12",
        ". Hold off for now; I can tell you when it drops.",
    )
    shown, final = run(model, wait)
    assert "Double ." not in shown + final.text
    assert "ahead of Double 12." in final.text, (final.source, final.fallback_reason, final.text)


def test_an_invented_price_falls_back_to_the_template_before_it_is_shown() -> None:
    model = Scripted(" it was $27", "7 last week", " and is cheap now.")
    shown, final = run(model)
    assert final.source == "template"
    assert final.fallback_reason == "ungrounded"
    assert final.ungrounded == ("277",)
    assert final.text == template_explanation(BUY, make_sheet())
    assert "27" not in shown


def test_a_date_split_across_tokens_is_judged_whole() -> None:
    """'2025-11-' alone reads as a stray 11; the guard must wait for the whole date."""
    sheet = make_sheet(all_time_low_at="2025-11-28T12:00:00Z")
    guard = GuardedStream(allowed_numbers(sheet, BUY))
    out = "".join(guard.feed(piece) for piece in [" its low was on 2025", "-11-", "28", "."])
    assert out + guard.finish() == " its low was on 2025-11-28."


def test_a_day_before_its_month_waits_for_the_month() -> None:
    sheet = make_sheet(all_time_low_at="2025-11-28T12:00:00Z")
    guard = GuardedStream(allowed_numbers(sheet, BUY))
    out = "".join(guard.feed(piece) for piece in [" its low was on 28 ", "November", "."])
    assert out + guard.finish() == " its low was on 28 November."


def test_looping_output_is_cut_off() -> None:
    model = Scripted(*([" buy now"] * 40))
    _, final = run(model)
    assert (final.source, final.fallback_reason) == ("template", "repetitive")
    assert model.streams[0].consumed < 10


@pytest.mark.parametrize(
    ("pieces", "why"),
    [
        ((" of the price.",), "too_short"),
        ((" Verdict: buy.",), "echoed_prompt"),
        ((" of the fact that:",), "incomplete"),
        ((" it's worth it, really.",), "says_nothing"),
        ((" it is not worth buying at all.",), "contradicts_verdict"),
        ((), "too_short"),
        ((" of the price difference.",), "unknown_words"),
        ((" of its high value and excellent customer service.",), "unknown_words"),
        ((" it is well rated: 4.4/5.",), "not_specific"),
    ],
)
def test_bad_wording_falls_back(pieces: tuple[str, ...], why: str) -> None:
    _, final = run(Scripted(*pieces))
    assert (final.source, final.fallback_reason) == ("template", why)


def test_no_model_means_template_text() -> None:
    _, final = run(None)
    assert (final.source, final.fallback_reason) == ("template", "no_model")


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("it is cheap and well rated by buyers", VerdictKind.BUY, None),
        ("it is a good deal right now honestly", VerdictKind.WAIT, "contradicts_verdict"),
        ("a sale starts soon and it will be cheaper", VerdictKind.WAIT, None),
        ("不建议购买，评分下降了很多", VerdictKind.BUY, "contradicts_verdict"),
        ("price 1000000 is odd but grounded elsewhere", VerdictKind.BUY, None),
        ("好好好好好好好", VerdictKind.BUY, "repetitive"),
        ("目前缺货", VerdictKind.WAIT, None),
        ("便宜", VerdictKind.BUY, "too_short"),
        ("of the price", VerdictKind.BUY, "too_short"),
        ("the price was raised 15% over 14 days, ahead of Double 12.", VerdictKind.WAIT, None),
        ("it was cheaper last month. 2.", VerdictKind.WAIT, "incomplete"),
    ],
)
def test_sanity_rules(text: str, kind: VerdictKind, expected: str | None) -> None:
    assert problem(text, kind) == expected


def test_repetition_detector() -> None:
    assert repetitive("buy it now, buy it now, buy it now")
    assert repetitive("line one\nline one")
    assert not repetitive("It is at its lowest price in 90 days and rated 4.4/5.")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet="0123456789.,$% abc", max_size=6), max_size=20))
def test_released_text_is_always_grounded_however_it_is_split(pieces: list[str]) -> None:
    """Whatever the split into tokens, no released prefix carries an ungrounded number."""
    allowed = allowed_numbers(make_sheet(), BUY)
    guard = GuardedStream(allowed, max_sentences=50)
    try:
        for piece in pieces:
            guard.feed(piece)
        guard.finish()
    except UngroundedError:
        pass
    from worthit.explain.guard import check_grounding

    assert check_grounding(guard.shown, allowed).ok


def test_an_answer_cut_mid_sentence_keeps_only_its_whole_sentences() -> None:
    """Seen through the OpenAI SDK: a deadline cut left "…is now at its all-time" as
    the kept explanation. Only whole sentences are kept; none at all is a fallback."""
    _, final = run(Scripted(" it is within 2.4% of its low and well rated.", " It is at its all"))
    assert final.source == "llm"
    assert final.text.endswith("well rated.")
    _, final = run(Scripted(" it is within 2.4% of its low and it is at its all"))
    assert (final.source, final.fallback_reason) == ("template", "incomplete")


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(
        [
            ": 1. It is only 2.4% above its low, 2. It is rated 4.4/5.",
            " of:\n1) it is cheap; 2) rated 4.4/5.\nMore text.",
            " it is only 2.4% above its all-time low of $249.00. Great value.",
            ":\n- it is 2.4% above its low. 3. Wait.",
        ]
    ),
    st.lists(st.integers(min_value=1, max_value=60), min_size=1, max_size=12),
)
def test_how_the_model_text_is_split_never_changes_the_answer(text: str, cuts: list[int]) -> None:
    """Paragraph, list-marker and guard rules are applied to a stream: they must not depend
    on where the tokens happen to break."""
    bounds = sorted({c % len(text) for c in cuts} | {0, len(text)})
    pieces = [text[a:b] for a, b in pairwise(bounds)]
    whole = run(Scripted(text))[1]
    split = run(Scripted(*pieces))[1]
    assert (split.source, split.text, split.fallback_reason) == (
        whole.source,
        whole.text,
        whole.fallback_reason,
    )


def test_a_refused_second_sentence_ends_the_answer_and_nothing_shown_is_withdrawn() -> None:
    model = Scripted(" it is only 2.4% above its all-time low of $249.00.", " It was $277 once.")
    shown, final = run(model)
    first = "Worth buying now because it is only 2.4% above its all-time low of $249.00."
    assert (final.source, final.text, shown) == ("llm", first, first)


def test_an_engine_stop_after_a_shown_sentence_keeps_it() -> None:
    pieces = (" it is only 2.4% above its all-time low of $249.00.", " It is")
    model = ScriptedEngine(pieces, finish=FinishReason.EXPIRED)
    shown, final = run(model)
    assert final.source == "llm" and final.text == shown


_SENTENCES = (
    " it is only 2.4% above its all-time low of $249.00.",
    " It is rated well by buyers.",
    " It was $277 last week.",
    " it is not worth buying at all.",
    " buy now buy now buy now buy now.",
    " it is at its",
)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_SENTENCES), max_size=4), st.integers(1, 9))
def test_what_is_shown_is_exactly_what_is_kept(sentences: list[str], size: int) -> None:
    """The shopper never reads words that are later withdrawn: the streamed text is the
    kept explanation when the model's words stand, and nothing when the template does."""
    text = "".join(sentences)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    shown, final = run(Scripted(*pieces))
    assert shown == (final.text if final.source == "llm" else "")


def test_a_stored_text_is_rechecked_against_each_basis_of_its_own() -> None:
    """The re-check of a stored text is remembered per basis (sheet version and verdict):
    the same text again gets the same answer, and a text accepted for one verdict is still
    refused under another."""
    from worthit.explain.explainer import RECHECKS_KEPT, ExplanationRun

    sheet = make_sheet()
    buy = ExplanationRun(sheet, BUY)
    text = f"{buy.prefix} at $299.00 it is within 2.4% of its all-time low of $249.00."
    assert buy.recheck(text) is None
    again = ExplanationRun(sheet, BUY, buy.basis)
    assert again.recheck(text) is None and text in buy.basis.rechecked

    wait = make_verdict(kind=VerdictKind.WAIT, reasons=BUY.reasons)
    assert ExplanationRun(sheet, wait).recheck(text) is not None

    invented = f"{buy.prefix} it costs $1."
    assert again.recheck(invented) == again.recheck(invented) is not None
    for i in range(RECHECKS_KEPT * 2):
        again.recheck(f"{buy.prefix} it costs ${i + 2}.")
    assert len(buy.basis.rechecked) <= RECHECKS_KEPT
