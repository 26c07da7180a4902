"""One sentence per reason code, in English and Chinese.

The numbers are formatted through here (money by `worthit.text.money`), so what a
reason says is exactly what its `numbers` hold, and the grounding guard can trust both.
"""

from __future__ import annotations

from collections.abc import Mapping

_EN: dict[str, str] = {
    "no_price": "There is no recorded price for this product yet.",
    "unusable_price": (
        "A recorded price of this product is not above zero, so the price cannot be judged "
        "until the seller's feed corrects it."
    ),
    "few_observations": (
        "Only {observations} price observations over {days_tracked} days; worthit needs at "
        "least {min_observations} before judging the price."
    ),
    "near_all_time_low": (
        "At {current} it is within {gap_pct}% of its all-time low of {low} (seen {low_at})."
    ),
    "at_all_time_low": "At {current} it is at its all-time low (last seen {low_at}).",
    "low_not_established": (
        "Tracked for {days_tracked} days, so its all-time low of {low} is not yet a reliable "
        "benchmark (worthit wants {min_days} days)."
    ),
    "below_90d_avg": "It is {delta_pct}% below its 90-day average of {avg90}.",
    "above_90d_avg": "It is {delta_pct}% above its 90-day average of {avg90}.",
    "near_90d_avg": "It is close to its 90-day average of {avg90}.",
    "low_percentile": "Today's price is lower than {share}% of prices in the last 90 days.",
    "high_percentile": "Today's price is higher than {share}% of prices in the last 90 days.",
    "price_falling": "The price has fallen {drop_pct}% over the last 30 days.",
    "was_price_untrusted": (
        'The seller\'s "was" price of {list_price} is ignored: the 90-day median is {median90}.'
    ),
    "upcoming_sale": "{name} starts in {days} days at {promo_price}, {saving_pct}% below today.",
    "active_promotion": "{name} is on until {ends} at {promo_price}.",
    "upcoming_offer": (
        "{name} ({terms}) starts in {days} days: at today's price one unit would cost "
        "{promo_price}, {saving_pct}% below today's {today}."
    ),
    "effective_price": (
        "With {name} ({terms}) you pay {effective} for one unit (current {current} − {cut})."
    ),
    "offer_short": (
        "{name} ({terms}) saves nothing on one unit: at {current} it is below the {floor} "
        "an order needs."
    ),
    "terms_percent": "{percent_off}% off",
    "terms_threshold": "spend {threshold}, save {save}",
    "terms_coupon": "a coupon for {save} off",
    "terms_coupon_min": "a coupon for {save} off {min_spend} or more",
    "terms_coupon_percent": "a coupon for {percent_off}% off",
    "terms_coupon_percent_min": "a coupon for {percent_off}% off {min_spend} or more",
    "fake_discount": (
        "{name} at {price} claims {claimed_pct}% off {reference}, but the lowest price in the "
        "{prior_days} days before the reduction was {prior_low}: a true discount of {true_pct}%."
    ),
    "fake_discount_none": (
        "{name} at {price} claims {claimed_pct}% off {reference}, but the lowest price in the "
        "{prior_days} days before the reduction was {prior_low}: no real discount."
    ),
    "pre_sale_hike": (
        "A pre-sale hike: the price was raised {raised_pct}% above {raised_from} over the last "
        "{raise_days} days, ahead of {name}."
    ),
    "pre_sale_hike_on": (
        "{name} follows a pre-sale hike: the price was raised {raised_pct}% above {raised_from} "
        "in the {raise_days} days before it."
    ),
    "sale_event": (
        "{name} is in {days} days; at its last {count} {name} sales this product was "
        "{low_pct}% to {high_pct}% below the {window_days} days before, which would put it at "
        "{price_from} to {price_to} (today {current})."
    ),
    "sale_event_once": (
        "{name} is in {days} days; at the last {name} this product was {high_pct}% below the "
        "{window_days} days before, which would put it at {price_from} (today {current})."
    ),
    "sale_event_category": (
        "{name} is in {days} days; this product has no past {name} price, but at the last "
        "{count} {name} sales {category} were typically {low_pct}% to {high_pct}% below the "
        "{window_days} days before (the median of {products} or more products), which would "
        "put it at {price_from} to {price_to} (today {current})."
    ),
    "sale_event_category_once": (
        "{name} is in {days} days; this product has no past {name} price, but at the last "
        "{name} {category} were typically {high_pct}% below the {window_days} days before "
        "(the median of {products} products), which would put it at {price_from} "
        "(today {current})."
    ),
    "sale_event_category_events": (
        "{name} is in {days} days; with no past {name} on record, at the last {count} big "
        "sales ({events}) {category} were typically {low_pct}% to {high_pct}% below the "
        "{window_days} days before (the median of {products} or more products), which would "
        "put it at {price_from} to {price_to} (today {current})."
    ),
    "sale_event_category_events_once": (
        "{name} is in {days} days; with no past {name} on record, at the last big sale "
        "({events}) {category} were typically {high_pct}% below the {window_days} days "
        "before (the median of {products} products), which would put it at {price_from} "
        "(today {current})."
    ),
    "quality_floor": (
        "Its rating is low: {rating}/5 from {count} reviews, adjusted for its category."
    ),
    "rating_falling": (
        "Recent reviews are worse: {recent}/5 over the last {recent_days} days against "
        "{earlier}/5 before."
    ),
    "well_rated": "Well rated: {rating}/5 from {count} reviews.",
    "out_of_stock": "It is out of stock right now.",
    "over_budget": "At {current} it is over your budget of {budget}.",
    "top_budget": "Only products priced at or under {budget} today.",
    "low_stock": "Only {quantity} left in stock.",
    "compare_pick": (
        "{title} is the better choice: “{kind}” against “{other_kind}” for {other_title}."
    ),
    "compare_pick_rating": (
        "{title} is the better choice: both are “{kind}”, and it is rated {rating}/5 against "
        "{other_rating}/5 for {other_title}."
    ),
    "compare_tie": (
        "Neither is clearly better: {title} is “{kind}”, {other_title} is “{other_kind}”."
    ),
    "top_sales": "#{rank} {title}: {value} sold in the last {days} days.",
    "top_rating": "#{rank} {title}: rated {value}/5 from {count} reviews in the last {days} days.",
    "top_empty": "No {category} had sales or reviews in the last {days} days.",
    "top_empty_budget": (
        "No {category} priced at or under {budget} today had sales or reviews in the last "
        "{days} days."
    ),
}

