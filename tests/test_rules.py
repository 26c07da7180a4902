"""Every verdict rule at its boundaries, on hand-built fact sheets."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from worthit.decide.rules import DEFAULT_THRESHOLDS as T
from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, VerdictKind
from worthit.facts.sheet import FactSheet, WindowStats

from factories import make_promotion, make_rating, make_sheet


def neutral(**overrides: Any) -> FactSheet:
    """A product at an ordinary price: long history, average rating, stock, no sale."""
    base = make_sheet(
        current_price=300.0,
        list_price=None,
        windows=(
            WindowStats(30, 30, 290.0, 300.0, 300.0),
            WindowStats(90, 90, 280.0, 300.0, 300.0),
            WindowStats(180, 180, 250.0, 300.0, 300.0),
        ),
        all_time_low=250.0,
        all_time_low_at="2026-06-18",
        percentile_90d=50.0,
        trend_30d_pct=0.0,
        days_tracked=180,
        observations=180,
        rating=make_rating(
            count=50,
            mean=4.0,
            bayesian=4.0,
            recent_count=10,
            recent_mean=4.0,
            earlier_mean=4.0,
            trend=0.0,
        ),
        stock=50,
        active_promotions=(),
        upcoming_promotions=(),
    )
    return replace(base, **overrides)


def codes(sheet: FactSheet) -> set[str]:
    return {r.code for r in decide_verdict(sheet).reasons}


def with_avg90(avg: float) -> tuple[WindowStats, ...]:
    return (
        WindowStats(30, 30, 290.0, 300.0, 300.0),
        WindowStats(90, 90, 280.0, avg, avg),
        WindowStats(180, 180, 250.0, 300.0, 300.0),
    )


def test_neutral_price_and_average_rating_is_a_low_confidence_wait() -> None:
    verdict = decide_verdict(neutral())
    assert verdict.kind is VerdictKind.WAIT
    assert verdict.confidence <= 0.5
    assert "near_90d_avg" in {r.code for r in verdict.reasons}


def test_a_fair_price_wait_names_the_price_at_which_it_turns_buy() -> None:
    verdict = decide_verdict(neutral())
    lead = verdict.reasons[0]
    assert lead.code == "no_deal_yet" and lead.polarity is Polarity.WAIT
    assert lead.numbers["deal_price"] == 270.0 and lead.numbers["current"] == 300.0
    assert lead.text == (
        "Not a deal at $300.00; a deal here is $270.00 or less (10% under its 90-day "
        "average of $300.00)."
    )
    at_the_deal = decide_verdict(neutral(current_price=270.0, windows=with_avg90(300.0)))
    assert at_the_deal.kind is VerdictKind.BUY


@pytest.mark.parametrize(
    ("language", "text"),
    [
        ("zh", "当前价US$300.00还不是优惠价，这里的优惠价是US$270.00或更低"
               "（比90天均价US$300.00低10%）。"),
        ("ja", "現在の$300.00はまだお得な価格ではありません。"
               "お得な価格は$270.00以下（90日平均$300.00より10%安い）です。"),
    ],
)  # fmt: skip
def test_the_price_at_which_it_turns_buy_in_other_languages(language: str, text: str) -> None:
    assert decide_verdict(neutral(), language).reasons[0].text == text


def test_a_wait_with_its_own_reason_gets_no_deal_price_beside_it() -> None:
    high = decide_verdict(neutral(current_price=340.0, percentile_90d=85.0))
    assert high.kind is VerdictKind.WAIT
    assert "no_deal_yet" not in {r.code for r in high.reasons}
    buy = decide_verdict(neutral(current_price=265.0, percentile_90d=10.0))
    assert "no_deal_yet" not in {r.code for r in buy.reasons}


def test_neutral_price_but_well_rated_is_a_buy() -> None:
    sheet = neutral(
        rating=make_rating(
            count=T.min_reviews_well_rated, bayesian=T.well_rated, recent_count=10, trend=0.0
        )
    )
    verdict = decide_verdict(sheet)
    assert verdict.kind is VerdictKind.BUY
    assert verdict.reasons[0].code == "well_rated"


@pytest.mark.parametrize(("observations", "priced"), [(9, False), (10, True)])
def test_minimum_observations_before_any_price_judgement(observations: int, priced: bool) -> None:
    sheet = neutral(observations=observations, current_price=250.0)
    verdict = decide_verdict(sheet)
    assert (verdict.kind is VerdictKind.INSUFFICIENT_DATA) is not priced
    assert ("few_observations" in codes(sheet)) is not priced


def test_no_price_at_all_is_insufficient_data() -> None:
    sheet = neutral(current_price=None, observations=0, all_time_low=None)
    verdict = decide_verdict(sheet)
    assert verdict.kind is VerdictKind.INSUFFICIENT_DATA
    assert [r.code for r in verdict.reasons] == ["no_price"]


@pytest.mark.parametrize(
    ("price", "expected"),
    [(250.0, "at_all_time_low"), (262.5, "near_all_time_low"), (262.75, None)],
)
def test_distance_from_all_time_low(price: float, expected: str | None) -> None:
    found = codes(neutral(current_price=price)) & {"at_all_time_low", "near_all_time_low"}
    assert found == ({expected} if expected else set())


@pytest.mark.parametrize(("days", "trusted"), [(34, False), (35, True)])
def test_all_time_low_needs_five_weeks_of_tracking(days: int, trusted: bool) -> None:
    found = codes(neutral(current_price=255.0, days_tracked=days))
    assert ("near_all_time_low" in found) is trusted
    assert ("low_not_established" in found) is not trusted


@pytest.mark.parametrize(
    ("avg", "expected"),
    [
        (300.0 / 0.9, "below_90d_avg"),
        (300.0 / 0.901, None),
        (300.0 / 1.1, "above_90d_avg"),
        (300.0 / 1.099, None),
        (300.0 / 1.03, "near_90d_avg"),
        (300.0 / 1.031, None),
        (300.0 / 0.97, "near_90d_avg"),
        (300.0 / 0.969, None),
    ],
)
def test_delta_against_the_90_day_average(avg: float, expected: str | None) -> None:
    found = codes(neutral(windows=with_avg90(round(avg, 2)))) & {
        "below_90d_avg",
        "above_90d_avg",
        "near_90d_avg",
    }
    assert found == ({expected} if expected else set())


@pytest.mark.parametrize(
    ("percentile", "expected"),
    [(20.0, "low_percentile"), (20.1, None), (79.9, None), (80.0, "high_percentile")],
)
def test_percentile_of_the_current_price(percentile: float, expected: str | None) -> None:
    found = codes(neutral(percentile_90d=percentile)) & {"low_percentile", "high_percentile"}
    assert found == ({expected} if expected else set())


@pytest.mark.parametrize(("trend", "falling"), [(-5.0, True), (-4.9, False)])
def test_falling_price_suggests_waiting(trend: float, falling: bool) -> None:
    assert ("price_falling" in codes(neutral(trend_30d_pct=trend))) is falling


def test_seller_was_price_is_never_trusted() -> None:
    sheet = neutral(list_price=600.0)
    verdict = decide_verdict(sheet)
    reason = next(r for r in verdict.reasons if r.code == "was_price_untrusted")
    assert reason.polarity is Polarity.WAIT
    assert verdict.kind is not VerdictKind.BUY
    assert decide_verdict(neutral(list_price=600.0, current_price=260.0)).kind is VerdictKind.BUY


@pytest.mark.parametrize(("list_price", "flagged"), [(345.0, True), (344.9, False)])
def test_was_price_gap_boundary(list_price: float, flagged: bool) -> None:
    assert ("was_price_untrusted" in codes(neutral(list_price=list_price))) is flagged


@pytest.mark.parametrize(
    ("days", "price", "waits"),
    [
        (21, 285.0, True),  # 5.0 % off, on the horizon
        (22, 285.0, False),  # just past the horizon
        (3, 285.3, False),  # 4.9 % off: not worth waiting for
        (3, 200.0, True),
    ],
)
def test_upcoming_sale_event(days: int, price: float, waits: bool) -> None:
    promo = make_promotion(name="Double 12", price=price, days_until_start=days)
    verdict = decide_verdict(neutral(upcoming_promotions=(promo,)))  # today's price: 300
    assert ("upcoming_sale" in {r.code for r in verdict.reasons}) is waits
    if waits:
        assert verdict.kind is VerdictKind.WAIT
        assert verdict.reasons[0].code == "upcoming_sale"


def test_upcoming_sale_beats_a_good_price() -> None:
    promo = make_promotion(name="Double 12", price=200.0, days_until_start=5)
    verdict = decide_verdict(neutral(current_price=250.0, upcoming_promotions=(promo,)))
    assert verdict.kind is VerdictKind.WAIT


@pytest.mark.parametrize(
    ("bayesian", "count", "skip"),
    [(3.49, 128, True), (3.5, 128, False), (3.49, 10, True), (3.49, 9, False)],
)
def test_quality_floor(bayesian: float, count: int, skip: bool) -> None:
    """Below ten reviews the Bayesian rating is more category prior than product."""
    rating = make_rating(bayesian=bayesian, count=count, trend=0.0)
    sheet = neutral(current_price=250.0, rating=rating)
    assert (decide_verdict(sheet).kind is VerdictKind.SKIP) is skip


@pytest.mark.parametrize(
    ("trend", "recent_count", "skip"),
    [
        (-0.7, 40, True),  # 40 recent, 88 earlier: two standard errors is 0.42, the 0.7 binds
        (-0.69, 40, False),
        (-0.73, 10, True),  # 10 recent, 118 earlier: two standard errors is 0.725, it binds
        (-0.72, 10, False),
        (-1.5, 9, False),
    ],
)
def test_falling_recent_rating(trend: float, recent_count: int, skip: bool) -> None:
    rating = make_rating(
        count=128,
        bayesian=4.1,
        recent_count=recent_count,
        recent_mean=4.3 + trend,
        earlier_mean=4.3,
        trend=trend,
    )
    verdict = decide_verdict(neutral(current_price=250.0, rating=rating))
    assert (verdict.kind is VerdictKind.SKIP) is skip
    if skip:
        assert verdict.reasons[0].code == "rating_falling"


@pytest.mark.parametrize(("count", "well"), [(20, True), (19, False)])
def test_well_rated_needs_enough_reviews(count: int, well: bool) -> None:
    rating = make_rating(bayesian=T.well_rated, count=count, trend=0.0)
    assert ("well_rated" in codes(neutral(rating=rating))) is well


def test_skip_confidence_grows_with_the_reviews_behind_it() -> None:
    def confidence(count: int) -> float:
        rating = make_rating(bayesian=3.0, count=count, trend=0.0)
        verdict = decide_verdict(neutral(rating=rating))
        assert verdict.kind is VerdictKind.SKIP
        return verdict.confidence

    assert confidence(10) == round(0.9 * 0.84, 2)
    assert confidence(T.reviews_for_full_confidence) == 0.9 > confidence(40)
    assert confidence(500) == 0.9


def test_both_skip_reasons_on_few_reviews_are_not_a_certain_skip() -> None:
    """Capped at 0.95 first, then scaled: 12 recent reviews do not make 0.95."""
    rating = make_rating(
        count=12, bayesian=2.0, recent_count=12, recent_mean=1.5, earlier_mean=4.5, trend=-3.0
    )
    verdict = decide_verdict(neutral(rating=rating))
    assert {r.code for r in verdict.reasons} >= {"quality_floor", "rating_falling"}
    assert verdict.confidence == round(0.95 * (0.8 + 0.2 * 12 / 50), 2)


@pytest.mark.parametrize(("budget", "over"), [(299.99, True), (300.0, False), (None, False)])
def test_over_the_shoppers_budget_means_wait(budget: float | None, over: bool) -> None:
    deal = neutral(current_price=252.0, windows=with_avg90(300.0), percentile_90d=2.0)
    verdict = decide_verdict(replace(deal, current_price=300.0), budget=budget)
    assert ("over_budget" in {r.code for r in verdict.reasons}) is over
    if over:
        assert verdict.kind is VerdictKind.WAIT
        assert verdict.reasons[0].text == "At $300.00 it is over your budget of $299.99."
    assert decide_verdict(deal, budget=300.0).kind is VerdictKind.BUY


def test_quality_skip_wins_even_without_price_history() -> None:
    sheet = neutral(observations=3, rating=make_rating(bayesian=2.1, count=40, trend=0.0))
    assert decide_verdict(sheet).kind is VerdictKind.SKIP


def test_out_of_stock_means_wait() -> None:
    verdict = decide_verdict(neutral(current_price=250.0, stock=0))
    assert verdict.kind is VerdictKind.WAIT
    assert verdict.reasons[0].code == "out_of_stock"


@pytest.mark.parametrize(("quantity", "low"), [(5, True), (6, False), (1, True)])
def test_low_stock_is_reported(quantity: int, low: bool) -> None:
    assert ("low_stock" in codes(neutral(stock=quantity))) is low


def test_a_clear_deal_is_a_confident_buy() -> None:
    sheet = neutral(current_price=252.0, windows=with_avg90(300.0), percentile_90d=2.0)
    verdict = decide_verdict(sheet)
    assert verdict.kind is VerdictKind.BUY
    assert verdict.confidence >= 0.8
    assert verdict.reasons[0].code == "near_all_time_low"


def test_reasons_carry_their_numbers_in_their_sentences() -> None:
    sheet = neutral(current_price=255.0, windows=with_avg90(300.0))
    reason = next(r for r in decide_verdict(sheet).reasons if r.code == "near_all_time_low")
    assert reason.numbers["gap_pct"] == 2.0
    assert "$255.00" in reason.text and "$250.00" in reason.text and "2%" in reason.text


def test_chinese_question_gets_chinese_reasons() -> None:
    verdict = decide_verdict(neutral(current_price=255.0), language="zh")
    assert verdict.language == "zh"
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in r.text) for r in verdict.reasons)


def test_verdict_is_a_pure_function_of_the_sheet() -> None:
    sheet = neutral(current_price=270.0, percentile_90d=15.0)
    assert decide_verdict(sheet) == decide_verdict(sheet)
    assert decide_verdict(sheet).facts_version == sheet.version
