"""Claimed discounts measured against the 30-day prior price (EU Omnibus Art. 6a): the rule
at its boundaries on hand-built sheets, and the facts it reads from a hand-built history."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from worthit.decide.rules import DEFAULT_THRESHOLDS as T
from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, Reason, VerdictKind
from worthit.explain.guard import allowed_numbers, check_grounding
from worthit.facts.builder import FactsBuilder
from worthit.facts.sheet import FactSheet
from worthit.market.records import PriceRecord, ProductRecord, PromotionRecord
from worthit.market.store import MarketStore
from worthit.text.time import to_ms

from factories import make_claim, make_event, make_plain_sheet

AS_OF = "2026-03-14T09:30:00Z"


def neutral(**overrides: Any) -> FactSheet:
    """An ordinary price, long history, average rating, no sale, no claim."""
    return make_plain_sheet(
        **({"as_of": AS_OF, "days_tracked": 180, "observations": 180} | overrides)
    )


def reason(sheet: FactSheet, code: str, language: str = "en") -> Reason | None:
    return next((r for r in decide_verdict(sheet, language).reasons if r.code == code), None)


@pytest.mark.parametrize(("reference", "flagged"), [(294.0, True), (293.99, False)])
def test_reference_above_the_prior_low_by_the_gap_is_flagged(
    reference: float, flagged: bool
) -> None:
    sheet = neutral(discount_claim=make_claim(reference=reference, prior_low=280.0))
    assert (reason(sheet, "fake_discount") is not None) is flagged


def test_the_reason_gives_reference_prior_low_and_true_discount_in_both_languages() -> None:
    sheet = neutral(discount_claim=make_claim(reference=400.0, price=270.0, prior_low=280.0))
    en = reason(sheet, "fake_discount")
    zh = reason(sheet, "fake_discount", "zh")
    assert en is not None and zh is not None
    assert en.polarity is Polarity.INFO
    assert en.numbers["claimed_pct"] == 32.5
    assert en.numbers["true_pct"] == 3.6
    assert en.text == (
        "Spring Sale at $270.00 claims 32.5% off $400.00, but the lowest price in the 30 days "
        "before the reduction was $280.00: a true discount of 3.6%."
    )
    assert zh.text == (
        "Spring Sale：US$270.00号称比US$400.00便宜32.5%，但降价前30天内的最低价是US$280.00，"
        "实际只便宜3.6%。"
    )


def test_a_sale_at_or_above_the_prior_low_is_no_real_discount() -> None:
    sheet = neutral(discount_claim=make_claim(reference=400.0, price=280.0, prior_low=280.0))
    found = reason(sheet, "fake_discount")
    assert found is not None and found.numbers["true_pct"] == 0.0
    assert found.text.endswith("was $280.00: no real discount.")
    assert reason(sheet, "fake_discount", "zh") is not None


def test_a_claim_is_never_a_buy_signal() -> None:
    plain = decide_verdict(neutral())
    claimed = decide_verdict(neutral(discount_claim=make_claim()))
    assert claimed.kind is plain.kind and claimed.confidence == plain.confidence


def test_no_prior_price_means_no_judgement() -> None:
    assert reason(neutral(discount_claim=make_claim(prior_low=None)), "fake_discount") is None


def test_a_list_price_already_distrusted_is_not_said_twice() -> None:
    claim = make_claim(source="list_price", name=None, reference=600.0, price=300.0)
    sheet = neutral(list_price=600.0, discount_claim=claim)
    assert reason(sheet, "was_price_untrusted") is not None
    assert reason(sheet, "fake_discount") is None
    mild = neutral(list_price=330.0, discount_claim=replace(claim, reference=330.0))
    found = reason(mild, "fake_discount")
    assert found is not None and found.text.startswith("Today's price at $300.00 claims 9.1% off")
    zh = reason(mild, "fake_discount", "zh")
    assert zh is not None and zh.text.startswith("当前价：US$300.00号称")


@pytest.mark.parametrize(("raised", "hike"), [(10.0, True), (9.9, False)])
def test_a_pre_sale_hike_is_named_from_the_threshold(raised: float, hike: bool) -> None:
    claim = make_claim(started="2026-03-20T00:00:00Z", raised_pct=raised, raised_from=280.0)
    assert (reason(neutral(discount_claim=claim), "pre_sale_hike") is not None) is hike


def test_a_hike_ahead_of_a_sale_is_a_mild_wait_and_on_a_running_one_info() -> None:
    ahead = make_claim(started="2026-03-20T00:00:00Z", raised_pct=30.0, raised_from=280.0)
    found = reason(neutral(discount_claim=ahead), "pre_sale_hike")
    assert found is not None and found.polarity is Polarity.WAIT
    assert found.text == (
        "A pre-sale hike: the price was raised 30% above $280.00 over the last 14 days, "
        "ahead of Spring Sale."
    )
    zh = reason(neutral(discount_claim=ahead), "pre_sale_hike", "zh")
    assert zh is not None
    assert zh.text == "Spring Sale前先涨价：近14天价格比此前的US$280.00上调了30%。"
    running = replace(ahead, started="2026-03-13T00:00:00Z")
    on = reason(neutral(discount_claim=running), "pre_sale_hike")
    assert on is not None and on.polarity is Polarity.INFO
    assert on.text.startswith("Spring Sale follows a pre-sale hike")


def test_a_list_price_hike_is_named_only_ahead_of_a_calendar_sale() -> None:
    claim = make_claim(source="list_price", name=None, reference=330.0, price=300.0,
                       started=AS_OF, raised_pct=20.0, raised_from=250.0)  # fmt: skip
    assert reason(neutral(discount_claim=claim), "pre_sale_hike") is None
    sheet = neutral(discount_claim=claim, coming_events=(make_event(past_discounts_pct=()),))
    found = reason(sheet, "pre_sale_hike")
    assert found is not None and found.numbers["name"] == "Double 12"
    zh = reason(sheet, "pre_sale_hike", "zh")
    assert zh is not None and zh.text.startswith("双12前先涨价")


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_number_the_reasons_write_is_grounded(language: str) -> None:
    claim = make_claim(started="2026-03-20T00:00:00Z", raised_pct=30.0, raised_from=280.0)
    sheet = neutral(discount_claim=claim)
    verdict = decide_verdict(sheet, language)
    grounds = allowed_numbers(sheet, verdict)
    for r in verdict.reasons:
        if r.code in {"fake_discount", "pre_sale_hike"}:
            assert check_grounding(r.text, grounds).ok, r.text


# --- the facts ------------------------------------------------------------------------

NOW = datetime(2026, 6, 30, 12, 0, tzinfo=UTC)


def _store(prices: list[float], promotions: list[PromotionRecord]) -> MarketStore:
    """One product, a price a day ending today at noon, with a list price of 500."""
    store = MarketStore(":memory:")
    records: list[Any] = [ProductRecord(sku="P", title="P", brand="B", category="tvs")]
    last = len(prices) - 1
    records += [
        PriceRecord(sku="P", ts=NOW - timedelta(days=last - i), price=p, list_price=500.0)
        for i, p in enumerate(prices)
    ]
    store.apply([*records, *promotions])
    return store


def _sale(starts_in: float, price: float) -> PromotionRecord:
    starts = NOW + timedelta(days=starts_in)
    return PromotionRecord(
        sku="P", name="Big Sale", starts=starts, ends=starts + timedelta(days=3), price=price
    )


def test_a_running_promotion_is_measured_from_the_30_days_before_it_started() -> None:
    # 40 days at 300 (one day at 280, 31 days before the sale), 14 days hiked to 390, sale.
    prices = [300.0] * 40 + [390.0] * 14 + [290.0] * 2
    prices[-2 - 14 - 31] = 280.0
    store = _store(prices, [_sale(-1.5, 290.0)])
    sheet = FactsBuilder(store).build("P", at_ms=to_ms(NOW))
    assert sheet is not None and sheet.discount_claim is not None
    claim = sheet.discount_claim
    assert (claim.source, claim.name, claim.reference, claim.price) == (
        "promotion", "Big Sale", 500.0, 290.0,
    )  # fmt: skip
    assert claim.prior_low == 300.0  # the 280 was 31 days before: outside the window
    assert claim.raised_from == 300.0 and claim.raised_pct == 30.0
    verdict = decide_verdict(sheet)
    codes = {r.code: r.polarity for r in verdict.reasons}
    assert codes["pre_sale_hike"] is Polarity.INFO and "fake_discount" in codes


def test_an_announced_promotion_uses_only_prices_known_so_far() -> None:
    prices = [300.0] * 40 + [390.0] * 14
    later = [200.0] * 3
    store = _store(prices + later, [_sale(5, 310.0)])
    at = to_ms(NOW - timedelta(days=3))
    sheet = FactsBuilder(store).build("P", at_ms=at)
    assert sheet is not None and sheet.discount_claim is not None
    claim = sheet.discount_claim
    assert claim.prior_low == 300.0 and claim.raised_pct == 30.0
    history = FactsBuilder(store).history("P")
    assert history is not None
    assert FactsBuilder(store).build_from(history, at).discount_claim == claim
    verdict = decide_verdict(sheet)
    assert verdict.kind is VerdictKind.WAIT
    hike = next(r for r in verdict.reasons if r.code == "pre_sale_hike")
    assert hike.polarity is Polarity.WAIT


def test_a_list_price_claim_counts_from_today_and_none_without_a_claim() -> None:
    store = _store([300.0] * 20 + [320.0], [])
    sheet = FactsBuilder(store).build("P", at_ms=to_ms(NOW))
    assert sheet is not None and sheet.discount_claim is not None
    claim = sheet.discount_claim
    assert (claim.source, claim.reference, claim.price, claim.prior_low) == (
        "list_price", 500.0, 320.0, 300.0,
    )  # fmt: skip
    assert claim.prior_observations == 20 and claim.raised_pct == 0.0
    bare = MarketStore(":memory:")
    bare.apply([ProductRecord(sku="P", title="P", brand="B", category="tvs"),
                PriceRecord(sku="P", ts=NOW, price=300.0)])  # fmt: skip
    plain = FactsBuilder(bare).build("P", at_ms=to_ms(NOW))
    assert plain is not None and plain.discount_claim is None
    assert T.fake_discount_gap_pct == 5.0 and T.pre_sale_hike_pct == 10.0
