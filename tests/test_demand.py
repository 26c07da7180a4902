"""The order the background generator writes explanations in (`demand_order`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from worthit.answer.demand import EQUAL_SHARE, PRIOR_SHARES, demand_order

SALES = {"S1": 100.0, "S2": 60.0, "S3": 30.0}
SKUS = ["S1", "S2", "S3", "S4"]


def test_a_best_seller_is_written_in_both_common_languages_before_the_next_product() -> None:
    order = [(sku, lang) for sku, lang, _ in demand_order(SALES, SKUS, PRIOR_SHARES)]
    common = [pair for pair in order if pair[1] != "ja"]
    assert common[:6] == [
        ("S1", "en"), ("S1", "zh"), ("S2", "en"), ("S2", "zh"), ("S3", "en"), ("S3", "zh"),
    ]  # fmt: skip
    assert order.index(("S1", "zh")) < order.index(("S2", "en"))


def test_the_weights_stay_each_pairs_share_of_demand() -> None:
    weights = {(sku, lang): w for sku, lang, w in demand_order(SALES, SKUS, PRIOR_SHARES)}
    assert weights[("S1", "en")] == 75.0
    assert weights[("S1", "zh")] == 25.0
    assert weights[("S1", "ja")] == 0.0
    assert weights[("S4", "en")] == 0.0


def test_a_rarely_asked_language_waits_by_its_share() -> None:
    shares = {"en": 0.91, "zh": 0.05, "ja": 0.04}
    order = [(sku, lang) for sku, lang, _ in demand_order(SALES, SKUS, shares)]
    # S1 in Chinese comes at 100 x 0.05 / EQUAL_SHARE = 50, in Japanese at 40: after S2 (60)
    assert order[:5] == [("S1", "en"), ("S2", "en"), ("S1", "zh"), ("S1", "ja"), ("S2", "zh")]


@given(
    st.dictionaries(st.sampled_from(SKUS), st.floats(0.0, 1e6), max_size=4),
    st.floats(EQUAL_SHARE, 1.0 - EQUAL_SHARE),
)
def test_common_languages_cover_the_same_products_at_every_point(
    sales: dict[str, float], english: float
) -> None:
    shares = {"en": english, "zh": 1.0 - english, "ja": 0.0}
    order = [(sku, lang) for sku, lang, _ in demand_order(sales, SKUS, shares)]
    assert sorted(order) == sorted((sku, lang) for sku in SKUS for lang in shares)
    for cut in range(len(order) + 1):
        head = order[:cut]
        en = [sku for sku, lang in head if lang == "en"]
        zh = [sku for sku, lang in head if lang == "zh"]
        assert abs(len(en) - len(zh)) <= 1
        assert en[: len(zh)] == zh[: len(en)]
