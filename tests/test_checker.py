"""The strict explanation checker (issue 25): it refuses what a shopper must never read
and accepts every gold explanation the team wrote."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from worthit.decide.verdict import Polarity, Reason, Verdict, VerdictKind
from worthit.explain.checker import (
    CheckInputs,
    CheckReason,
    check_explanation,
    key_reason,
    reason_slots,
)

GOLD = Path(__file__).resolve().parents[1] / "data" / "explanations"
TITLE = "Aurora NC700 Wireless Headphones"


def _inputs(language: str, verdict: str, reasons: list[tuple[str, str, str]]) -> CheckInputs:
    return CheckInputs(
        title=TITLE,
        verdict=VerdictKind(verdict),
        language=language,
        reasons=tuple(CheckReason(code, Polarity(p), text) for code, p, text in reasons),
    )


WAIT_EN = _inputs(
    "en",
    "WAIT",
    [
        ("upcoming_sale", "wait", "Black Friday starts in 12 days at $80.55, 15.7% below today."),
        (
            "was_price_untrusted",
            "wait",
            'The seller\'s "was" price of $161.83 is ignored: the 90-day median is $94.72.',
        ),
    ],
)
BUY_EN = _inputs(
    "en",
    "BUY",
    [
        (
            "near_all_time_low",
            "buy",
            "At $242.20 it is within 0.1% of its all-time low of $241.89 (seen 2026-11-05).",
        ),
        (
            "low_percentile",
            "buy",
            "Today's price is lower than 98.3% of prices in the last 90 days.",
        ),
    ],
)
SKIP_EN = _inputs(
    "en",
    "SKIP",
    [
        (
            "rating_falling",
            "skip",
            "Recent reviews are worse: 2.35/5 over the last 30 days against 3.62/5 before.",
        ),
        (
            "near_all_time_low",
            "buy",
            "At $44.30 it is within 1.2% of its all-time low of $43.77 (seen 2026-10-02).",
        ),
    ],
)
INSUFFICIENT_EN = _inputs(
    "en",
    "INSUFFICIENT_DATA",
    [
        ("low_stock", "info", "Only 3 left in stock."),
        (
            "few_observations",
            "info",
            "Only 4 price observations over 3 days; worthit needs at least 10 before judging "
            "the price.",
        ),
    ],
)
WAIT_ZH = _inputs(
    "zh",
    "WAIT",
    [
        ("sale_event", "wait", "14天后是黑色星期五：预计价格$88.71至$90.53（现价$103.56）。"),
        ("high_percentile", "wait", "当前价高于近90天98.3%的价格。"),
    ],
)
SKIP_ZH = _inputs(
    "zh",
    "SKIP",
    [
        ("quality_floor", "skip", "评分偏低：35条评价，按品类校正后为3.27/5。"),
        ("near_90d_avg", "info", "价格接近90天均价$44.30。"),
    ],
)
BUY_ZH = _inputs(
    "zh",
    "BUY",
    [
        ("near_all_time_low", "buy", "当前价$242.20，距历史最低价$241.89（2026-11-05）仅高0.1%。"),
        ("low_percentile", "buy", "当前价低于近90天98.3%的价格。"),
    ],
)

BUY_JA = _inputs(
    "ja",
    "BUY",
    [
        (
            "near_all_time_low",
            "buy",
            "現在$242.20で、過去最安値$241.89（2026-11-05）との差は0.1%です。",
        ),
        ("low_percentile", "buy", "今の価格は直近90日の価格の98.3%より安いです。"),
    ],
)

WAIT_SALE_EN = _inputs(
    "en",
    "WAIT",
    [
        (
            "upcoming_sale",
            "wait",
            "618 (35% off) starts in 8 days: at today's price one unit would cost $346.25, "
            "27.8% below today's $479.42.",
        ),
        (
            "effective_price",
            "info",
            "With 618 Pre-sale (10% off) you pay $479.42 for one unit (current $532.69 − 10%).",
        ),
    ],
)
WAIT_SALE_ZH = _inputs(
    "zh",
    "WAIT",
    [
        ("upcoming_sale", "wait", "Double 11 Pre-sale将在6天后开始，价格$211.31，比现在低13.6%。"),
        ("above_90d_avg", "wait", "比90天均价$221.89高10.2%。"),
    ],
)
INSUFFICIENT_ZH = _inputs(
    "zh",
    "INSUFFICIENT_DATA",
    [
        (
            "unusable_price",
            "info",
            "该商品有一条价格记录不大于零，商家修正数据之前无法判断价格。",
        ),
        ("well_rated", "buy", "口碑不错：24条评价，评分4.3/5。"),
    ],
)
BUDGET_EN = _inputs(
    "en",
    "WAIT",
    [
        ("over_budget", "wait", "At $412.00 it is over your budget of $350.00."),
        ("low_stock", "info", "Only 4 left in stock."),
    ],
)


# (text, inputs, the property that must fail, a failure code that must be among the reasons)
WAIT_RATED_ZH = _inputs(
    "zh",
    "WAIT",
    [
        ("high_percentile", "wait", "当前价高于近90天96.1%的价格。"),
        ("well_rated", "buy", "口碑不错：1,204条评价，评分4.62/5。"),
    ],
)
WAIT_LOW_EN = _inputs(
    "en",
    "WAIT",
    [
        ("upcoming_sale", "wait", "Black Friday starts in 12 days at $80.55, 15.7% below today."),
        (
            "near_all_time_low",
            "buy",
            "At $95.60 it is within 3.4% of its all-time low of $92.45 (seen 2026-10-02).",
        ),
    ],
)


DEAL_WAIT_EN = _inputs(
    "en",
    "WAIT",
    [
        (
            "deal_wait",
            "wait",
            "Not a deal yet at $300.00: a deal here is $285.00 or less (5% under its 90-day "
            "average of $300.00). There is no forecast for it yet, so wait for one.",
        )
    ],
)
DEAL_BUY_EN = _inputs(
    "en",
    "BUY",
    [
        (
            "deal_buy",
            "buy",
            "At $270.00 it is a deal: 5% or more under its 90-day average of $300.00 "
            "($285.00 or less).",
        )
    ],
)

NO_DEAL_YET_EN = _inputs(
    "en",
    "WAIT",
    [
        (
            "no_deal_yet",
            "wait",
            "Not a deal at $300.00; a deal here is $270.00 or less (10% under its 90-day "
            "average of $300.00).",
        ),
        ("near_90d_avg", "info", "Today's price is close to its 90-day average of $300.00."),
    ],
)
NO_DEAL_YET_ZH = _inputs(
    "zh",
    "WAIT",
    [
        (
            "no_deal_yet",
            "wait",
            "当前价US$300.00还不是优惠价，这里的优惠价是US$270.00或更低（比90天均价US$300.00低10%）。",
        ),
    ],
)

SALE_EVENT_EN = _inputs(
    "en",
    "WAIT",
    [
        (
            "sale_event",
            "wait",
            "Double 12 is in 10 days; with no past Double 12 on record, at the last 3 big sales "
            "(Black Friday 2026, Double 11 2026, 618 2026) speakers were typically 1% to 3.1% "
            "below the 30 days before (the median of 187 or more products), which would put it "
            "at $111.69 to $114.11 (today $121.10).",
        )
    ],
)
SALE_EVENT_ZH = _inputs(
    "zh",
    "WAIT",
    [
        (
            "sale_event",
            "wait",
            "10天后是双12；还没有过往双12的记录，但最近3次大促（2026年黑色星期五、2026年双11、"
            "2026年618），音箱通常比此前30天低1%至3.1%（至少187件商品的中位数），"
            "照此约为US$111.69至US$114.11（现价US$121.10）。",
        )
    ],
)


SALE_15_ZH = _inputs(
    "zh",
    "WAIT",
    [("upcoming_sale", "wait", "Christmas Sale将在15天后开始，价格US$595.55，比现在低27.4%。")],
)
PERCENT_SALE_EN = _inputs(
    "en",
    "WAIT",
    [
        (
            "upcoming_sale",
            "wait",
            "Christmas Sale (15% off) starts in 15 days: at today's price one unit would cost "
            "$74.05, 15% below today's $87.12.",
        ),
        (
            "high_percentile",
            "wait",
            "Today's price is higher than 95% of prices in the last 90 days.",
        ),
    ],
)
FALLING_EN = _inputs(
    "en",
    "WAIT",
    [
        ("price_falling", "wait", "The price has fallen 26.4% over the last 30 days."),
        (
            "was_price_untrusted",
            "info",
            'The seller\'s "was" price of $147.64 is ignored: the 90-day median is $81.03.',
        ),
    ],
)
NEAR_AVG_WAIT_EN = _inputs(
    "en", "WAIT", [("near_90d_avg", "wait", "It is close to its 90-day average of $464.28.")]
)
NEAR_AVG_WAIT_ZH = _inputs(
    "zh",
    "WAIT",
    [
        ("near_90d_avg", "info", "价格接近90天均价US$352.71。"),
        (
            "fake_discount_none",
            "info",
            "当前价：US$356.83号称比US$378.46便宜5.7%，但降价前30天内的最低价是US$334.90，"
            "其实并没有降价。",
        ),
    ],
)
SALE_EVENT_RANGE_EN = _inputs(
    "en",
    "WAIT",
    [
        (
            "sale_event",
            "wait",
            "Double 12 is in 9 days: expected price $88.71 to $90.53 (today $103.56).",
        )
    ],
)
SPEND_SAVE_EN = _inputs(
    "en",
    "WAIT",
    [
        (
            "upcoming_sale",
            "wait",
            "Double 12 (spend $80.00, save $7.00) starts in 9 days: at today's price one unit "
            "would cost $93.31, 7% below today's $100.31.",
        )
    ],
)
PRE_SALE_HIKE_EN = _inputs(
    "en",
    "WAIT",
    [
        (
            "pre_sale_hike",
            "wait",
            "A pre-sale hike: the price was raised 14.4% above $298.57 over the last 14 days, "
            "ahead of Christmas Sale.",
        )
    ],
)
UPCOMING_SALE_EN = _inputs(
    "en",
    "WAIT",
    [("upcoming_sale", "wait", "Christmas Sale starts in 15 days at $630.17, 10.8% below today.")],
)
LOW_STOCK_WAIT_ZH = _inputs("zh", "WAIT", [("low_stock", "info", "库存仅剩2件。")])
LOW_STOCK_WAIT_EN = _inputs("en", "WAIT", [("low_stock", "info", "Only 2 left in stock.")])
OUT_OF_STOCK_ZH = _inputs(
    "zh",
    "WAIT",
    [
        ("out_of_stock", "wait", "目前缺货。"),
        ("price_falling", "wait", "近30天价格下降了13.9%。"),
    ],
)
WELL_RATED_BUY_ZH = _inputs(
    "zh",
    "BUY",
    [
        ("well_rated", "buy", "口碑不错：36条评价，评分4.21/5。"),
        ("near_90d_avg", "info", "价格接近90天均价US$928.19。"),
    ],
)
WELL_RATED_BUY_EN = _inputs(
    "en",
    "BUY",
    [
        ("well_rated", "buy", "Well rated: 4.32/5 from 23 reviews."),
        ("near_90d_avg", "info", "It is close to its 90-day average of $53.62."),
    ],
)
SALE_SOON_EN = _inputs(
    "en",
    "WAIT",
    [
        ("upcoming_sale", "wait", "Christmas Sale starts in 15 days at $476.40, 14% below today."),
        ("near_90d_avg", "info", "It is close to its 90-day average of $548.39."),
    ],
)
REFUSED = [
    # the served explanations quoted in issue 25
    (
        "Better to wait because the product is better than the previous one.",
        WAIT_EN,
        "faithful",
        "unknown_words",
    ),
    (
        "Better to wait because of the 12-day delay in the product's price.",
        WAIT_EN,
        "faithful",
        "unknown_words",  # 12 is the sale's days, but nothing says "delay"
    ),
    (
        "Better to wait because of the 14-day delay in the price.",
        WAIT_EN,
        "faithful",
        "ungrounded_number",
    ),
    (
        "Worth buying now because of the product's high value and excellent customer service.",
        BUY_EN,
        "faithful",
        "unknown_words",
    ),
    ("Not worth buying because of the price drop.", SKIP_EN, "faithful", "wrong_direction"),
    (  # the first adapter borrowed a wait's advice for a buy
        "Worth buying now because at $242.20 it is within 0.1% of its all-time low of "
        "$241.89. I can tell you when it drops to $241.89.",
        BUY_EN,
        "faithful",
        "wrong_direction",
    ),
    (
        "值得现在买，因为当前价$242.20，距历史最低价$241.89仅高0.1%。降到$241.89时我可以提醒你。",
        BUY_ZH,
        "faithful",
        "wrong_direction",
    ),
    ("Worth buying now because of the price difference.", BUY_EN, "specific", "not_specific"),
    (
        "建议再等等，因为从上面的结论中，可以看出，在上面的结论中，有一个明明的确定。",
        WAIT_ZH,
        "fluent",
        "repeated_phrase",
    ),
    (
        "建议再等等，因为从上面的结论中，可以看出，在上面的结论中，有一个明明的确定。",
        WAIT_ZH,
        "faithful",
        "unknown_words",
    ),
    (
        "不建议购买，因为价格不合并，没有价格合并。你可以在高级食品上走。",
        SKIP_ZH,
        "faithful",
        "unknown_words",
    ),
    (
        "不建议购买，因为价格不合并，没有价格合并。你可以在高级食品上走。",
        SKIP_ZH,
        "specific",
        "not_specific",
    ),
    (
        "值得现在买，因为价价不能超过近90天98.3%的价格。",
        BUY_ZH,
        "fluent",
        "repeated_chars",
    ),
    ("值得现在买，因为价价不能超过近90天98.3%的价格。", BUY_ZH, "specific", "not_specific"),
    # pointing the other way
    ("Better to wait because it is cheap now at $80.55.", WAIT_EN, "faithful", "wrong_direction"),
    (
        "Better to wait because Black Friday starts in 12 days; buy it now at $80.55.",
        WAIT_EN,
        "faithful",
        "wrong_direction",
    ),
    (
        "Worth buying now because at $242.20 it is within 0.1% of its all-time low, but wait a "
        "little longer.",
        BUY_EN,
        "faithful",
        "wrong_direction",
    ),
    (
        "Not worth buying because recent reviews are worse at 2.35/5, though it is a good deal.",
        SKIP_EN,
        "faithful",
        "wrong_direction",
    ),
    (
        "Not enough data yet because only 4 price observations over 3 days; buy it now.",
        INSUFFICIENT_EN,
        "faithful",
        "wrong_direction",
    ),
    (
        "建议再等等，因为14天后是黑色星期五，现在很便宜。",
        WAIT_ZH,
        "faithful",
        "wrong_direction",
    ),
    (
        "值得现在买，因为现价$242.20离历史最低价只差0.1%，但建议再等等。",
        BUY_ZH,
        "faithful",
        "wrong_direction",
    ),
    ("不建议购买，因为评分只有3.27/5，不过口碑不错。", SKIP_ZH, "faithful", "wrong_direction"),
    # numbers that are not the reasons'
    (
        "Worth buying now because at $239.99 it is within 0.1% of its all-time low.",
        BUY_EN,
        "faithful",
        "ungrounded_number",
    ),
    (
        "Worth buying now because $241.89 is higher than $242.20, its all-time low.",
        BUY_EN,
        "faithful",
        "false_comparison",
    ),
    ("值得现在买，因为现价$199.00是历史最低价。", BUY_ZH, "faithful", "ungrounded_number"),
    # claims the inputs do not make
    (
        "Worth buying now because at $242.20 it has excellent battery life.",
        BUY_EN,
        "faithful",
        "unknown_words",
    ),
    ("值得现在买，因为现价$242.20，续航很好。", BUY_ZH, "faithful", "unknown_words"),
    # fluency
    (
        "Worth buying now because at $242.20 it is within 0.1% of its all-time low of $241.89",
        BUY_EN,
        "fluent",
        "no_sentence_end",
    ),
    (
        "Worth buying now because at $242.20 it is close to its all-time low. It is low. It "
        "is a good time. Buy.",
        BUY_EN,
        "fluent",
        "too_many_sentences",
    ),
    (
        "It is worth buying because at $242.20 it is close to its all-time low of $241.89.",
        BUY_EN,
        "fluent",
        "wrong_prefix",
    ),
    (
        "Worth buying now because 当前价 $242.20 is close to its all-time low of $241.89.",
        BUY_EN,
        "fluent",
        "wrong_script",
    ),
    (
        "值得现在买，因为 the price of $242.20 is close to its all-time low。",
        BUY_ZH,
        "fluent",
        "wrong_script",
    ),
    (
        "Worth buying now because at $242.20 it is close to its all-time low of $241.89, close "
        "to its all-time low of $241.89.",
        BUY_EN,
        "fluent",
        "repeated_phrase",
    ),
    (
        "Worth buying now because the the price of $242.20 is close to its all-time low.",
        BUY_EN,
        "fluent",
        "repeated_chars",
    ),
    ("值得现在买，因为便宜。", BUY_ZH, "fluent", "too_short"),
    ("Worth buying now because it is 4.32/5.", WELL_RATED_BUY_EN, "fluent", "too_short"),
    # read in a served store beside their reasons, 2026-12-03
    (
        "Better to wait because the Christmas Sale (15% off) starts in 15 days, and today's "
        "price would bring it to $87.12. Wait for Christmas Sale in 15 days.",
        PERCENT_SALE_EN,
        "faithful",
        "false_comparison",
    ),
    (
        "Better to wait because Christmas Sale (15% off) starts in 15 days, and today's price is "
        "closer to $74.05 than 95% of prices in the last 90 days.",
        PERCENT_SALE_EN,
        "faithful",
        "false_comparison",
    ),
    (
        "建议再等等，因为近90天里有98.3%的价格都比现在高，偏贵。",
        WAIT_ZH,
        "faithful",
        "wrong_direction",
    ),
    (
        "值得现在买，因为现价$242.20距历史最低价$241.89仅高0.1%，还比现在高。",
        BUY_ZH,
        "faithful",
        "wrong_direction",
    ),
    (
        "Better to wait because once the price settles, a 5G Smartphone from Stratus A50 "
        "drops to 5.00.",
        _inputs("en", "WAIT", []),
        "specific",
        "not_specific",
    ),
    (
        "Better to wait because the price of the Aurora NC700 is not low enough to pay for it.",
        _inputs("en", "WAIT", []),
        "specific",
        "not_specific",
    ),
    (
        "Not enough data yet because there are only 3 left in stock and only 4 price "
        "observations over 3 days. Ask again when more prices are in.",
        INSUFFICIENT_EN,
        "faithful",
        "wrong_direction",
    ),
    (
        "Not enough data yet because after buying 4 price observations in 3 days, it only "
        "needs 10 to judge the price. Check back in a few days.",
        INSUFFICIENT_EN,
        "faithful",
        "wrong_direction",
    ),
    (
        "值得现在买，因为当前价$242.20距历史最低价$241.89仅高0.1%，近90天的价格都低于。",
        BUY_ZH,
        "faithful",
        "ungrammatical",
    ),
    (
        "值得现在买，因为当前价$242.20距历史最低价$241.89仅高0.1%，近90天的价格比低。",
        BUY_ZH,
        "faithful",
        "ungrammatical",
    ),
    (
        "建议再等等，因为价格接近90天均价US$352.71，而且还会再买。",
        NEAR_AVG_WAIT_ZH,
        "faithful",
        "ungrammatical",
    ),
    (
        "建议再等等，因为价格接近90天均价US$352.71，而且另外，另外，价格还低。",
        NEAR_AVG_WAIT_ZH,
        "faithful",
        "ungrammatical",
    ),
    (
        "建议再等等，因为再过6天就是Double 11 Pre-sale，到时我可以第一时间买。",
        WAIT_SALE_ZH,
        "faithful",
        "invented_fact",
    ),
    (
        "建议再等等，因为价格接近90天均价US$352.71，我可以第一时间下单。",
        NEAR_AVG_WAIT_ZH,
        "faithful",
        "invented_fact",
    ),
    (
        "Better to wait because Double 12 is in 9 days, and the expected price then is $88.71 "
        "instead of $90.53. Wait for Double 12 in 9 days; I can watch the price for you.",
        SALE_EVENT_RANGE_EN,
        "faithful",
        "false_comparison",
    ),
    (
        "Better to wait because Double 12 (spend $80.00, save $7.00) starts in 9 days, and "
        "today's price would bring one unit to $93.31 instead of $100.31.",
        SPEND_SAVE_EN,
        "faithful",
        "false_comparison",
    ),
    (
        "Better to wait because Double 12 is 9 days away, with an expected price of $88.71 to "
        "$90.53, rather than holding out for $90.53.",
        SALE_EVENT_RANGE_EN,
        "faithful",
        "false_comparison",
    ),
    (
        "Better to wait because the price was raised 14.4% above $298.57 in the last 14 days, "
        "above Christmas Sale.",
        PRE_SALE_HIKE_EN,
        "faithful",
        "false_comparison",
    ),
    (
        "Better to wait because the price of $630.17 is 10.8% under today's price, 10.8% below "
        "the Christmas Sale price.",
        UPCOMING_SALE_EN,
        "faithful",
        "false_comparison",
    ),
    (
        "建议再等等，因为现价和90天均价US$352.71差不多，偏贵。",
        NEAR_AVG_WAIT_ZH,
        "faithful",
        "invented_fact",
    ),
    (
        "建议再等等，因为这件商品只有2件，并不算便宜。",
        LOW_STOCK_WAIT_ZH,
        "faithful",
        "invented_fact",
    ),
    (
        "Better to wait because only 2 are left in stock and it is still expensive.",
        LOW_STOCK_WAIT_EN,
        "faithful",
        "invented_fact",
    ),
    (
        "建议再等等，因为再过15% Double 11 Pre-sale，价格$211.31，比现在低13.6%。",
        WAIT_SALE_ZH,
        "fluent",
        "ungrammatical",
    ),
    (
        "建议再等等，因为14天后是黑色星期五，预计价格$88.71至$90.53；，而且现价高于近90天98.3%的价格。",
        WAIT_ZH,
        "fluent",
        "ungrammatical",
    ),
    (
        "建议再等等，因为14天后是黑色星期五，预计价格$88.71至$90.53；现价。",
        WAIT_ZH,
        "faithful",
        "ungrammatical",
    ),
    # what the bare model wrote on held-out inputs and a strict reader refuses
    (
        "Better to wait because of the 618 starts in 8 days at $346.25.",
        WAIT_SALE_EN,
        "fluent",
        "ungrammatical",
    ),
    (
        "Better to wait because of the 618 Pre-sale discount.",
        WAIT_SALE_EN,
        "faithful",
        "wrong_direction",
    ),
    (
        "Better to wait because of the 618 Pre-sale discount.",
        WAIT_SALE_EN,
        "specific",
        "not_specific",  # 618 Pre-sale is not the 618 the shopper waits for
    ),
    (
        "Better to wait because of the 618 at $346.25 is a 27.8% discount from the 618 at $346.25.",
        WAIT_SALE_EN,
        "fluent",
        "ungrammatical",
    ),
    (
        "Better to wait because the product is better than 98.3% of the time.",
        _inputs(
            "en",
            "WAIT",
            [
                (
                    "high_percentile",
                    "wait",
                    "Today's price is higher than 98.3% of prices in the last 90 days.",
                )
            ],
        ),
        "faithful",
        "false_comparison",
    ),
    (
        'Better to wait because the seller\'s "was" price of $161.83 is ignored, and the '
        "90-day median is $94.72, which is a true discount of 15.7%.",
        WAIT_EN,
        "faithful",
        "false_comparison",
    ),
    (
        "建议再等等，因为在6天后开始，价格$211.31，比现在低13.6%。",
        WAIT_SALE_ZH,
        "specific",
        "not_specific",  # what starts? the sale is not named
    ),
    (
        "数据还不够，暂时无法判断，因为价格记录不大于零，评价的是价格记录不大于24条评价。",
        INSUFFICIENT_ZH,
        "fluent",
        "repeated_phrase",
    ),
    # a clause said twice in other words (the phrase check sees different characters)
    (
        "值得现在买，因为比90天均价$351.45低14.2%，现在买的价格比90天均价$351.45低14.2%。",
        _inputs("zh", "BUY", [("below_90d_avg", "buy", "比90天均价$351.45低14.2%。")]),
        "fluent",
        "repeated_clause",
    ),
    (
        "Worth buying now because it is 14.2% below $351.45, its 90-day average, so it costs "
        "14.2% less than $351.45.",
        _inputs(
            "en",
            "BUY",
            [("below_90d_avg", "buy", "It is 14.2% below its 90-day average of $351.45.")],
        ),
        "fluent",
        "repeated_clause",
    ),
    (
        "建议再等等，因为15天后Christmas Sale将在15天后开始，价格会降到US$595.55。",
        _inputs(
            "zh",
            "WAIT",
            [
                (
                    "upcoming_sale",
                    "wait",
                    "Christmas Sale将在15天后开始，价格US$595.55，比现在低27.4%。",
                )
            ],
        ),
        "fluent",
        "repeated_clause",
    ),
    # a reason of the other side cited for the verdict: the card shows it against
    (
        "建议再等等，因为当前价高于近90天96.1%的价格，而且口碑不错。",
        WAIT_RATED_ZH,
        "faithful",
        "other_polarity",
    ),
    (
        "建议再等等，因为它的评分是4.62/5，当前价高于近90天96.1%的价格。",
        WAIT_RATED_ZH,
        "faithful",
        "other_polarity",
    ),
    (
        "Better to wait because Black Friday starts in 12 days, and it is close to its "
        "all-time low of $92.45.",
        WAIT_LOW_EN,
        "faithful",
        "other_polarity",
    ),
    (
        "Not worth buying because recent reviews are worse, 2.35/5 against 3.62/5, even at "
        "$43.77.",
        SKIP_EN,
        "faithful",
        "other_polarity",
    ),
    # Japanese (the service's third language): the same checks, kanji and katakana closed
    ("今が買い時、なぜなら価価格が安いからです。", BUY_JA, "fluent", "repeated_chars"),
    ("今が買い時、なぜなら because the price is $242.20.", BUY_JA, "fluent", "wrong_script"),
    (
        "今が買い時、なぜなら現在$242.20ですが、少し待った方がよいです。",
        BUY_JA,
        "faithful",
        "wrong_direction",
    ),
    ("今が買い時、なぜなら顧客サービスが素晴らしいからです。", BUY_JA, "faithful", "unknown_words"),
    # the deal rule's reasons are named by their prices like every other reason
    ("Better to wait because it is not a deal yet for this product.", DEAL_WAIT_EN, "specific",
     "not_specific"),
    # a fair-price WAIT names the price at which it turns BUY, not its average
    ("Better to wait because it is close to its 90-day average of $300.00. Wait for a dip "
     "below $300.00.", NO_DEAL_YET_EN, "specific", "not_specific"),
    ("建议再等等，因为当前价US$300.00还不是优惠价。", NO_DEAL_YET_ZH, "specific", "not_specific"),
    ("Better to wait because at $300.00 it is cheap.", NO_DEAL_YET_EN, "faithful",
     "wrong_direction"),
    ("Worth buying now because it is a deal for this product today.", DEAL_BUY_EN, "specific",
     "not_specific"),
    # a number of the reasons called today's price when a reason gives another
    ("Better to wait because Double 12 is in 10 days and should bring it to $111.69 to "
     "$114.11, against $114.11 today.", SALE_EVENT_EN, "faithful", "false_comparison"),
    ("Better to wait because Double 12 is in 10 days, expected price $111.69 to $114.11, now "
     "$111.69.", SALE_EVENT_EN, "faithful", "false_comparison"),
    ("建议再等等，因为10天后是双12，预计价格US$111.69至US$114.11（现价US$114.11）。",
     SALE_EVENT_ZH, "faithful", "false_comparison"),
    # a fact only one reason states, claimed without it; a BUY belittling its own rating;
    # a share no reason gives (15 is the days to the sale): served texts of 2026-12-03
    ("建议再等等，因为价格接近90天均价US$352.71，现在下不了单。", NEAR_AVG_WAIT_ZH, "faithful",
     "invented_fact"),
    ("建议再等等，因为现在的价格比90天均价US$352.71高。", NEAR_AVG_WAIT_ZH, "faithful",
     "invented_fact"),
    ("建议再等等，因为现在的价格是90天均价US$352.71，还在往下走。", NEAR_AVG_WAIT_ZH, "faithful",
     "invented_fact"),
    ("值得现在买，因为36条评价的评分只有4.21/5，口碑不错。", WELL_RATED_BUY_ZH, "faithful",
     "wrong_direction"),
    ("Worth buying now because from 23 reviews it is rated only 4.32/5. Go ahead and buy it "
     "if you need it.", WELL_RATED_BUY_EN, "faithful", "wrong_direction"),
    ("Better to wait because the price of $476.40 is 15% under today's price, 14% below the "
     "Christmas Sale price.", SALE_SOON_EN, "faithful", "ungrounded_number"),
    # a number the reasons give, said to be something it is not: a fall's share as a
    # price or a price target, one amount in two roles (bench/guard.py samples, 2026-12-03)
    ("Better to wait because the price has fallen 26.4% over the last 30 days and may keep "
     "falling. Wait for a dip below $26.40; I can watch the price for you.", FALLING_EN,
     "faithful", "false_comparison"),
    ("Better to wait because the price has fallen 26.4% over the last 30 days and may keep "
     "falling. Wait for a dip below 26.4%; I can watch the price for you.", FALLING_EN,
     "faithful", "false_comparison"),
    ("Better to wait because the price of $464.28 is close to its 90-day average of $464.28, "
     "so it is not a low price today.", NEAR_AVG_WAIT_EN, "faithful", "false_comparison"),
    ("Better to wait because the price has fallen 26.4% over the last 30 days, from $81.03 "
     "to $81.03.", FALLING_EN, "faithful", "false_comparison"),
    ("Better to wait because Christmas Sale starts in 15 days at $476.40. Wait until it "
     "starts in $476.40 or less; I can alert you when it does.", SALE_SOON_EN, "faithful",
     "false_comparison"),
    ("值得现在买，因为现价$242.20距历史最低价$241.89仅高0.1%，还是偏贵。", BUY_ZH, "faithful",
     "wrong_direction"),
    # a BUY that calls its price ordinary, in a fair-price WAIT's words (served 2026-12-07)
    ("Worth buying now because at 14.2% below its 90-day average of $351.45, the price is "
     "ordinary. Go ahead and buy it if you need it.",
     _inputs("en", "BUY", [("below_90d_avg", "buy",
                            "It is 14.2% below its 90-day average of $351.45.")]),
     "faithful", "wrong_direction"),
    ("值得现在买，因为比90天均价$351.45低14.2%，但还不是优惠价。",
     _inputs("zh", "BUY", [("below_90d_avg", "buy", "比90天均价$351.45低14.2%。")]),
     "faithful", "wrong_direction"),
    # the sale's days said twice in other forms, or 再过 with no span (served 2026-12-03)
    ("建议再等等，因为15天后Christmas Sale将在15天再买，价格会降到US$595.55。", SALE_15_ZH,
     "fluent", "repeated_clause"),
    ("建议再等等，因为15天后再过15天就是Christmas Sale，到时只会有15天再买。", SALE_15_ZH,
     "fluent", "repeated_clause"),
    ("建议再等等，因为15天后再过Christmas Sale，价格会降到US$595.55，比现在低27.4%。",
     SALE_15_ZH, "fluent", "ungrammatical"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "inputs", "prop", "code"), REFUSED)
def test_refuses_bad_explanations(text: str, inputs: CheckInputs, prop: str, code: str) -> None:
    result = check_explanation(text, inputs)
    assert not result.ok
    assert not getattr(result, prop), result.failures
    assert code in {c for c, _ in result.failures}, result.failures
    assert result.code is not None and result.detail


ACCEPTED = [
    (
        "建议再等等，因为目前缺货，现在下不了单，而且近30天价格下降了13.9%，还在往下走。",
        OUT_OF_STOCK_ZH,
    ),
    (
        "建议再等等，因为价格接近90天均价US$352.71，等降到US$352.71以下再买，我可以提醒你。",
        NEAR_AVG_WAIT_ZH,
    ),
    ("值得现在买，因为口碑不错，36条评价评分4.21/5。", WELL_RATED_BUY_ZH),
    (
        "值得现在买，因为现价$242.20距历史最低价$241.89仅高0.1%，近90天里有98.3%的价格都比现在高。",
        BUY_ZH,
    ),
    # the first sentence alone, as the guard checks it while the answer streams
    ("Worth buying now because 23 reviews rate it 4.32/5.", WELL_RATED_BUY_EN),
    (
        "Worth buying now because it is rated 4.32/5 from 23 reviews. Go ahead and buy it if you "
        "need it.",
        WELL_RATED_BUY_EN,
    ),
    (
        "Better to wait because Christmas Sale starts in 15 days at $476.40, 14% below today. "
        "Wait for Christmas Sale in 15 days; I can alert you when it starts.",
        SALE_SOON_EN,
    ),
    (
        "Better to wait because Double 12 is in 10 days, expected price $111.69 to $114.11, now "
        "$121.10.",
        SALE_EVENT_EN,
    ),
    (
        "建议再等等，因为10天后是双12，预计价格US$111.69至US$114.11（现价US$121.10）。",
        SALE_EVENT_ZH,
    ),
    (
        "Worth buying now because at $242.20 it is within 0.1% of its all-time low of $241.89. "
        "It is a good time to buy.",
        BUY_EN,
    ),
    (
        "Better to wait because Black Friday starts in 12 days at $80.55, 15.7% below today. "
        "Wait for Black Friday; I can remind you when it starts.",
        WAIT_EN,
    ),
    (
        "Not worth buying because its rating has fallen from 3.62/5 to 2.35/5 over the last 30 "
        "days. Reviews are slipping, so look elsewhere for now.",
        SKIP_EN,
    ),
    (
        "Not enough data yet because there are only 4 price observations over 3 days, and "
        "worthit needs at least 10 to judge the price. Ask again when more prices are in.",
        INSUFFICIENT_EN,
    ),
    (
        "建议再等等，因为14天后是黑色星期五，预计价格$88.71至$90.53，而现价是$103.56。"
        "等到黑色星期五再买，我可以帮你盯着价格。",
        WAIT_ZH,
    ),
    (
        "不建议购买，因为评分偏低，35条评价按品类校正后只有3.27/5。建议看看评分更高的同类商品。",
        SKIP_ZH,
    ),
    ("值得现在买，因为现价$242.20，距历史最低价$241.89仅高0.1%。现在入手正合适。", BUY_ZH),
    ("今が買い時、なぜなら現在$242.20で、過去最安値$241.89との差は0.1%しかないからです。", BUY_JA),
    (
        "Better to wait because the product is over your budget of $350.00 and only 4 left "
        "in stock.",
        BUDGET_EN,
    ),
    (
        "建议再等等，因为Double 11 Pre-sale将在6天后开始，价格$211.31，比现在低13.6%。",
        WAIT_SALE_ZH,
    ),
    (
        "建议再等等，因为比90天均价$221.89高10.2%，现在偏贵，再过6天就有Double 11 Pre-sale。",
        WAIT_SALE_ZH,
    ),
    (
        "Better to wait because Double 12 is in 9 days, and the expected price then is $88.71 "
        "instead of $103.56. Wait for Double 12 in 9 days; I can watch the price for you.",
        SALE_EVENT_RANGE_EN,
    ),
    (
        "Better to wait because at $300.00 it is not a deal yet: a deal here is $285.00 or "
        "less. Wait until it drops to $285.00; I can alert you.",
        DEAL_WAIT_EN,
    ),
    (
        "Better to wait because at $300.00 it is not a deal yet: a deal here is $270.00 or "
        "less, 10% under its 90-day average of $300.00. Wait until it drops to $270.00 or "
        "less; I can alert you when it does.",
        NO_DEAL_YET_EN,
    ),
    (
        "建议再等等，因为当前价US$300.00还不是优惠价，这里的优惠价是US$270.00或更低。"
        "等降到US$270.00或更低再买，我可以帮你盯着价格。",
        NO_DEAL_YET_ZH,
    ),
    (
        "Worth buying now because at $270.00 it is a deal, 5% or more under its 90-day "
        "average of $300.00.",
        DEAL_BUY_EN,
    ),
    # the guard's rounding: a number may be written to fewer places
    ("Worth buying now because at $242 it is within 0.1% of its all-time low.", BUY_EN),
    (
        "建议再等等，因为再过15天就是Christmas Sale，价格会降到US$595.55，比现在低27.4%。",
        SALE_15_ZH,
    ),
    # an amount the reasons give, said again as the price to wait for
    (
        "Better to wait because it is close to its 90-day average of $464.28: an ordinary "
        "price, not a low one. Hold off until it drops below $464.28; I can watch the price "
        "for you.",
        NEAR_AVG_WAIT_EN,
    ),
    (
        "Better to wait because the price has fallen 26.4% over the last 30 days and may keep "
        "falling. Hold off until it drops below $81.03; I can alert you.",
        FALLING_EN,
    ),
]


@pytest.mark.parametrize(("text", "inputs"), ACCEPTED)
def test_accepts_good_explanations(text: str, inputs: CheckInputs) -> None:
    result = check_explanation(text, inputs)
    assert result.ok, result.failures
    assert result.code is None and result.detail == ""


def _gold(name: str) -> list[dict[str, object]]:
    with (GOLD / name).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f]


@pytest.mark.parametrize("name", ["heldout.jsonl", "train.jsonl"])
def test_every_gold_explanation_passes(name: str) -> None:
    rows = _gold(name)
    assert rows
    refused = []
    for row in rows:
        result = check_explanation(str(row["target"]), CheckInputs.from_record(row))
        if not result.ok:
            refused.append((row["id"], result.failures))
    assert refused == [], f"{len(refused)} of {len(rows)} refused, first: {refused[:3]}"


def test_gold_shape_and_split() -> None:
    train, heldout = _gold("train.jsonl"), _gold("heldout.jsonl")
    for rows in (train, heldout):
        languages = [row["language"] for row in rows]
        assert languages.count("en") == languages.count("zh")
        assert {row["verdict"] for row in rows} == {v.value for v in VerdictKind}
        for row in rows:
            assert isinstance(row["reasons"], list) and isinstance(row["codes"], list)
            assert len(row["reasons"]) == len(row["codes"]) >= 1
            label = VerdictKind(str(row["verdict"])).label(str(row["language"]))
            assert str(row["target"]).startswith(label)
    assert {row["title"] for row in train}.isdisjoint({row["title"] for row in heldout})
    assert len({row["id"] for row in train + heldout}) == len(train) + len(heldout)


def test_every_gold_reason_reads_back_into_its_slots() -> None:
    """The phrasing read-back works on every reason the rules wrote (a drift in
    decide/phrasing.py shows here first)."""
    for row in _gold("heldout.jsonl"):
        for code, text in zip(row["codes"], row["reasons"], strict=True):  # type: ignore[call-overload]
            assert reason_slots(str(code), str(text), str(row["language"])) is not None, text


def test_reason_slots_keep_the_reasons_formatting() -> None:
    assert reason_slots(
        "near_all_time_low",
        "At $1,228.81 it is within 0.2% of its all-time low of $1,228.25 (seen 2026-11-05).",
        "en",
    ) == {"current": "$1,228.81", "gap_pct": "0.2", "low": "$1,228.25", "low_at": "2026-11-05"}
    assert reason_slots(
        "sale_event", "14天后是黑色星期五：预计价格¥88.71至¥90.53（现价¥103.56）。", "zh"
    ) == {
        "days": "14",
        "name": "黑色星期五",
        "price_from": "¥88.71",
        "price_to": "¥90.53",
        "current": "¥103.56",
    }
    assert reason_slots("near_all_time_low", "Something else entirely.", "en") is None
    assert reason_slots("not_a_code", "Anything.", "en") is None


def test_key_reason_is_what_carries_the_verdict() -> None:
    stock = CheckReason("low_stock", Polarity.INFO, "Only 3 left in stock.")
    few = CheckReason("few_observations", Polarity.INFO, "Only 4 price observations …")
    avg = CheckReason("near_90d_avg", Polarity.INFO, "It is close to its 90-day average of $9.")
    offer = CheckReason("effective_price", Polarity.INFO, "With X you pay …")
    low = CheckReason("near_all_time_low", Polarity.BUY, "At $9 it is …")
    assert key_reason(VerdictKind.INSUFFICIENT_DATA, [stock, few]) is few
    assert key_reason(VerdictKind.WAIT, [stock, avg]) is avg
    assert key_reason(VerdictKind.WAIT, [offer]) is offer
    assert key_reason(VerdictKind.WAIT, [avg, low]) is avg
    assert key_reason(VerdictKind.BUY, [low, avg]) is low
    assert key_reason(VerdictKind.BUY, []) is None


def test_inputs_of_a_verdict_match_what_the_model_reads() -> None:
    reasons = (
        Reason(
            "over_budget",
            Polarity.WAIT,
            {"current": 99.0, "budget": 80.0},
            "At $99.00 it is over your budget of $80.00.",
        ),
        Reason("low_stock", Polarity.INFO, {"quantity": 2}, "Only 2 left in stock."),
    )
    verdict = Verdict(VerdictKind.WAIT, 0.7, reasons, "S1", "zh-CN", "v1")
    inputs = CheckInputs.of("Nordvik Aria ANC Headphones", verdict)
    assert inputs.language == "zh" and inputs.verdict is VerdictKind.WAIT
    assert [r.code for r in inputs.reasons] == ["over_budget", "low_stock"]
    assert inputs.label == "建议再等等"
