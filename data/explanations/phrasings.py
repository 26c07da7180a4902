"""The team's phrasings of the gold explanations: hand-written, per language and reason code.

A gold target is the verdict's answer prefix ("Better to wait because", "建议再等等，因为"),
then a LEAD clause for the strongest reason, optionally a SECOND clause for the next
reason when it points the same way, then one ADVICE sentence that says what to do (a
WAIT: until when or for which price, with the offer to watch; a BUY: why now; a SKIP:
what is wrong; not enough data: what is missing).

Slots are the reason's own values exactly as its sentence writes them (read back by
`worthit.explain.checker.reason_slots`: "$1,299.00", "12.5", "Black Friday"), plus a few
derived in build.py so English stays grammatical:

- `in_days` / `days_away`: "in 1 day" / "1 day", "in 13 days" / "13 days"
- `obs`, `are`, `over_days`: "1 price observation", "8 price observations"; "is", "are";
  "less than a day", "1 day", "7 days"
- `prices`: a calendar sale's expected price or range as its line writes it
- `np`: the name a claimed discount is made under ("today's price", "618活动价")

Keys: a reason code (or "VERDICT:code" where a verdict needs its own wording, such as a
WAIT whose only reason is a running offer: the offer still leaves the price ordinary, else
a buy reason would have fired), or a code with a variant (`upcoming_offer` for an
upcoming offer with terms, `fake_discount_none` where the claimed discount is none at all,
`pre_sale_hike_on` for a hike before a sale already running). ADVICE keys are
"VERDICT:key" and fall back to "VERDICT". Words outside the reasons must be in the
checker's reviewed allow-list (`worthit.explain.checker`), which keeps these honest.

In English, a second clause after a lead that already joins with ", and" takes a variant
starting with ";", so no sentence chains two "and"s.
"""

from __future__ import annotations

