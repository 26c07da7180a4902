"""One sentence per reason code, in English, Chinese and Japanese.

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
    "over_budget_at_low": (
        "It is over your budget of {budget}, and at {current} it is within {gap_pct}% of its "
        "all-time low of {low}: unlikely to get cheaper soon."
    ),
    "over_budget_at_low_at": (
        "It is over your budget of {budget}, and at {current} it is at its all-time low: "
        "unlikely to get cheaper soon."
    ),
    "stale_price": (
        "The last price we have is {age} old ({last_price_at}), too old to judge today's price by."
    ),
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
    "forecast_wait": (
        "Worth waiting for {deal_price} or less: its price dropped {drop_pct}% or more within "
        "{horizon} days in {drops} of the last {moments} comparable moments; expected low "
        "{expected_low}."
    ),
    "forecast_buy": (
        "Waiting is unlikely to pay: its price dropped {drop_pct}% or more within {horizon} "
        "days in {drops} of the last {moments} comparable moments, and waiting for "
        "{deal_price} is expected to cost {cost_pct}%."
    ),
    "forecast_deal": (
        "At {current} it is a deal here ({deal_price} or less), and its price dropped "
        "{drop_pct}% or more further within {horizon} days in {drops} of the last {moments} "
        "comparable moments."
    ),
    "deal_buy": (
        "At {current} it is a deal: {deal_pct}% or more under its 90-day average of {avg90} "
        "({deal_price} or less)."
    ),
    "deal_wait": (
        "Not a deal yet at {current}: a deal here is {deal_price} or less ({deal_pct}% under "
        "its 90-day average of {avg90}). There is no forecast for it yet, so wait for one."
    ),
    "no_deal_yet": (
        "Not a deal at {current}; a deal here is {deal_price} or less ({deal_pct}% under its "
        "90-day average of {avg90})."
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
    "over_budget_at_low": (
        "当前价{current}超出了你的预算{budget}，但距历史最低价{low}仅高{gap_pct}%，短期内不太可能更便宜。"
    ),
    "over_budget_at_low_at": (
        "当前价{current}超出了你的预算{budget}，但已是历史最低价，短期内不太可能更便宜。"
    ),
    "stale_price": (
        "我们最新的价格记录是{age}前的（{last_price_at}），太旧了，无法据此判断现在的价格。"
    ),
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
    "forecast_wait": (
        "值得等到{deal_price}或更低：最近{moments}个可比时点中，有{drops}次价格在{horizon}天内"
        "下降了{drop_pct}%以上；预计最低{expected_low}。"
    ),
    "forecast_buy": (
        "等待不太可能更划算：最近{moments}个可比时点中，只有{drops}次价格在{horizon}天内"
        "下降了{drop_pct}%以上，等到{deal_price}预计反而多花{cost_pct}%。"
    ),
    "forecast_deal": (
        "当前价{current}已是优惠价（不高于{deal_price}），最近{moments}个可比时点中，"
        "有{drops}次价格在{horizon}天内又下降了{drop_pct}%以上。"
    ),
    "deal_buy": (
        "当前价{current}已是优惠价：比90天均价{avg90}低{deal_pct}%以上（不高于{deal_price}）。"
    ),
    "deal_wait": (
        "当前价{current}还不是优惠价：这里的优惠价是{deal_price}或更低（比90天均价{avg90}低"
        "{deal_pct}%）。目前还没有它的价格预测，建议等到优惠价再买。"
    ),
    "no_deal_yet": (
        "当前价{current}还不是优惠价，这里的优惠价是{deal_price}或更低（比90天均价{avg90}低{deal_pct}%）。"
    ),
}


_JA: dict[str, str] = {
    "no_price": "この商品の価格記録はまだありません。",
    "unusable_price": (
        "この商品の価格記録に0以下のものがあり、販売元がデータを直すまで価格を判断できません。"
    ),
    "few_observations": (
        "{days_tracked}日間で価格記録が{observations}件しかありません。判断には{min_observations}件以上必要です。"
    ),
    "near_all_time_low": "現在{current}で、過去最安値{low}（{low_at}）との差は{gap_pct}%です。",
    "at_all_time_low": "現在{current}で、過去最安値です（直近は{low_at}）。",
    "low_not_established": (
        "追跡期間が{days_tracked}日のため、過去最安値{low}はまだ目安になりません（{min_days}日必要）。"
    ),
    "below_90d_avg": "90日平均{avg90}より{delta_pct}%安いです。",
    "above_90d_avg": "90日平均{avg90}より{delta_pct}%高いです。",
    "near_90d_avg": "価格は90日平均{avg90}とほぼ同じです。",
    "low_percentile": "今の価格は直近90日の価格の{share}%より安いです。",
    "high_percentile": "今の価格は直近90日の価格の{share}%より高いです。",
    "price_falling": "直近30日で価格が{drop_pct}%下がりました。",
    "was_price_untrusted": (
        "販売元の表示する元値{list_price}は信用できません。90日間の価格の中央値は{median90}です。"
    ),
    "upcoming_sale": (
        "{days}日後に{name}が始まり、価格は{promo_price}で今より{saving_pct}%安くなります。"
    ),
    "active_promotion": "{name}を{ends}まで実施中で、価格は{promo_price}です。",
    "upcoming_offer": (
        "{days}日後に{name}（{terms}）が始まります。今の価格なら1点{promo_price}で、"
        "今の{today}より{saving_pct}%安くなります。"
    ),
    "effective_price": "{name}（{terms}）を使うと1点{effective}です（現在{current} − {cut}）。",
    "offer_short": (
        "{name}（{terms}）は1点では使えません。現在{current}で、必要な{floor}に届きません。"
    ),
    "terms_percent": "{percent_off}%オフ",
    "terms_threshold": "{threshold}以上で{save}引き",
    "terms_coupon": "{save}引きクーポン",
    "terms_coupon_min": "{min_spend}以上で{save}引きクーポン",
    "terms_coupon_percent": "{percent_off}%オフクーポン",
    "terms_coupon_percent_min": "{min_spend}以上で{percent_off}%オフクーポン",
    "fake_discount": (
        "{name}：{price}は{reference}から{claimed_pct}%オフとされていますが、値下げ前{prior_days}日間の"
        "最安値は{prior_low}で、実際の値引きは{true_pct}%です。"
    ),
    "fake_discount_none": (
        "{name}：{price}は{reference}から{claimed_pct}%オフとされていますが、値下げ前{prior_days}日間の"
        "最安値は{prior_low}で、実際には値引きになっていません。"
    ),
    "pre_sale_hike": (
        "{name}の前に値上げされています。直近{raise_days}日で価格が{raised_from}から{raised_pct}%上がりました。"
    ),
    "pre_sale_hike_on": (
        "{name}の前に値上げされていました。開始前{raise_days}日で価格が{raised_from}から{raised_pct}%上がりました。"
    ),
    "sale_event": (
        "{days}日後は{name}です。過去{count}回の{name}では、この商品はその前{window_days}日より"
        "{low_pct}%〜{high_pct}%安く、{price_from}〜{price_to}になる見込みです（現在{current}）。"
    ),
    "sale_event_once": (
        "{days}日後は{name}です。前回の{name}では、この商品はその前{window_days}日より{high_pct}%安く、"
        "{price_from}になる見込みです（現在{current}）。"
    ),
    "sale_event_category": (
        "{days}日後は{name}です。この商品の過去の{name}価格はありませんが、過去{count}回の{name}で"
        "{category}はその前{window_days}日より通常{low_pct}%〜{high_pct}%安く（{products}商品以上の"
        "中央値）、{price_from}〜{price_to}になる見込みです（現在{current}）。"
    ),
    "sale_event_category_once": (
        "{days}日後は{name}です。この商品の過去の{name}価格はありませんが、前回の{name}で{category}は"
        "その前{window_days}日より通常{high_pct}%安く（{products}商品の中央値）、{price_from}になる"
        "見込みです（現在{current}）。"
    ),
    "sale_event_category_events": (
        "{days}日後は{name}です。過去の{name}の記録はありませんが、直近{count}回の大型セール（{events}）で"
        "{category}はその前{window_days}日より通常{low_pct}%〜{high_pct}%安く（{products}商品以上の"
        "中央値）、{price_from}〜{price_to}になる見込みです（現在{current}）。"
    ),
    "sale_event_category_events_once": (
        "{days}日後は{name}です。過去の{name}の記録はありませんが、前回の大型セール（{events}）で"
        "{category}はその前{window_days}日より通常{high_pct}%安く（{products}商品の中央値）、"
        "{price_from}になる見込みです（現在{current}）。"
    ),
    "quality_floor": "評価が低めです：{count}件のレビューで、カテゴリ補正後{rating}/5です。",
    "rating_falling": (
        "最近の評価が下がっています：直近{recent_days}日は{recent}/5、それ以前は{earlier}/5です。"
    ),
    "well_rated": "評価は良好です：{count}件のレビューで{rating}/5です。",
    "out_of_stock": "現在在庫切れです。",
    "over_budget": "現在{current}で、予算{budget}を超えています。",
    "over_budget_at_low": (
        "現在{current}で予算{budget}を超えていますが、過去最安値{low}との差は{gap_pct}%で、"
        "当面これ以上安くなる見込みは低いです。"
    ),
    "over_budget_at_low_at": (
        "現在{current}で予算{budget}を超えていますが、過去最安値で、"
        "当面これ以上安くなる見込みは低いです。"
    ),
    "stale_price": (
        "最新の価格記録は{age}前のもの（{last_price_at}）で、古すぎて現在の価格を判断できません。"
    ),
    "top_budget": "今日の価格が{budget}以下の商品だけを挙げています。",
    "low_stock": "在庫は残り{quantity}点です。",
    "compare_pick": (
        "{title}の方がおすすめです：判定は「{kind}」、{other_title}は「{other_kind}」です。"
    ),
    "compare_pick_rating": (
        "{title}の方がおすすめです：どちらも「{kind}」ですが、評価は{rating}/5で、"
        "{other_title}は{other_rating}/5です。"
    ),
    "compare_tie": (
        "どちらとも言えません：{title}は「{kind}」、{other_title}は「{other_kind}」です。"
    ),
    "top_sales": "{rank}位 {title}：直近{days}日で{value}点販売。",
    "top_rating": "{rank}位 {title}：直近{days}日のレビュー{count}件で評価{value}/5。",
    "top_empty": "直近{days}日に売上やレビューのある{category}はありません。",
    "top_empty_budget": (
        "直近{days}日に売上やレビューのある、今日の価格が{budget}以下の{category}はありません。"
    ),
    "forecast_wait": (
        "{deal_price}以下まで待つ価値があります：直近{moments}回の比較できる時点のうち{drops}回、"
        "{horizon}日以内に価格が{drop_pct}%以上下がりました。予想最安値は{expected_low}です。"
    ),
    "forecast_buy": (
        "待っても得になりにくいです：直近{moments}回の比較できる時点のうち、{horizon}日以内に"
        "{drop_pct}%以上下がったのは{drops}回だけで、{deal_price}まで待つと{cost_pct}%高くつく"
        "見込みです。"
    ),
    "forecast_deal": (
        "現在の{current}はお得な価格（{deal_price}以下）で、直近{moments}回の比較できる時点のうち"
        "{horizon}日以内にさらに{drop_pct}%以上下がったのは{drops}回です。"
    ),
    "deal_buy": (
        "現在の{current}はお得な価格です：90日平均{avg90}より{deal_pct}%以上安い"
        "（{deal_price}以下）です。"
    ),
    "deal_wait": (
        "現在の{current}はまだお得な価格ではありません：お得な価格は{deal_price}以下"
        "（90日平均{avg90}より{deal_pct}%安い）です。まだ価格予測がないため、お得な価格まで"
        "待つのがおすすめです。"
    ),
    "no_deal_yet": (
        "現在の{current}はまだお得な価格ではありません。お得な価格は{deal_price}以下"
        "（90日平均{avg90}より{deal_pct}%安い）です。"
    ),
}


def number(value: float) -> str:
    """One decimal, without a trailing .0, so '12%' and '12.5%' both read naturally."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


_TABLES = {"en": _EN, "zh": _ZH, "ja": _JA}


def template(code: str, language: str) -> str:
    """The sentence of a reason code in a language (English for one not kept)."""
    return _TABLES.get(language, _EN)[code]


def sentence(code: str, language: str, values: Mapping[str, object]) -> str:
    return template(code, language).format(**values)


def codes() -> frozenset[str]:
    return frozenset(_EN)
