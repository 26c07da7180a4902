import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.decide.verdict import Polarity, Reason, VerdictKind
from worthit.explain.guard import allowed_numbers, check_grounding
from worthit.explain.templates import language_of, template_explanation
from worthit.text.sentences import sentence_ends

from factories import make_rating, make_reason, make_sheet, make_verdict

EN_REASONS = {
    "low": make_reason(
        code="near_low",
        polarity=Polarity.BUY,
        numbers={"gap_pct": 4.0},
        text="It is within 4% of its all-time low of 249.00 USD.",
    ),
    "sale": make_reason(),
    "slip": make_reason(
        code="rating_slipping",
        polarity=Polarity.SKIP,
        numbers={"trend": -0.3},
        text="Recent reviews average 4.1 stars, down 0.3 from earlier ones.",
    ),
    "few": make_reason(
        code="few_prices",
        polarity=Polarity.INFO,
        numbers={"observations": 6},
        text="Only 6 prices have been recorded so far.",
    ),
}
ZH_REASONS = {
    "low": make_reason(
        code="near_low",
        polarity=Polarity.BUY,
        numbers={"gap_pct": 4.0},
        text="现价距历史最低价249.00美元不到4%。",
    ),
    "sale": make_reason(text="6.5天后有促销，价格259元"),
    "slip": make_reason(
        code="rating_slipping",
        polarity=Polarity.SKIP,
        numbers={"trend": -0.3},
        text="近期评分4.1，比早期低0.3。",
    ),
    "few": make_reason(
        code="few_prices",
        polarity=Polarity.INFO,
        numbers={"observations": 6},
        text="目前只记录了6个价格。",
    ),
}
CASES = [
    (VerdictKind.BUY, ("low", "few")),
    (VerdictKind.WAIT, ("few", "sale")),
    (VerdictKind.SKIP, ("low", "slip", "few")),
    (VerdictKind.INSUFFICIENT_DATA, ("few",)),
    (VerdictKind.WAIT, ()),
]


def sentences(text: str) -> int:
    return len(sentence_ends(text))


@pytest.mark.parametrize("language", ["en", "zh"])
@pytest.mark.parametrize(("kind", "codes"), CASES)
def test_template_is_grounded_short_and_in_the_question_language(
    language: str, kind: VerdictKind, codes: tuple[str, ...]
) -> None:
    table = ZH_REASONS if language == "zh" else EN_REASONS
    sheet = make_sheet()
    verdict = make_verdict(kind=kind, language=language, reasons=tuple(table[c] for c in codes))
    text = template_explanation(verdict, sheet)
    assert text.startswith(kind.label(language))
    assert 1 <= sentences(text) <= 2
    assert check_grounding(text, allowed_numbers(sheet, verdict)).ok
    assert bool(re.search(r"[\u4e00-\u9fff]", text)) is (language == "zh")


def test_the_supporting_reason_leads() -> None:
    verdict = make_verdict(
        kind=VerdictKind.SKIP,
        reasons=(EN_REASONS["low"], EN_REASONS["few"], EN_REASONS["slip"]),
    )
    assert template_explanation(verdict, make_sheet()) == (
        "Not worth buying: Recent reviews average 4.1 stars, down 0.3 from earlier ones. "
        "Only 6 prices have been recorded so far."
    )


def test_without_reasons_it_falls_back_to_the_price_or_the_headline() -> None:
    verdict = make_verdict(reasons=(), language="zh-CN")
    assert template_explanation(verdict, make_sheet()) == "建议再等等：当前售价US$299.00。"
    assert template_explanation(verdict, make_sheet(current_price=None)) == "建议再等等。"
    assert language_of(make_verdict(language="fr")) == "en"


prices = st.floats(min_value=0.01, max_value=99_999, allow_nan=False).map(lambda p: round(p, 2))
reason_texts = st.sampled_from(
    [
        "The price {p} USD is {q}% above the 90-day low of {low:,.2f}.",
        "Save ${diff:,.2f} against the list price.",
        "现价{p}元，比历史最低价高{q}%。",
        "近3天卖出{sold}件，评分{rating}/5。",
        "Price {p:.0f}, about {wan:.1f}万 sold.",
    ]
)


@settings(max_examples=120)
@given(
    price=prices,
    low=prices,
    sold=st.integers(0, 10**6),
    rating=st.floats(1, 5).map(lambda r: round(r, 4)),
    kind=st.sampled_from(list(VerdictKind)),
    language=st.sampled_from(["en", "zh"]),
    templates=st.lists(reason_texts, max_size=3),
    polarities=st.lists(st.sampled_from(list(Polarity)), min_size=3, max_size=3),
)
def test_template_always_passes_the_guard(
    price: float,
    low: float,
    sold: int,
    rating: float,
    kind: VerdictKind,
    language: str,
    templates: list[str],
    polarities: list[Polarity],
) -> None:
    diff = round(abs(price - low), 2)
    pct = round(diff / low * 100, 1)
    reasons = tuple(
        Reason(
            code=f"r{i}",
            polarity=polarity,
            numbers={"price": price, "low": low, "diff": diff, "pct": pct},
            text=template.format(
                p=price, q=pct, low=low, diff=diff, sold=sold, rating=rating, wan=sold / 10_000
            ),
        )
        for i, (template, polarity) in enumerate(zip(templates, polarities, strict=False))
    )
    sheet = make_sheet(
        current_price=price, all_time_low=low, sales_3d=sold, rating=make_rating(bayesian=rating)
    )
    verdict = make_verdict(kind=kind, language=language, reasons=reasons)
    text = template_explanation(verdict, sheet)
    assert check_grounding(text, allowed_numbers(sheet, verdict)).ok