LEAD: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {
        "near_all_time_low": (
            "at {current} it is within {gap_pct}% of its all-time low of {low}",
            "{current} is only {gap_pct}% above its all-time low of {low}, seen {low_at}",
            "the price of {current} is just {gap_pct}% over its all-time low of {low}",
            "at {current} it is close to its all-time low of {low}, only {gap_pct}% higher",
            "{current} is within {gap_pct}% of the lowest price it has ever had, {low}",
        ),
        "at_all_time_low": (
            "at {current} it is at its all-time low",
            "{current} is its all-time low, last seen {low_at}",
            "the price is at its all-time low of {current} today",
            "at {current} it matches its all-time low, last seen {low_at}",
        ),
        "below_90d_avg": (
            "it is {delta_pct}% below its 90-day average of {avg90}",
            "the price is {delta_pct}% under its 90-day average of {avg90}",
            "at {delta_pct}% below its 90-day average of {avg90}, the price is low",
        ),
        "low_percentile": (
            "today's price is lower than {share}% of prices in the last 90 days",
            "the price is lower than {share}% of the prices of the last 90 days",
            "{share}% of prices in the last 90 days were higher than today's",
        ),
        "well_rated": (
            "it is well rated: {rating}/5 from {count} reviews",
            "it is rated {rating}/5 from {count} reviews",
            "{count} reviews rate it {rating}/5",
        ),
        "above_90d_avg": (
            "it is {delta_pct}% above its 90-day average of {avg90}",
            "the price is {delta_pct}% over its 90-day average of {avg90}",
            "at {delta_pct}% above its 90-day average of {avg90}, the price is high right now",
        ),
        "high_percentile": (
            "today's price is higher than {share}% of prices in the last 90 days",
            "the price is higher than {share}% of the prices of the last 90 days",
            "today's price is among the highest of the last 90 days, above {share}% of them",
        ),
        "price_falling": (
            "the price has fallen {drop_pct}% over the last 30 days and may keep falling",
            "the price has dropped {drop_pct}% in the last 30 days and may drop further",
            "the price has fallen {drop_pct}% over the last 30 days",
        ),
        "was_price_untrusted": (
            'the seller\'s "was" price of {list_price} is not to be trusted: the 90-day '
            "median is {median90}",
            'the "was" price of {list_price} is inflated; the 90-day median is only {median90}',
            'the seller\'s "was" price of {list_price} is ignored, since the 90-day median '
            "is {median90}",
        ),
        "upcoming_sale": (
            "{name} starts {in_days} at {promo_price}, {saving_pct}% below today",
            "{name} brings it to {promo_price} {in_days}, {saving_pct}% below today's price",
            "it drops to {promo_price} when {name} starts {in_days}",
        ),
        "upcoming_offer": (
            "{name} ({terms}) starts {in_days} and would bring one unit to {promo_price}, "
            "{saving_pct}% below today's {today}",
            "with {name} ({terms}) {in_days}, one unit would cost {promo_price} instead of {today}",
            "{name} starts {in_days}, and its offer ({terms}) would bring one unit to "
            "{promo_price} rather than {today}",
        ),
        "sale_event": (
            "{name} is {in_days} and should bring it to about {prices}, against {current} today",
            "{name} is {days_away} away, with an expected price of {prices} (today {current})",
            "{name} comes {in_days}, and the expected price then is {prices} instead of {current}",
        ),
        "out_of_stock": (
            "it is out of stock right now",
            "it cannot be bought today: it is out of stock",
            "it is out of stock at the moment",
        ),
        "over_budget": (
            "at {current} it is over your budget of {budget}",
            "{current} is more than your budget of {budget}",
            "the price of {current} is above your budget of {budget}",
        ),
        "over_budget_at_low": (
            "it is over your budget of {budget}, and at {current} it is within {gap_pct}% of "
            "its all-time low of {low}, so it is unlikely to get cheaper soon",
            "at {current} it is over your budget of {budget}, but only {gap_pct}% above its "
            "all-time low of {low}: unlikely to get cheaper soon",
        ),
        "over_budget_at_low_at": (
            "it is over your budget of {budget}, and at {current} it is at its all-time low, "
            "so it is unlikely to get cheaper soon",
            "at {current} it is over your budget of {budget}, and that is its all-time low: "
            "unlikely to get cheaper soon",
        ),
        "pre_sale_hike": (
            "the price was raised {raised_pct}% above {raised_from} over the last "
            "{raise_days} days, ahead of {name}",
            "the price was raised {raised_pct}% from {raised_from} in the last "
            "{raise_days} days, just before {name}",
        ),
        "pre_sale_hike_on": (
            "{name} follows a pre-sale hike: the price was raised {raised_pct}% above "
            "{raised_from} before it",
        ),
        "low_not_established": (
            "it has only been tracked for {days_tracked} days, so its all-time low of {low} "
            "is not a reliable benchmark yet",
            "after only {days_tracked} days of tracking, its all-time low of {low} is not "
            "yet reliable",
        ),
        "no_deal_yet": (
            "at {current} it is not a deal yet: a deal here is {deal_price} or less, "
            "{deal_pct}% under its 90-day average of {avg90}",
            "{current} is not a deal here; a deal is {deal_price} or less",
            "a deal here is {deal_price} or less ({deal_pct}% under its 90-day average), and "
            "{current} is not one yet",
            "{current} is not a deal yet; it is one at {deal_price} or less",
        ),
        "near_90d_avg": (
            "the price is close to its 90-day average of {avg90}, so it is not a low price today",
            "at about its 90-day average of {avg90}, today's price is nothing special",
            "it is close to its 90-day average of {avg90}: an ordinary price, not a low one",
        ),
        "fake_discount": (
            "{np} at {price} claims {claimed_pct}% off {reference}, but the true discount is "
            "only {true_pct}%",
            "{np} at {price} claims {claimed_pct}% off, but against the 30-day low of "
            "{prior_low} it is just {true_pct}% off",
        ),
        "fake_discount_none": (
            "{np} at {price} claims {claimed_pct}% off {reference}, but it was {prior_low} "
            "in the 30 days before: no real discount",
            "{np} at {price} claims {claimed_pct}% off, yet the lowest price of the 30 days "
            "before was {prior_low}, so the discount is not real",
        ),
        "effective_price": (
            "with {name} ({terms}) one unit costs {effective} instead of {current}",
            "{name} ({terms}) brings one unit to {effective}, down from {current}",
        ),
        "offer_short": (
            "{name} ({terms}) does not apply to one unit: at {current} it is below the "
            "{floor} an order needs",
        ),
        "active_promotion": (
            "{name} is on until {ends} at {promo_price}",
            "{name} runs until {ends}, with a price of {promo_price}",
        ),
        "low_stock": ("only {quantity} left in stock",),
        "WAIT:effective_price": (
            "even with {name} ({terms}) one unit still costs {effective}, which is not a low "
            "price for it",
            "{name} ({terms}) only brings one unit to {effective}, still not a low price for it",
        ),
        "WAIT:active_promotion": (
            "even with {name} on until {ends}, the price of {promo_price} is not a low one for it",
        ),
        "quality_floor": (
            "its rating is low: {rating}/5 from {count} reviews, adjusted for its category",
            "it is rated only {rating}/5 from {count} reviews, low for its category",
            "from {count} reviews its rating is a low {rating}/5, even adjusted for its category",
        ),
        "rating_falling": (
            "recent reviews are worse: {recent}/5 over the last {recent_days} days against "
            "{earlier}/5 before",
            "its rating has fallen from {earlier}/5 to {recent}/5 over the last {recent_days} days",
            "reviews from the last {recent_days} days average only {recent}/5, down from "
            "{earlier}/5",
        ),
        "few_observations": (
            "there {are} only {obs} over {over_days}, and worthit needs at least "
            "{min_observations} to judge the price",
            "with only {obs} in {over_days}, the price history is too short; worthit needs "
            "{min_observations}",
        ),
        "no_price": (
            "there is no recorded price for this product yet",
            "no price has been recorded for it yet",
        ),
        "unusable_price": (
            "a recorded price of this product is not above zero, so the price cannot be judged yet",
            "one of its recorded prices is not above zero, so its price cannot be judged yet",
        ),
        "stale_data": (
            "its newest data is more than {age} old, past the freshness objective of {objective}",
            "its data has not been updated for more than {age}, past the {objective} "
            "freshness objective",
        ),
        "stale_price": (
            "the last price we have is {age} old ({last_price_at}), too old to judge today's "
            "price by",
            "the last price we have is from {last_price_at}, {age} old, too old to judge "
            "today's price by",
        ),
        "forecast_wait": (
            "it is worth waiting for {deal_price} or less: its price dropped {drop_pct}% or more "
            "within {horizon} days in {drops} of the last {moments} comparable moments",
            "its price dropped {drop_pct}% or more within {horizon} days in {drops} of the last "
            "{moments} comparable moments, and the expected low is {expected_low}",
        ),
        "forecast_buy": (
            "waiting is unlikely to pay: its price dropped {drop_pct}% or more within {horizon} "
            "days in {drops} of the last {moments} comparable moments",
            "waiting for {deal_price} is expected to cost {cost_pct}%: its price dropped "
            "{drop_pct}% or more in {drops} of the last {moments} comparable moments",
        ),
        "forecast_deal": (
            "at {current} it is a deal here, {deal_price} or less",
            "{current} is a deal here ({deal_price} or less), and its price dropped further in "
            "{drops} of the last {moments} comparable moments",
        ),
    },
    "zh": {
        "near_all_time_low": (
            "现价{current}，距历史最低价{low}仅高{gap_pct}%",
            "当前价{current}只比历史最低价{low}高{gap_pct}%",
            "现价{current}离历史最低价{low}只差{gap_pct}%",
        ),
        "at_all_time_low": (
            "当前价{current}正处于历史最低价",
            "现价{current}已是历史最低价（最近一次为{low_at}）",
            "{current}追平了历史最低价",
        ),
        "below_90d_avg": (
            "当前价比90天均价{avg90}低{delta_pct}%",
            "价格比90天均价{avg90}还低{delta_pct}%",
        ),
        "low_percentile": (
            "当前价低于近90天{share}%的价格",
            "现在的价格比近90天里{share}%的价格都低",
            "近90天里有{share}%的价格都比现在高",
        ),
        "well_rated": (
            "口碑不错，{count}条评价的评分为{rating}/5",
            "{count}条评价给出{rating}/5的评分，口碑不错",
        ),
        "above_90d_avg": (
            "当前价比90天均价{avg90}高{delta_pct}%",
            "价格比90天均价{avg90}高出{delta_pct}%，现在偏贵",
        ),
        "high_percentile": (
            "当前价高于近90天{share}%的价格",
            "现在的价格比近90天里{share}%的价格都高，偏贵",
            "近90天里{share}%的价格都比现在低，眼下偏贵",
        ),
        "price_falling": (
            "近30天价格已经下降了{drop_pct}%，可能还会继续降",
            "价格近30天下降了{drop_pct}%，可能还会再降",
        ),
        "was_price_untrusted": (
            "商家标注的原价{list_price}不可信，近90天价格中位数只有{median90}",
            "原价{list_price}是虚标的，近90天价格中位数是{median90}",
        ),
        "upcoming_sale": (
            "{name}将在{days}天后开始，价格{promo_price}，比现在低{saving_pct}%",
            "{days}天后{name}开始，到时只要{promo_price}，比现在便宜{saving_pct}%",
            "再过{days}天就是{name}，价格会降到{promo_price}",
        ),
        "upcoming_offer": (
            "{name}（{terms}）{days}天后开始，按现价买一件约{promo_price}，比现在的{today}"
            "低{saving_pct}%",
            "{name}（{terms}）将在{days}天后开始，买一件约{promo_price}，比现在的{today}便宜",
        ),
        "sale_event": (
            "{days}天后是{name}，预计价格{prices}，而现价是{current}",
            "再过{days}天就是{name}，到时预计{prices}（现价{current}）",
        ),
        "out_of_stock": (
            "目前缺货",
            "这件商品现在缺货",
        ),
        "over_budget": (
            "当前价{current}超出了你的预算{budget}",
            "现价{current}，超过了你{budget}的预算",
            "{current}的价格比你的预算{budget}高",
        ),
        "over_budget_at_low": (
            "当前价{current}超出了你的预算{budget}，但距历史最低价{low}仅高{gap_pct}%，"
            "短期内不太可能更便宜",
        ),
        "over_budget_at_low_at": (
            "当前价{current}超出了你的预算{budget}，但已是历史最低价，短期内不太可能更便宜",
        ),
        "pre_sale_hike": (
            "{name}前先涨价，近{raise_days}天价格比此前的{raised_from}上调了{raised_pct}%",
            "{name}前价格从{raised_from}上调了{raised_pct}%",
        ),
        "pre_sale_hike_on": ("{name}之前先涨了价，比此前的{raised_from}上调了{raised_pct}%",),
        "low_not_established": (
            "只跟踪了{days_tracked}天，历史最低价{low}还不可靠",
            "才跟踪{days_tracked}天，历史最低价{low}还不能作为参考",
        ),
        "no_deal_yet": (
            "当前价{current}还不是优惠价，这里的优惠价是{deal_price}或更低",
            "现价{current}还不是优惠价，降到{deal_price}或更低（比90天均价{avg90}低{deal_pct}%）"
            "才是",
            "现价{current}还不是优惠价，降到{deal_price}或更低才是优惠价",
        ),
        "near_90d_avg": (
            "价格接近90天均价{avg90}，并不算便宜",
            "现价和90天均价{avg90}差不多，没有明显优惠",
            "现在的价格只是在90天均价{avg90}附近，算不上低价",
        ),
        "fake_discount": (
            "{np}{price}号称比{reference}便宜{claimed_pct}%，但实际只便宜{true_pct}%",
            "{np}{price}号称便宜{claimed_pct}%，但对比降价前30天的最低价{prior_low}，"
            "实际只便宜{true_pct}%",
        ),
        "fake_discount_none": (
            "{np}{price}号称比{reference}便宜{claimed_pct}%，但降价前30天内的最低价就是"
            "{prior_low}，其实并没有降价",
            "{np}{price}号称便宜{claimed_pct}%，可降价前30天的最低价只有{prior_low}，"
            "其实并没有降价",
        ),
        "effective_price": (
            "使用{name}（{terms}），买一件只需{effective}，比现价{current}更低",
            "用上{name}（{terms}）后，买一件只要{effective}",
        ),
        "offer_short": ("{name}（{terms}）买一件用不上，现价{current}不到订单所需的{floor}",),
        "active_promotion": (
            "{name}进行中，截至{ends}，价格{promo_price}",
            "{name}正在进行，{ends}前价格为{promo_price}",
        ),
        "low_stock": ("库存仅剩{quantity}件", "只剩{quantity}件库存"),
        "WAIT:effective_price": (
            "即使用上{name}（{terms}），买一件也要{effective}，对它来说并不算低价",
            "用上{name}（{terms}）后，买一件仍要{effective}，还算不上低价",
        ),
        "WAIT:active_promotion": ("{name}虽然进行到{ends}，但{promo_price}对它来说并不算低价",),
        "quality_floor": (
            "评分偏低：{count}条评价按品类校正后为{rating}/5",
            "它的评分只有{rating}/5（{count}条评价，已按品类校正），明显偏低",
            "按品类校正后，它的评分只有{rating}/5（{count}条评价），明显偏低",
        ),
        "rating_falling": (
            "近期口碑下滑，近{recent_days}天评分只有{recent}/5，此前是{earlier}/5",
            "最近{recent_days}天评分从{earlier}/5跌到了{recent}/5",
        ),
        "few_observations": (
            "{days_tracked}天内只有{observations}条价格记录，至少需要{min_observations}条"
            "才能判断价格",
            "目前只有{observations}条价格记录，还不到判断所需的{min_observations}条",
        ),
        "no_price": (
            "该商品还没有任何价格记录",
            "这件商品目前还没有价格记录",
        ),
        "unusable_price": (
            "该商品有一条价格记录不大于零，暂时无法判断价格",
            "它的价格记录里有一条不大于零，目前无法判断价格",
        ),
        "stale_data": (
            "最新数据距今已超过{age}，超出了{objective}的新鲜度目标",
            "数据已经超过{age}没有更新，超出了{objective}的新鲜度目标",
        ),
        "stale_price": (
            "我们最新的价格记录是{age}前的（{last_price_at}），太旧了，无法据此判断现在的价格",
            "最新的价格记录是{last_price_at}的，已是{age}前，太旧了，无法判断现在的价格",
        ),
        "forecast_wait": (
            "值得等到{deal_price}或更低：最近{moments}个可比时点中，有{drops}次价格在{horizon}天内"
            "下降了{drop_pct}%以上",
            "最近{moments}个可比时点中，有{drops}次价格在{horizon}天内下降了{drop_pct}%以上，"
            "预计最低{expected_low}",
        ),
        "forecast_buy": (
            "等待不太可能更划算：最近{moments}个可比时点中，只有{drops}次价格在{horizon}天内"
            "下降了{drop_pct}%以上",
            "等到{deal_price}预计反而多花{cost_pct}%",
        ),
        "forecast_deal": ("当前价{current}已是优惠价（不高于{deal_price}）",),
    },
}

