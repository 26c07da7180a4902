"""Over the shopper's budget at or near its all-time low: waiting will not bring it under
the budget, so the answer says so and is not WAIT (issue 27)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worthit.decide.rules import DEFAULT_THRESHOLDS as T
from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, VerdictKind
from worthit.explain.checker import CheckInputs, key_reason
from worthit.facts.sheet import FactSheet

from factories import make_plain_sheet, make_promotion


def at_low(price: float, low: float = 208.0, **overrides: Any) -> FactSheet:
    """An ordinary history (no other price rule fires) with today's price at `price` and
    its all-time low at `low`."""
    return make_plain_sheet(
        current_price=price, all_time_low=low, all_time_low_at="2026-01-10", **overrides
    )


def test_the_issue_example_says_over_budget_and_unlikely_to_get_cheaper() -> None:
    verdict = decide_verdict(at_low(212.0), budget=200.0)
    assert verdict.kind is VerdictKind.SKIP
    lead = verdict.reasons[0]
    assert (lead.code, lead.polarity) == ("over_budget_at_low", Polarity.SKIP)
    assert lead.text == (
        "It is over your budget of $200.00, and at $212.00 it is within 1.9% of its all-time "
        "low of $208.00: unlikely to get cheaper soon."
    )
    assert lead.numbers == {"current": 212.0, "budget": 200.0, "low": 208.0, "gap_pct": 1.9}
    codes = {r.code for r in verdict.reasons}
    assert not codes & {"over_budget", "near_all_time_low"}  # said once, in the new reason


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("en", "It is over your budget of $200.00, and at $208.00 it is at its all-time low: "
               "unlikely to get cheaper soon."),
        ("zh", "当前价$208.00超出了你的预算$200.00，但已是历史最低价，短期内不太可能更便宜。"),
    ],
)  # fmt: skip
def test_at_the_low_itself(language: str, text: str) -> None:
    verdict = decide_verdict(at_low(208.0), language, budget=200.0)
    assert verdict.kind is VerdictKind.SKIP
    assert verdict.reasons[0].text.replace("US$", "$") == text


def test_a_sale_coming_still_means_wait_for_it() -> None:
    """An announced sale may bring it under the budget: that wait stands."""
    sale = make_promotion(price=180.0, days_until_start=5)
    verdict = decide_verdict(at_low(212.0, upcoming_promotions=(sale,)), budget=200.0)
    assert verdict.kind is VerdictKind.WAIT
    assert {"over_budget", "upcoming_sale"} <= {r.code for r in verdict.reasons}


def test_far_from_its_low_over_budget_is_still_wait() -> None:
    verdict = decide_verdict(at_low(260.0), budget=200.0)
    assert verdict.kind is VerdictKind.WAIT
    assert verdict.reasons[0].code == "over_budget"


def test_the_checker_names_the_new_reason() -> None:
    verdict = decide_verdict(at_low(212.0), budget=200.0)
    inputs = CheckInputs.of("Aurora NC700", verdict)
    key = key_reason(inputs.verdict, inputs.reasons)
    assert key is not None and key.code == "over_budget_at_low"
    gold = {"verdict": "SKIP", "codes": ["over_budget_at_low"], "reasons": [key.text]}
    assert CheckInputs.from_record(gold).reasons[0].polarity is Polarity.SKIP


@given(
    price=st.floats(150.0, 400.0).map(lambda p: round(p, 2)),
    budget=st.one_of(st.none(), st.floats(100.0, 400.0).map(lambda b: round(b, 0))),
)
def test_over_budget_near_the_low_is_never_wait(price: float, budget: float | None) -> None:
    """With nothing else saying to wait: over the budget and within the near-low margin of
    the all-time low is SKIP; over it further from the low, WAIT; within it, the price rules."""
    low = 208.0
    verdict = decide_verdict(at_low(price, low), budget=budget)
    over = budget is not None and price > budget
    gap = round(100.0 * (price - low) / low, 1)
    near = gap <= T.near_low_pct
    codes = {r.code for r in verdict.reasons}
    assert ("over_budget_at_low" in codes) is (over and near)
    if over and near:
        assert verdict.kind is VerdictKind.SKIP
    elif over:
        assert verdict.kind is VerdictKind.WAIT and "over_budget" in codes
    else:
        assert not codes & {"over_budget", "over_budget_at_low"}