_ZH: dict[str, str] = {
    "no_price": "该商品还没有任何价格记录。",
    "unusable_price": "该商品有一条价格记录不大于零，商家修正数据之前无法判断价格。",
    "few_observations": (
        "{days_tracked}天内只有{observations}条价格记录；至少需要{min_observations}条才能判断价格。"
    ),
    "near_all_time_low": "当前价{current}，距历史最低价{low}（{low_at}）仅高{gap_pct}%。",
    "at_all_time_low": "当前价{current}，正处于历史最低价（最近一次为{low_at}）。",
    "low_not_established": (
        "只跟踪了{days_tracked}天，历史最低价{low}还不可靠（需要{min_days}天）。"
    ),
    "below_90d_avg": "比90天均价{avg90}低{delta_pct}%。",
    "above_90d_avg": "比90天均价{avg90}高{delta_pct}%。",
    "near_90d_avg": "价格接近90天均价{avg90}。",
    "low_percentile": "当前价低于近90天{share}%的价格。",
    "high_percentile": "当前价高于近90天{share}%的价格。",
    "price_falling": "近30天价格下降了{drop_pct}%。",
    "was_price_untrusted": "商家标注的原价{list_price}不可信：近90天价格中位数是{median90}。",
    "upcoming_sale": "{name}将在{days}天后开始，价格{promo_price}，比现在低{saving_pct}%。",
    "active_promotion": "{name}进行中，截至{ends}，价格{promo_price}。",
    "upcoming_offer": (
        "{name}（{terms}）将在{days}天后开始：按现价买一件约{promo_price}，比现在的{today}低{saving_pct}%。"
    ),
    "effective_price": "使用{name}（{terms}），买一件只需{effective}（现价{current} − {cut}）。",
    "offer_short": "{name}（{terms}）买一件用不上：现价{current}不到订单所需的{floor}。",
    "terms_percent": "立减{percent_off}%",
    "terms_threshold": "满{threshold}减{save}",
    "terms_coupon": "优惠券减{save}",
    "terms_coupon_min": "优惠券满{min_spend}减{save}",
    "terms_coupon_percent": "优惠券减{percent_off}%",
    "terms_coupon_percent_min": "优惠券满{min_spend}减{percent_off}%",
    "fake_discount": (
        "{name}：{price}号称比{reference}便宜{claimed_pct}%，但降价前{prior_days}天内的最低价是"
        "{prior_low}，实际只便宜{true_pct}%。"
    ),
    "fake_discount_none": (
        "{name}：{price}号称比{reference}便宜{claimed_pct}%，但降价前{prior_days}天内的最低价是"
        "{prior_low}，其实并没有降价。"
    ),
    "pre_sale_hike": (
        "{name}前先涨价：近{raise_days}天价格比此前的{raised_from}上调了{raised_pct}%。"
    ),
    "pre_sale_hike_on": (
        "{name}之前先涨了价：开始前{raise_days}天价格比此前的{raised_from}上调了{raised_pct}%。"
    ),
    "sale_event": (
        "{days}天后是{name}；过去{count}次{name}，它的价格比此前{window_days}天低{low_pct}%至"
        "{high_pct}%，照此约为{price_from}至{price_to}（现价{current}）。"
    ),
    "sale_event_once": (
        "{days}天后是{name}；上一次{name}，它的价格比此前{window_days}天低{high_pct}%，"
        "照此约为{price_from}（现价{current}）。"
    ),
    "sale_event_category": (
        "{days}天后是{name}；该商品没有过往{name}的价格，但过去{count}次{name}，{category}通常比此前"
        "{window_days}天低{low_pct}%至{high_pct}%（至少{products}件商品的中位数），照此约为"
        "{price_from}至{price_to}（现价{current}）。"
    ),
    "sale_event_category_once": (
        "{days}天后是{name}；该商品没有过往{name}的价格，但上一次{name}，{category}通常比此前"
        "{window_days}天低{high_pct}%（{products}件商品的中位数），照此约为{price_from}"
        "（现价{current}）。"
    ),
    "sale_event_category_events": (
        "{days}天后是{name}；还没有过往{name}的记录，但最近{count}次大促（{events}），{category}"
        "通常比此前{window_days}天低{low_pct}%至{high_pct}%（至少{products}件商品的中位数），"
        "照此约为{price_from}至{price_to}（现价{current}）。"
    ),
    "sale_event_category_events_once": (
        "{days}天后是{name}；还没有过往{name}的记录，但上一次大促（{events}），{category}通常比"
        "此前{window_days}天低{high_pct}%（{products}件商品的中位数），照此约为{price_from}"
        "（现价{current}）。"
    ),
    "quality_floor": "评分偏低：{count}条评价，按品类校正后为{rating}/5。",
    "rating_falling": "近期口碑下滑：近{recent_days}天评分{recent}/5，此前为{earlier}/5。",
    "well_rated": "口碑不错：{count}条评价，评分{rating}/5。",
    "out_of_stock": "目前缺货。",
    "over_budget": "当前价{current}，超出了你的预算{budget}。",
    "top_budget": "只列出当前价格不超过{budget}的商品。",
    "low_stock": "库存仅剩{quantity}件。",
    "compare_pick": "{title}更值得买：结论为“{kind}”，而{other_title}为“{other_kind}”。",
    "compare_pick_rating": (
        "{title}更值得买：两者结论都是“{kind}”，但它的评分为{rating}/5，{other_title}为{other_rating}/5。"
    ),
    "compare_tie": "两者难分高下：{title}为“{kind}”，{other_title}为“{other_kind}”。",
    "top_sales": "第{rank}名 {title}：近{days}天售出{value}件。",
    "top_rating": "第{rank}名 {title}：近{days}天{count}条评价，评分{value}/5。",
    "top_empty": "近{days}天没有{category}的销量或评价。",
    "top_empty_budget": "近{days}天没有当前价格不超过{budget}的{category}有销量或评价。",
}


def number(value: float) -> str:
    """One decimal, without a trailing .0, so '12%' and '12.5%' both read naturally."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def sentence(code: str, language: str, values: Mapping[str, object]) -> str:
    table = _ZH if language == "zh" else _EN
    return table[code].format(**values)


def codes() -> frozenset[str]:
    return frozenset(_EN)