SECOND: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {
        "low_percentile": (
            ", and today's price is lower than {share}% of prices in the last 90 days",
            "; it is also lower than {share}% of prices in the last 90 days",
        ),
        "below_90d_avg": (
            ", and it is {delta_pct}% below its 90-day average of {avg90}",
            "; it is also {delta_pct}% below its 90-day average of {avg90}",
        ),
        "well_rated": (
            ", and it is well rated at {rating}/5 from {count} reviews",
            "; it is also rated {rating}/5 from {count} reviews",
        ),
        "high_percentile": (
            ", and today's price is higher than {share}% of prices in the last 90 days",
            "; today's price is also higher than {share}% of prices in the last 90 days",
        ),
        "above_90d_avg": (
            ", and today's price is {delta_pct}% above its 90-day average of {avg90}",
            "; today's price is also {delta_pct}% above its 90-day average of {avg90}",
        ),
        "price_falling": (
            ", and the price has fallen {drop_pct}% over the last 30 days",
            "; the price has also fallen {drop_pct}% over the last 30 days",
        ),
        "was_price_untrusted": (
            '; also, the seller\'s "was" price of {list_price} is ignored, since the 90-day '
            "median is {median90}",
        ),
        "upcoming_sale": (
            ", and {name} starts {in_days} at {promo_price}",
            "; also, {name} starts {in_days} at {promo_price}",
        ),
        "upcoming_offer": (
            ", and {name} ({terms}) starts {in_days}",
            "; also, {name} ({terms}) starts {in_days}",
        ),
        "sale_event": (", and {name} is {in_days}", "; also, {name} is {in_days}"),
        "out_of_stock": (
            ", and it is out of stock right now",
            "; it is also out of stock right now",
        ),
        "over_budget": (
            ", and at {current} it is over your budget of {budget}",
            "; at {current} it is also over your budget of {budget}",
        ),
        "pre_sale_hike": (
            ", after the price was raised {raised_pct}% above {raised_from} ahead of {name}",
        ),
        "pre_sale_hike_on": ("; {name} follows a {raised_pct}% price hike from {raised_from}",),
        "fake_discount": ("; the claimed {claimed_pct}% off is really only {true_pct}%",),
        "fake_discount_none": ("; the claimed {claimed_pct}% off is not a real discount",),
        "effective_price": (", and with {name} one unit costs {effective}",),
        "active_promotion": (", and {name} is on until {ends} at {promo_price}",),
        "low_stock": (", and only {quantity} left in stock",),
        "quality_floor": (", and its rating is low at {rating}/5 from {count} reviews",),
        "rating_falling": (
            ", and recent reviews are worse: {recent}/5 against {earlier}/5 before",
        ),
    },
    "zh": {
        "low_percentile": ("，而且低于近90天{share}%的价格",),
        "below_90d_avg": ("，还比90天均价{avg90}低{delta_pct}%",),
        "well_rated": ("，口碑也不错（{count}条评价，评分{rating}/5）",),
        "high_percentile": ("，而且现价高于近90天{share}%的价格",),
        "above_90d_avg": ("，而且现价比90天均价{avg90}高{delta_pct}%",),
        "price_falling": ("，而且近30天价格下降了{drop_pct}%",),
        "was_price_untrusted": ("；另外，商家标注的原价{list_price}不可信",),
        "upcoming_sale": ("，而且{name}将在{days}天后开始",),
        "upcoming_offer": ("，而且{name}将在{days}天后开始",),
        "sale_event": ("，而且{days}天后就是{name}",),
        "out_of_stock": ("，而且目前缺货",),
        "over_budget": ("，而且现价{current}超出了你的预算{budget}",),
        "pre_sale_hike": ("，而且{name}前价格先上调了{raised_pct}%",),
        "pre_sale_hike_on": ("；{name}之前价格先上调了{raised_pct}%",),
        "fake_discount": ("；{np}号称便宜{claimed_pct}%，实际只便宜{true_pct}%",),
        "fake_discount_none": ("；{np}号称便宜{claimed_pct}%，但并不是真折扣",),
        "effective_price": ("，用{name}买一件只需{effective}",),
        "active_promotion": ("，{name}进行中，截至{ends}",),
        "low_stock": ("，库存仅剩{quantity}件",),
        "quality_floor": ("，而且评分偏低（{rating}/5）",),
        "rating_falling": ("，近{recent_days}天评分也从{earlier}/5降到了{recent}/5",),
    },
}

SECOND_ALLOWED: dict[str, frozenset[str]] = {
    "BUY": frozenset(
        {
            "low_percentile",
            "below_90d_avg",
            "well_rated",
            "effective_price",
            "active_promotion",
            "low_stock",
        }
    ),
    "WAIT": frozenset(
        {
            "high_percentile",
            "above_90d_avg",
            "price_falling",
            "was_price_untrusted",
            "upcoming_sale",
            "sale_event",
            "out_of_stock",
            "over_budget",
            "pre_sale_hike",
            "fake_discount",
        }
    ),
    "SKIP": frozenset({"quality_floor", "rating_falling"}),
    "INSUFFICIENT_DATA": frozenset(),
}
"""Which second reasons a target may add: only ones that point the verdict's way (a WAIT
is never explained by a low price too); a neutral fact only where it is part of the
case (a BUY's running offer, a WAIT's untrusted "was" price or hollow discount)."""

ADVICE: dict[str, dict[str, tuple[str, ...]]] = {
    "en": {
        "BUY": (
            "It is a good time to buy.",
            "Buying now makes sense.",
            "Now is a good moment to buy it.",
            "If you need it, buy it now.",
            "Go ahead and buy it if you need it.",
        ),
        "WAIT:upcoming_sale": (
            "Wait for {name} {in_days}; I can remind you when it starts.",
            "Hold off until {name} and pay {promo_price}; I can remind you.",
            "Wait {days_away} for {name}; I can alert you when it starts.",
        ),
        "WAIT:upcoming_offer": (
            "Wait for {name} {in_days}; I can remind you when it starts.",
            "Hold off {days_away} and buy during {name}; I can alert you.",
        ),
        "WAIT:sale_event": (
            "Wait for {name} {in_days}; I can watch the price for you.",
            "Hold off until {name}; I can alert you if it drops to {price_from}.",
        ),
        "WAIT:above_90d_avg": (
            "Wait until it is back near {avg90}; I can alert you when it drops.",
            "Wait for a price closer to {avg90}; I can watch it for you.",
        ),
        "WAIT:high_percentile": (
            "Wait for a lower price; I can watch it and alert you when it drops.",
            "Hold off for now; I can tell you when the price comes down.",
        ),
        "WAIT:price_falling": (
            "Wait a little longer; I can watch the price and alert you when it stops falling.",
            "Hold off for now; I can tell you when the price settles.",
        ),
        "WAIT:out_of_stock": (
            "Wait until it is back in stock; I can alert you when it is.",
            "I can tell you as soon as it is back in stock.",
        ),
        "WAIT:over_budget": (
            "Wait until it drops to {budget} or less; I can watch for that.",
            "I can alert you when it falls to {budget} or less.",
        ),
        "WAIT:was_price_untrusted": (
            "Wait for a real price cut below {median90}; I can watch it for you.",
            "Hold off until it drops below {median90}; I can alert you.",
        ),
        "WAIT:pre_sale_hike": (
            "Wait until it is back near {raised_from}; I can alert you when it drops.",
            "Hold off for now; I can watch the price for you.",
        ),
        "WAIT:no_deal_yet": (
            "Wait until it drops to {deal_price}; I can alert you when it does.",
            "I can watch the price and tell you when it drops to {deal_price}.",
            "Hold off for now; I can alert you when it comes down to {deal_price}.",
        ),
        "WAIT:near_90d_avg": (
            "Wait for a dip below {avg90}; I can alert you when it comes.",
            "Hold off until it drops below {avg90}; I can watch the price for you.",
        ),
        "WAIT:fake_discount": (
            "Hold off for a deeper cut; I can watch the price for you.",
            "Hold off until the price really drops; I can alert you.",
        ),
        "WAIT:fake_discount_none": (
            "Wait for a real discount below {prior_low}; I can watch the price for you.",
            "Hold off until the price really drops; I can alert you.",
        ),
        "WAIT": (
            "Wait for a better price; I can watch it for you.",
            "Hold off for now; I can alert you when the price drops.",
        ),
        "SKIP:quality_floor": (
            "Look for a better-rated alternative instead.",
            "A rating that low is a reason to pass, whatever the price.",
            "Better to look at others in its category.",
        ),
        "SKIP:rating_falling": (
            "Reviews are slipping, so look elsewhere for now.",
            "Hold off until reviews recover, or look at other options.",
        ),
        "SKIP": ("Look for a better-rated alternative instead.",),
        "SKIP:over_budget_at_low": (
            "Look for other options within {budget} instead.",
            "Better to look elsewhere for an option within {budget}.",
        ),
        "SKIP:over_budget_at_low_at": (
            "Look for other options within {budget} instead.",
            "Better to look elsewhere for an option within {budget}.",
        ),
        "INSUFFICIENT_DATA:no_price": (
            "Check back once a price is recorded.",
            "Ask again once it has a price.",
        ),
        "INSUFFICIENT_DATA:few_observations": (
            "Check back in a few days, once there is more price history.",
            "Ask again when more prices are in.",
        ),
        "INSUFFICIENT_DATA:unusable_price": ("Check back once the seller's feed corrects it.",),
        "INSUFFICIENT_DATA:stale_price": (
            "Check back once a price is recorded again.",
            "Ask again once more prices are in.",
        ),
        "INSUFFICIENT_DATA": ("Check back in a few days.",),
        "WAIT:forecast_wait": (
            "I can watch the price and alert you when it drops to {deal_price}.",
            "Hold off for now; I can alert you when it comes down to {deal_price}.",
        ),
        "BUY:forecast_buy": (
            "Buying now makes sense.",
            "If you need it, buy it now.",
        ),
        "BUY:forecast_deal": (
            "It is a good time to buy.",
            "Now is a good moment to buy it.",
        ),
    },
    "zh": {
        "BUY": (
            "现在入手正合适。",
            "现在下单很划算。",
            "可以放心下单。",
            "需要的话现在就可以买。",
            "有需要的话，现在就是入手的好时机。",
        ),
        "WAIT:upcoming_sale": (
            "建议等{name}开始再买，到时我可以提醒你。",
            "等{name}开始后再下单，我可以帮你设个提醒。",
        ),
        "WAIT:upcoming_offer": (
            "建议等{name}开始再买，到时我可以提醒你。",
            "等{name}开始后再下单，我可以帮你设个提醒。",
        ),
        "WAIT:sale_event": (
            "等到{name}再买，我可以帮你盯着价格。",
            "建议{name}时再下单，需要的话我可以提醒你。",
        ),
        "WAIT:above_90d_avg": (
            "等价格回到{avg90}附近再买，降价时我可以提醒你。",
            "先别急，我可以帮你盯着，价格回落时通知你。",
        ),
        "WAIT:high_percentile": (
            "先等等更低的价格，降价时我可以提醒你。",
            "建议先观望，我可以帮你盯着价格。",
        ),
        "WAIT:price_falling": (
            "再观望一阵，我可以帮你盯着价格，等价格稳住再买。",
            "先别急着买，降价时我会提醒你。",
        ),
        "WAIT:out_of_stock": (
            "等到货再买，补货时我可以提醒你。",
            "补货后我可以第一时间通知你。",
        ),
        "WAIT:over_budget": (
            "等价格降到{budget}以内再买，我可以帮你盯着。",
            "降到{budget}以内时，我可以提醒你。",
        ),
        "WAIT:was_price_untrusted": (
            "等价格真正降到{median90}以下再买，我可以帮你盯着。",
            "别被原价迷惑，降价时我可以提醒你。",
        ),
        "WAIT:pre_sale_hike": (
            "等价格回到{raised_from}附近再买，我可以提醒你。",
            "先别急，我可以帮你盯着价格。",
        ),
        "WAIT:no_deal_yet": (
            "等降到{deal_price}或更低再买，我可以帮你盯着价格。",
            "建议等到{deal_price}或更低再入手，降到时我可以提醒你。",
        ),
        "WAIT:near_90d_avg": (
            "等价格低于{avg90}再买，降价时我可以提醒你。",
            "建议先观望，我可以帮你盯着价格。",
        ),
        "WAIT:fake_discount": (
            "等更大的降幅再买，我可以帮你盯着。",
            "先别急，真降价时我可以提醒你。",
        ),
        "WAIT:fake_discount_none": (
            "等真正降到{prior_low}以下再买，我可以帮你盯着。",
            "先别急，真降价时我可以提醒你。",
        ),
        "WAIT": (
            "先观望一下，降价时我可以提醒你。",
            "建议等更好的价格，我可以帮你盯着。",
        ),
        "SKIP:quality_floor": (
            "建议看看评分更高的同类商品。",
            "评分不过关，建议换一款评分更高的。",
        ),
        "SKIP:rating_falling": (
            "口碑可能变差了，建议先看看别的选择。",
            "等口碑回升再考虑，或者换一款。",
        ),
        "SKIP": ("建议看看评分更高的同类商品。",),
        "SKIP:over_budget_at_low": (
            "预算在{budget}以内的话，建议看看同类商品。",
            "建议在{budget}以内换一款同类商品。",
        ),
        "SKIP:over_budget_at_low_at": (
            "预算在{budget}以内的话，建议看看同类商品。",
            "建议在{budget}以内换一款同类商品。",
        ),
        "INSUFFICIENT_DATA:no_price": (
            "等有了价格再来问我吧。",
            "过几天有了价格再来看看。",
        ),
        "INSUFFICIENT_DATA:few_observations": (
            "过几天记录多了再来看看。",
            "等记录够{min_observations}条后再来问我吧。",
        ),
        "INSUFFICIENT_DATA:unusable_price": ("等商家修正数据后再来看看。",),
        "INSUFFICIENT_DATA:stale_price": (
            "等记录多了再来问我吧。",
            "过几天再来看看吧。",
        ),
        "INSUFFICIENT_DATA": ("过几天再来看看吧。",),
        "WAIT:forecast_wait": ("等到{deal_price}或更低再买，我可以帮你盯着价格。",),
        "BUY:forecast_buy": ("需要的话现在就可以买。",),
        "BUY:forecast_deal": ("现在入手正合适。",),
    },
}
