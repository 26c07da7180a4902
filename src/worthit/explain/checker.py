"""The strict explanation checker: is a sentence faithful, specific and fluent?

The guard (explain/guard.py) checks numbers; it cannot see an invented claim ("because of
its excellent customer service"), a reason pointing the wrong way (a SKIP "because of the
price drop"), an empty sentence ("because of the price difference") or gibberish. This
checker reads an explanation against the inputs the model was given (title, verdict,
leading reasons with their codes, polarities and texts, language) and says which of three
properties it has, deterministically, in well under a millisecond, without a model:

- faithful: no content beyond the inputs. A closed vocabulary: every English content word
  (lower-cased, lightly lemmatised, stopwords aside) and every Chinese character (read as
  the fewest unknown characters left when the text is cut into pieces found in the inputs
  or the allow-list) comes from the title, the reasons, the verdict's label or a small
  reviewed allow-list of neutral advice words (now, wait, watch, price; 现在, 等, 降价,
  提醒). Every number is one of the reasons' (the guard's own matching, rounding and
  comparison rules). No claim points against the verdict: a WAIT or a SKIP never says it
  is cheap, a good deal or that its price dropped (unless a falling price is the WAIT's own
  reason), a BUY never says to wait or belittles its rating ("only 4.32/5"), a SKIP never
  praises its reviews. A fact only one reason states (out of stock, still falling, above
  the 90-day average) needs that reason among the inputs, and a share ("15%") must be a
  share a reason writes, not another number of theirs (15 days).
- specific: it names the strongest reason's key number, date or event (`key_reason`: the
  first leading reason that carries the verdict; for not enough data, what is missing).
- fluent: starts with the verdict's label, right script (Chinese mostly CJK and no English
  word the inputs lack; English no CJK), no doubled characters (价价) or repeated phrases,
  one or two sentences, a sane length, ends at a sentence end.

`check_explanation` returns all three and the first failure as a short code with a
detail, so a caller can log why a text was refused. The gold data
(data/explanations/*.jsonl) must pass it whole (tests/test_checker.py).
"""

from __future__ import annotations

import collections
import itertools
import re
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, ROUND_HALF_UP, Decimal, InvalidOperation
from functools import cache, lru_cache
from string import Formatter
from typing import TypeVar

from worthit.decide.phrasing import template
from worthit.decide.rules import _STALE
from worthit.decide.verdict import Polarity, Reason, Verdict, VerdictKind
from worthit.explain.guard import Grounds, check_grounding
from worthit.explain.inputs import ExplanationInputs, model_text
from worthit.explain.templates import language_of, leading_reasons
from worthit.text.money import money
from worthit.text.sentences import SENTENCE_END, ends_sentence, sentence_ends

_MARK = "\x00"


def language_tag(language: str) -> str:
    """ "zh" for any Chinese tag, "ja" for any Japanese one, else "en" (as the templates)."""
    tag = language.lower()[:2]
    return tag if tag in ("zh", "ja") else "en"


_PHRASES: dict[str, tuple[str, ...]] = {
    "upcoming_sale": ("upcoming_sale", "upcoming_offer"),
    "fake_discount": ("fake_discount", "fake_discount_none"),
    "over_budget_at_low": ("over_budget_at_low", "over_budget_at_low_at"),
    "pre_sale_hike": ("pre_sale_hike", "pre_sale_hike_on"),
    "sale_event": (
        "sale_event",
        "sale_event_once",
        "sale_event_category",
        "sale_event_category_once",
        "sale_event_category_events",
        "sale_event_category_events_once",
    ),
}
"""Reason codes whose sentence is one of several phrasings (rules.py picks by the facts)."""

_PROBE_MONEY = (1111.0, 2222.0, 3333.0)


def _marked(template: str) -> str:
    """A format string with each slot ("{current}") written as a marker instead."""
    out = []
    for literal, field, _spec, _conversion in Formatter().parse(template):
        out.append(literal)
        if field is not None:
            out.append(f"{_MARK}{field}{_MARK}")
    return "".join(out)


def _pattern(template: str) -> re.Pattern[str]:
    """The template as a regex: literal text escaped, each slot a lazy group (a repeated
    slot, such as an event's name, must repeat the same text)."""
    parts = template.split(_MARK)
    out: list[str] = []
    seen: set[str] = set()
    for i, part in enumerate(parts):
        if i % 2 == 0:
            out.append(re.escape(part))
        elif part in seen:
            out.append(f"(?P={part})")
        else:
            seen.add(part)
            out.append(f"(?P<{part}>.+?)")
    return re.compile("".join(out), re.DOTALL)


def _sale_line_templates(language: str) -> list[str]:
    """The calendar sale's model line (`inputs.model_text`), with its prices as markers:
    a range when the low and high estimates differ, one price when they agree."""
    out = []
    for low, high in ((_PROBE_MONEY[0], _PROBE_MONEY[1]), (_PROBE_MONEY[0], _PROBE_MONEY[0])):
        numbers: dict[str, float | int | str] = {
            "name": f"{_MARK}name{_MARK}",
            "days": f"{_MARK}days{_MARK}",
            "price_from": low,
            "price_to": high,
            "current": _PROBE_MONEY[2],
        }
        line = model_text(Reason("sale_event", Polarity.WAIT, numbers, ""), language, "USD")
        for name, amount in (("price_from", 1111.0), ("price_to", 2222.0), ("current", 3333.0)):
            line = line.replace(money(amount, "USD", language), f"{_MARK}{name}{_MARK}")
        out.append(line)
    return out


@cache
def _patterns(code: str, language: str) -> tuple[re.Pattern[str], ...]:
    templates: list[str] = []
    if code == "stale_data":
        templates.append(_marked(_STALE.get(language, _STALE["en"])))
    else:
        for phrase in _PHRASES.get(code, (code,)):
            try:
                templates.append(_marked(template(phrase, language)))
            except KeyError:  # not a code phrasing.py knows
                continue
        if code == "sale_event":
            templates += _sale_line_templates(language)
    return tuple(_pattern(t) for t in templates)


def reason_slots(code: str, text: str, language: str) -> dict[str, str] | None:
    """The reason's slot values exactly as its sentence writes them ("$1,299.00", "12.5",
    "Black Friday"), read back from the sentence by its own phrasing; None when the text
    is none of the code's phrasings (then nothing can be said of its parts)."""
    text = text.strip()
    for pattern in _patterns(code, language_tag(language)):
        match = pattern.fullmatch(text)
        if match is not None:
            return {k: v for k, v in match.groupdict().items() if v is not None}
    return None


# --- inputs and result -----------------------------------------------------------------------


_DEFAULT_POLARITY: dict[str, Polarity] = {
    **dict.fromkeys(
        (
            "near_all_time_low",
            "at_all_time_low",
            "below_90d_avg",
            "low_percentile",
            "well_rated",
            "forecast_buy",
            "forecast_deal",
            "deal_buy",
        ),
        Polarity.BUY,
    ),
    **dict.fromkeys(
        (
            "above_90d_avg",
            "high_percentile",
            "price_falling",
            "upcoming_sale",
            "sale_event",
            "out_of_stock",
            "over_budget",
            "was_price_untrusted",
            "pre_sale_hike",
            "forecast_wait",
            "deal_wait",
            "no_deal_yet",
        ),
        Polarity.WAIT,
    ),
    **dict.fromkeys(("quality_floor", "rating_falling", "over_budget_at_low"), Polarity.SKIP),
}
"""A code's usual polarity, for records that do not carry one (rules.py decides; two codes,
the "was" price and the pre-sale hike, are neutral in some situations)."""


@dataclass(frozen=True, slots=True)
class CheckReason:
    """One leading reason as the model read it: its code, which way it points, its text."""

    code: str
    polarity: Polarity
    text: str


@dataclass(frozen=True, slots=True)
class CheckInputs:
    """What the explanation was written from: `ExplanationInputs` plus the reasons' codes
    and polarities, which the checker needs to tell which claim points which way."""

    title: str
    verdict: VerdictKind
    language: str
    reasons: tuple[CheckReason, ...]

    @property
    def label(self) -> str:
        return self.verdict.label(self.language)

    @classmethod
    def of(cls, title: str, verdict: Verdict, currency: str = "USD") -> CheckInputs:
        """The inputs of `ExplanationInputs.of(title, verdict, currency)`, with codes."""
        inputs = ExplanationInputs.of(title, verdict, currency)
        leading = leading_reasons(verdict)
        return cls(
            title=inputs.title,
            verdict=verdict.kind,
            language=language_of(verdict),
            reasons=tuple(
                CheckReason(r.code, r.polarity, text)
                for r, text in zip(leading, inputs.reasons, strict=True)
            ),
        )

    @classmethod
    def from_record(cls, row: Mapping[str, object]) -> CheckInputs:
        """From a gold or bench record: language, title, verdict, codes, reasons and
        optionally polarities (else each code's usual one)."""
        codes = [str(c) for c in _seq(row.get("codes"))]
        texts = [str(t) for t in _seq(row.get("reasons"))]
        given = [str(p) for p in _seq(row.get("polarities"))]
        polarities = [
            Polarity(given[i]) if i < len(given) else _DEFAULT_POLARITY.get(code, Polarity.INFO)
            for i, code in enumerate(codes)
        ]
        return cls(
            title=str(row.get("title", "")),
            verdict=VerdictKind(str(row["verdict"])),
            language=language_tag(str(row.get("language", "en"))),
            reasons=tuple(
                CheckReason(code, polarity, text)
                for code, polarity, text in zip(codes, polarities, texts, strict=True)
            ),
        )


def _seq(value: object) -> Sequence[object]:
    return value if isinstance(value, list | tuple) else ()


@dataclass(frozen=True, slots=True)
class CheckResult:
    faithful: bool
    specific: bool
    fluent: bool
    failures: tuple[tuple[str, str], ...]
    """Every failed check as (code, detail), fluency first, in the order checked."""

    @property
    def ok(self) -> bool:
        return self.faithful and self.specific and self.fluent

    @property
    def code(self) -> str | None:
        """The first failure's short code ("unknown_words", "not_specific", ...), or None."""
        return self.failures[0][0] if self.failures else None

    @property
    def detail(self) -> str:
        return self.failures[0][1] if self.failures else ""


# --- the strongest reason ----------------------------------------------------------------------

_MISSING = ("no_price", "stale_price", "unusable_price", "few_observations")
_MODIFIERS = frozenset(
    {"low_stock", "stale_data", "effective_price", "active_promotion", "offer_short"}
)
_R = TypeVar("_R", Reason, CheckReason)
_SUPPORTS = {
    VerdictKind.BUY: Polarity.BUY,
    VerdictKind.WAIT: Polarity.WAIT,
    VerdictKind.SKIP: Polarity.SKIP,
    VerdictKind.INSUFFICIENT_DATA: Polarity.INFO,
}


def key_reason(kind: VerdictKind, reasons: Sequence[_R]) -> _R | None:
    """The reason an explanation must name: for not enough data, what is missing; else the
    first leading reason that carries the verdict, else the first that is not a mere
    modifier (stock left, data age, a running offer), else the first."""
    if not reasons:
        return None
    if kind is VerdictKind.INSUFFICIENT_DATA:
        return next((r for r in reasons if r.code in _MISSING), reasons[0])
    supporting = _SUPPORTS[kind]
    for r in reasons:
        if r.polarity is supporting:
            return r
    return next((r for r in reasons if r.code not in _MODIFIERS), reasons[0])


_KEY_SLOTS: dict[str, tuple[str, ...]] = {
    "near_all_time_low": ("current", "low", "gap_pct"),
    "at_all_time_low": ("current",),
    "low_not_established": ("days_tracked", "low"),
    "below_90d_avg": ("delta_pct", "avg90"),
    "above_90d_avg": ("delta_pct", "avg90"),
    "near_90d_avg": ("avg90",),
    "low_percentile": ("share",),
    "high_percentile": ("share",),
    "price_falling": ("drop_pct",),
    "was_price_untrusted": ("list_price", "median90"),
    "upcoming_sale": ("name", "promo_price", "saving_pct"),
    "active_promotion": ("name", "promo_price", "ends"),
    "effective_price": ("effective",),
    "offer_short": ("name", "floor"),
    "fake_discount": ("true_pct", "prior_low", "claimed_pct"),
    "pre_sale_hike": ("raised_pct", "raised_from"),
    "sale_event": ("name", "price_from", "price_to"),
    "quality_floor": ("rating",),
    "rating_falling": ("recent", "earlier"),
    "well_rated": ("rating",),
    "over_budget": ("budget", "current"),
    "over_budget_at_low": ("budget", "current", "low"),
    "forecast_wait": ("deal_price", "expected_low"),
    "forecast_buy": ("cost_pct", "deal_price"),
    "forecast_deal": ("current", "deal_price"),
    "deal_buy": ("current", "deal_price", "avg90"),
    "deal_wait": ("deal_price", "current"),
    "no_deal_yet": ("deal_price",),
    "low_stock": ("quantity",),
    "few_observations": ("observations", "min_observations"),
    "stale_price": ("age", "last_price_at"),
    "stale_data": ("age",),
}
"""What names a reason: its key numbers, dates or event name (any one will do)."""
_KEY_REQUIRED = {"upcoming_sale": "name", "sale_event": "name"}
"""Reasons about a sale are named by the sale: what the shopper waits for."""
_KEY_PHRASES: dict[str, dict[str, tuple[str, ...]]] = {
    "out_of_stock": {"en": ("out of stock",), "zh": ("缺货",), "ja": ("在庫切れ",)},
    "no_price": {
        "en": ("no recorded price", "no price"),
        "zh": ("价格记录",),
        "ja": ("価格記録",),
    },
    "unusable_price": {"en": ("not above zero",), "zh": ("不大于零",), "ja": ("0以下",)},
}
"""Reasons without numbers are named by their event."""


# --- reading text ----------------------------------------------------------------------------

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_CJK_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
_KANA = re.compile(r"[\u3040-\u30ff]")
_JA_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff々]+")
_HIRAGANA = re.compile(r"[\u3040-\u309f]+")
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)*")
_NUMBER = re.compile(r"(?<![\d.])(\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(\d+))?")
_ISO_DATE = re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)")

_IRREGULAR = {
    "fell": "fall",
    "fallen": "fall",
    "rose": "rise",
    "risen": "rise",
    "sold": "sell",
    "bought": "buy",
    "paid": "pay",
    "went": "go",
    "gone": "go",
    "seen": "see",
    "saw": "see",
    "better": "good",
    "best": "good",
    "worse": "bad",
    "worst": "bad",
    "lower": "low",
    "lowest": "low",
    "higher": "high",
    "highest": "high",
    "less": "little",
    "least": "little",
    "n't": "not",
    "its": "it",
    "it's": "it",
}


@cache
def lemmas(word: str) -> frozenset[str]:
    """The forms a word may stand for: itself, an irregular base, and what stripping one
    common suffix leaves ("rated" → rate, rat; "prices" → price, pric). Deliberately loose,
    and applied alike to the inputs and the text, so two forms of one word meet."""
    word = word.lower()
    if word.endswith("'s"):
        word = word[:-2]
    out = {word}
    if word in _IRREGULAR:
        out.add(_IRREGULAR[word])
    for suffix, repl in (
        ("ies", "y"),
        ("ied", "y"),
        ("es", ""),
        ("s", ""),
        ("ed", ""),
        ("ed", "e"),
        ("d", ""),
        ("ing", ""),
        ("ing", "e"),
        ("er", ""),
        ("er", "e"),
        ("est", ""),
        ("ly", ""),
    ):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            out.add(word[: len(word) - len(suffix)] + repl)
    for form in list(out):  # doubled consonants: "dropped" → dropp → drop
        if len(form) >= 4 and form[-1] == form[-2] and form[-1] not in "aeiouls":
            out.add(form[:-1])
    return frozenset(out)


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


STOPWORDS_EN = _words(
    """
    a an the it its it's this that these those there here is are was were be been being has
    have had do does did will would can could should may might must of in on at to for from
    by with about as into over under than then so and or but if when while because since
    until though although yet also just only even still very too more most less much many
    few not no nor any some all each both one i you your we our they their them me my us
    what which who how why where up down out off again once own same such get gets got per
    via s cannot after before
    """
)
"""Function words: they carry no claim of their own."""

ALLOWED_EN = _words(
    """
    now today right moment time wait hold later longer little bit until back buy buying pay
    price prices cost costs watch alert remind tell let know check ask again soon once
    history drop drops dropped fall falls falling fallen falls down come comes coming start
    starts stop stops settle settles keep further lower low high higher make makes
    sense good need want if look for instead other alternative better rated pass
    whatever reason seem seems slipped slip elsewhere option options recover recovers
    nothing special ordinary dip cut real really discount trusted inflated close
    near about expected expect should bring brings would rather instead against away during
    within sure yet already ever given so around above below under over among highest true
    claimed claims matches match judge reliable tracking record recorded short enough more
    data average others give offer deeper deep go ahead product item
    """
)
"""Neutral advice and connective words a shopper's sentence needs beyond the reasons
(reviewed: none names a product property, a quality or a number)."""

FUNCTION_ZH = frozenset(
    "的了是在和与也还就都而但又比到从把被让给对为以之其这那它你我很更最太再才只已将会"
    "能可要该着过得个件条天次约于及或并吧呢啊先里有离用"
)
"""Chinese characters allowed on their own anywhere: particles, measure words, pronouns."""

ALLOWED_ZH = _words(
    """
    现在 现价 当前 价格 降价 提醒 盯着 帮你 可以 建议 等 再买 下单 入手 合适
    划算 放心 需要 的话 就可以 买 开始 到时 设个 观望 一下 一阵 先别 别急 急着
    更好 更低 更高 附近 回到 回落 通知 第一时间 到货 补货 以内 以下 降到 低于
    高于 真正 迷惑 等到 届时 稳住 可能 变差 换一款 评分更高 同类 商品 选择 回升
    考虑 或者 过几天 再来 看看 问我 记录 多了 够 数据 修正 已经 继续 往下走
    偏贵 便宜 只要 只有 只差 仅高 正处于 追平 已是 这件 目前 买不到 超过 预算
    价 虚标 不可信 中位数 参考 作为 还不能 差不多 没有 明显 优惠
    并不算 对比 实际 号称 其实 并没有 用上 后 只需 正在 进行 为 前 给出 从 跌
    降 时 再 买一件 而且 另外 还比 就是 而 再过 预计 是 这个 真降价 时间 之前
    稳 一款 正合适 不过关 别的 别被 所需 活动价 高出 还低 还高 低 高 即使 来说
    仍要 算不上 低价 并不是 真折扣 降幅 明显 更大 好时机 眼下 下不了单
    """
)
"""Chinese words a shopper's sentence needs beyond the reasons (reviewed: neutral advice,
connectives and the plain words for price, discount, stock and reviews)."""

FUNCTION_JA = frozenset("々一")
"""Japanese characters allowed alone besides hiragana (which always passes)."""

ALLOWED_JA = _words(
    """
    今 現在 現時点 時点 価格 値段 値下がり 下がる 下が 上が 安く 高く 高め 低め
    買い 買う 買っ 購入 待つ 待っ 待ち 方 様子 見る 見て 見送 通知 知らせ 確認
    セール 開始 始ま 予算 以内 以下 以上 在庫 入荷 再入荷 他 商品 選ぶ 選択 評価
    レビュー データ 記録 判断 少し 数日 後 前 改めて 日 件 点 約 予想 十分 理由
    判定 本当 値引き 割引 実質 目安 参考 良 十分 時期 機会 チャンス
    """
)
"""Japanese words beyond the inputs: a first cut (price, wait, buy, stock, reviews,
notify), not yet reviewed by a native reader; Japanese was not part of the gold data."""

_DOUBLED_OK = frozenset(
    {"等等", "看看", "试试", "想想", "常常", "刚刚", "渐渐", "稍稍", "慢慢", "天天"}
)


# --- direction -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Cue:
    name: str
    pattern: re.Pattern[str]
    licensed_by: frozenset[str] = frozenset()
    """Supporting reasons that make the claim the verdict's own (a WAIT's falling price)."""


_CHEAP = _Cue(
    "cheap",
    re.compile(
        r"\b(cheap|cheaper now|bargain|good deal|great deal|good price|great price|steal)\b"
        r"|很便宜|挺便宜|便宜了|价格便宜|划算|好价|性价比|お買い得|安い|格安|割安"
    ),
)
_DROPPED = _Cue(
    "price_dropped",
    re.compile(
        r"\bprice (has |had )?(dropped|fallen|gone down|come down|decreased)\b|\bprice drop\b"
        r"|\bdropped in price\b|降价了|价格下降|价格下跌|价格降了|跌了"
        r"|値下がりし|下がりました|下がった"
    ),
    frozenset({"price_falling", "forecast_wait"}),
)
_BUY_NOW = _Cue(
    "buy_now",
    re.compile(
        r"\b(buy (it )?now|buy it today|worth buying|worth it|good time to buy|go for it)\b"
        r"|值得买|值得入手|值得现在买|现在买|现在入手|现在下单|马上下单|赶紧|入手正合适|可以放心下单"
        r"|今が買い時|今すぐ買|今買う|買うべき|買いです"
    ),
)
_WAIT = _Cue(
    "wait",
    re.compile(
        r"\b(wait|waiting|hold off|later|not yet)\b"
        r"|再等|等等|等到|等价格|观望|先别|别急|晚点|以后再|待った方|待つ|待って|待ち|見送|様子を見"
    ),
    frozenset({"forecast_buy"}),
)
_WHEN_LOWER = _Cue(
    "when_lower",
    re.compile(
        r"\b(when|once|if) (it|the price) (drops|falls|goes down|gets cheaper)\b"
        r"|\b(drops|falls) (to|below)\b|降到|降价时|降价后|降价了再|下がったら|値下がりしたら"
    ),
)
"""A BUY that offers to say when the price drops: that is a wait's advice, not a buy's."""
_NEGATIVE = _Cue(
    "not_worth",
    re.compile(
        r"\b(not worth|don't buy|do not buy|skip it|avoid|overpriced|too expensive|pass on)\b"
        r"|不值得|别买|不要买|不建议|太贵|不划算|おすすめしません|買わない方|割高"
    ),
)
_PRAISE = _Cue(
    "praise",
    re.compile(
        r"\b(well rated|great reviews|good reviews|highly rated|excellent|(good|great) quality)\b"
        r"|口碑不错|口碑好|好评|质量好|評価は良好|評判が良|高評価"
    ),
)
_DEAL_NOW = _Cue(
    "deal_now",
    re.compile(
        r"^of (the |a |an |its )?[\w' -]{0,30}?\b(discount|deal|coupon|promotion|offer)s?\b"
    ),
)
"""A WAIT or a SKIP "because of the pre-sale discount" (the body after "because"): an
offer is never why not to buy."""
_BELITTLED = _Cue(
    "belittled_rating",
    re.compile(
        r"\bonly (?:a )?\d(?:\.\d+)?/5\b|\brated only\b|只有\d(?:\.\d+)?/5|仅\d(?:\.\d+)?/5"
    ),
)
"""A BUY whose rating is "only 4.21/5": the word says the rating is low, the verdict that
it is a reason to buy."""
_UNAVAILABLE = _Cue(
    "unavailable",
    re.compile(
        r"\b(out of stock|sold out|unavailable|(?:can't|cannot|can not) (?:buy|order) it)\b"
        r"|缺货|买不到|下不了单|断货|无货|在庫切れ|品切れ"
    ),
    frozenset({"out_of_stock"}),
)
_STILL_FALLING = _Cue(
    "still_falling",
    re.compile(
        r"\b(keep(?:s)? falling|still falling|falling further|continue(?:s)? to fall)\b"
        r"|还在往下走|往下走|还在降|还会降|继续降|继续下跌"
    ),
    frozenset({"price_falling", "forecast_wait"}),
)
_ABOVE_AVERAGE = _Cue(
    "above_average",
    re.compile(
        r"\b(above|higher than|over) (?:its |the )?90-day average\b"
        r"|比(?:近)?90天均价[^，。；,;]{0,12}?高|高于(?:近)?90天均价"
    ),
    frozenset({"above_90d_avg"}),
)
_PRICE_LEVEL = frozenset(
    {"high_percentile", "above_90d_avg", "pre_sale_hike", "over_budget", "over_budget_at_low"}
)
"""Reasons that say today's price is high: above most past prices or its average, raised
before a sale, over the shopper's budget."""
_EXPENSIVE = _Cue(
    "expensive",
    re.compile(r"\b(?:still |rather |a bit )?(?:expensive|pricey)\b|偏贵|还是贵|有点贵|价格偏高"),
    _PRICE_LEVEL,
)
"""Today's price called high: only a reason that says so makes it true. A WAIT resting on
stock left, on no reason at all ("现价偏贵"), or on a price close to its average
("现价和90天均价US$41.46差不多，偏贵") invents the judgement."""
_NOT_CHEAP = _Cue(
    "not_cheap",
    re.compile(r"\bnot (?:that |so |very )?cheap\b|不算便宜|并不便宜|不便宜"),
    _PRICE_LEVEL
    | {
        "near_90d_avg", "deal_wait", "no_deal_yet", "forecast_wait", "fake_discount",
        "was_price_untrusted", "upcoming_sale", "sale_event",
    },
)  # fmt: skip
"""Today's price called no bargain: also true of a price only at its average, short of a
deal, above an offer to come, or under a discount that is not one; not of a WAIT on stock
left ("只有2件，并不算便宜")."""
_NEEDS_REASON = (_UNAVAILABLE, _STILL_FALLING, _ABOVE_AVERAGE, _EXPENSIVE, _NOT_CHEAP)
"""Facts only one reason states: a text that claims one without that reason among the
inputs invents it ("价格接近90天均价US$352.71，现在下不了单" for a product in stock)."""

_PRICEY = _Cue("pricey", _EXPENSIVE.pattern)
"""A BUY that calls its own price high ("正处于历史最低价，还是偏贵"); a WAIT may say it."""
_ORDINARY = _Cue(
    "ordinary_price",
    re.compile(
        r"\bordinary\b|\bnothing special\b|\bnot (?:yet )?(?:a|one) (?:good |real )?deal\b"
        r"|\bnot a low (?:one|price)\b|不是优惠价|不算优惠|算不上低价|没有明显优惠|还没到优惠价"
        r"|お得な価格ではありません"
    ),
)
"""A BUY that calls its price ordinary or no deal ("…10.5% below its 90-day average of
$120.04, the price is ordinary"): a price reason that says buy says the price is low; a
WAIT's words for a fair price do not belong to it."""
_BESIDE_THE_DATA = _Cue(
    "not_about_the_data",
    re.compile(r"\bin stock\b|\bonly needs? (?:\d|at least)|\bafter buying\b|库存|在庫"),
)
"""Not enough data is about the price history alone: stock left is no cause of it ("…because
there are only 3 left in stock and only 8 price observations"), nor is a purchase, and
"it only needs 10" turns the minimum round."""
_FORBIDDEN: dict[VerdictKind, tuple[_Cue, ...]] = {
    VerdictKind.BUY: (_WAIT, _NEGATIVE, _WHEN_LOWER, _BELITTLED, _PRICEY, _ORDINARY),
    VerdictKind.WAIT: (_CHEAP, _DROPPED, _BUY_NOW, _NEGATIVE, _DEAL_NOW),
    VerdictKind.SKIP: (_CHEAP, _DROPPED, _BUY_NOW, _PRAISE, _DEAL_NOW),
    VerdictKind.INSUFFICIENT_DATA: (_CHEAP, _DROPPED, _BUY_NOW, _NEGATIVE, _BESIDE_THE_DATA),
}
"""The claims that point against each verdict."""


# --- the checks -----------------------------------------------------------------------------

MAX_CHARS = 360
MIN_WORDS_EN, MAX_WORDS_EN = 4, 60
_QUANTITY = re.compile(r"\d[\d,.]*(?:/\d+)?")
"""A number counts as a word of an English explanation's length, a rating (4.32/5) as one:
"1708 reviews rate it 4.32/5" is a whole reason in three words and two numbers, where "it
is 4.32/5" is still too short."""
MIN_CJK, MAX_CJK = 4, 140


def check_explanation(text: str, inputs: CheckInputs) -> CheckResult:
    """Whether `text` (the full explanation, answer prefix included) is faithful to
    `inputs`, names their strongest reason, and reads as fluent text in their language."""
    fluent = _fluency(text, inputs)
    body = _body(text, inputs)
    faithful = _faithfulness(body, inputs)
    specific = _specificity(body, inputs)
    return CheckResult(
        faithful=not faithful,
        specific=not specific,
        fluent=not fluent,
        failures=tuple(fluent + faithful + specific),
    )


def _body(text: str, inputs: CheckInputs) -> str:
    """The text after the verdict's label and its "because" (the claims)."""
    text = text.strip()
    label = inputs.label
    if text.startswith(label):
        text = text[len(label) :]
    text = re.sub(r"^[\s,，、:：]*(because|因为|なぜなら)?[\s,，、:：]*", "", text, count=1)
    return text


def _fluency(text: str, inputs: CheckInputs) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    stripped = text.strip()
    zh = inputs.language in ("zh", "ja")  # written in CJK (Japanese: with kana)
    if not stripped.startswith(inputs.label):
        out.append(("wrong_prefix", f"does not start with {inputs.label!r}"))
    body = _body(stripped, inputs)
    cjk = len(_CJK.findall(body)) + (len(_KANA.findall(body)) if inputs.language == "ja" else 0)
    if zh:
        foreign = sorted(set(_latin_words(body)) - set(_latin_words(_input_text(inputs))))
        if cjk < MIN_CJK or foreign:
            named = ", ".join(foreign) or "too few CJK"
            out.append(("wrong_script", f"not {inputs.language}: {named}"))
    elif cjk or _KANA.search(body):
        out.append(("wrong_script", "CJK characters in English"))
    doubled = _doubled(stripped, inputs)
    if doubled:
        out.append(("repeated_chars", doubled))
    repeated = _repeated_phrase(body, inputs.language, _input_text(inputs), _names_of(inputs))
    if repeated:
        out.append(("repeated_phrase", repeated))
    again = _repeated_numbers(body, _names_of(inputs))
    if again:
        out.append(("repeated_clause", again))
    broken = (_BECAUSE_OF_CLAUSE if inputs.language == "en" else _SPAN_MISSING).search(body)
    if broken is not None:
        out.append(("ungrammatical", broken.group(0)))
    if not ends_sentence(stripped.rstrip("\"'”’)）")):
        out.append(("no_sentence_end", stripped[-12:]))
    sentences = len(
        SENTENCE_END.findall(stripped.rstrip() + ("" if ends_sentence(stripped) else "."))
    )
    if sentences > 2:
        out.append(("too_many_sentences", f"{sentences} sentences"))
    words = len(_WORD.findall(body.lower()))
    if len(stripped) > MAX_CHARS:
        out.append(("too_long", f"{len(stripped)} characters"))
    elif zh and cjk > MAX_CJK:
        out.append(("too_long", f"{cjk} CJK characters"))
    elif not zh and words > MAX_WORDS_EN:
        out.append(("too_long", f"{words} words"))
    said = words + len(_QUANTITY.findall(body))
    if (zh and cjk < MIN_CJK) or (not zh and said < MIN_WORDS_EN):
        out.append(("too_short", f"{cjk if zh else said} {'CJK characters' if zh else 'words'}"))
    return out


_BECAUSE_OF_CLAUSE = re.compile(
    r"^of\b(?:[^,.;:]|(?<=\d)[.,](?=\d))*?"
    r"\b(is|are|was|were|starts|ends|has|have|had|will|would|can|claims)\b",
    re.IGNORECASE,
)
""""…because of the 618 starts in 8 days": a clause where "because of" wants a noun."""


def _latin_words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _doubled(text: str, inputs: CheckInputs) -> str:
    """A character written twice running that the language does not double (价价), a
    character or word three times running, or an English word twice ("the the")."""
    source = _input_text(inputs)
    for match in re.finditer(r"([^\W\d_])\1+", text):
        run = match.group(0)
        if _CJK.match(run[0]):
            if len(run) > 2 or (run not in _DOUBLED_OK and run not in source):
                return run
        elif len(run) > 3:
            return run
    twice = re.search(r"\b([a-z]+)\s+\1\b", text.lower())
    if twice and twice.group(1) not in {"that", "had"}:
        return twice.group(0)
    return ""


_TOKEN = re.compile(r"[a-z]+(?:'[a-z]+)*|\d+(?:[.,]\d+)*")


def _repeated_phrase(body: str, language: str, source: str, names: Sequence[str] = ()) -> str:
    """A phrase said more often than the inputs say it: four words or numbers in English,
    four characters in Chinese ("价格记录不大于零" twice when the reason says it once). A
    sale's name may come back in the advice ("…Black Friday… Wait for Black Friday")."""
    for name in names:
        body = body.replace(name, " ")
    grams: list[str]
    if language in ("zh", "ja"):
        runs = (_JA_RUN if language == "ja" else _CJK_RUN).findall(body)
        grams = [run[i : i + 4] for run in runs for i in range(len(run) - 3)]
    else:
        words = _TOKEN.findall(body.lower())
        grams = [" ".join(words[i : i + 4]) for i in range(len(words) - 3)]
        source = " ".join(_TOKEN.findall(source.lower()))
    counts = collections.Counter(grams)
    for gram, count in counts.items():
        if count > 1 and count > source.count(gram):
            return gram
    return ""


def _repeated_numbers(body: str, names: Sequence[str] = ()) -> str:
    """The same two numbers written twice in the same order within one sentence: a clause
    said again in other words ("比90天均价$351.45低14.2%，现在买的价格比90天均价$351.45低
    14.2%"), which the four-character phrase check misses when the words around the
    numbers change. The advice may repeat the why ("Wait for Double 11 in 5 days"), so
    only one sentence is looked at, and the sale's name is not a number."""
    for name in names:
        body = body.replace(name, " ")
    start = 0
    for end in [*sentence_ends(body), len(body)]:
        sentence = unicodedata.normalize("NFKC", body[start:end])
        start = end
        numbers = [m.group(0) for m in _NUMBER.finditer(sentence)]
        pairs = list(itertools.pairwise(numbers))
        for i, pair in enumerate(pairs):
            if pair[0] != pair[1] and pair in pairs[i + 2 :]:
                return f"{pair[0]} … {pair[1]} twice"
        counted = collections.Counter(
            f"{m.group(1)}天" if m.group(1) else m.group(0).lower()
            for m in _NUMBER_UNIT.finditer(sentence)
        )
        twice = next((unit for unit, n in counted.items() if n > 1), None)
        if twice:
            return f"{twice!r} twice"
    return ""


_NUMBER_UNIT = re.compile(r"(?<![近\d.,])(\d+)\s?天(?!内)|\bin \d+ (?:days?|weeks?)\b")
"""A span of time said twice in one sentence ("15天后Christmas Sale将在15天后开始", "15天后
Christmas Sale将在15天再买", "15天后再过15天"); a window ("近30天", "2天内") is no span."""
_SPAN_MISSING = re.compile(
    r"再过(?!\s?(?:\d+|[一两几数半]+)\s?个?(?:天|周|星期|月|年|小时))|[，、；：。！？]{2,}"
)
"""再过 ("in … time") with no span of time after it ("15天后再过Christmas Sale", "再过15%
Christmas Sale"), or two marks of punctuation in a row ("US$460.48；，而且")."""


def _names_of(inputs: CheckInputs) -> tuple[str, ...]:
    """The event and offer names the reasons write, longest first."""
    names = {
        slots["name"]
        for r in inputs.reasons
        if (slots := reason_slots(r.code, r.text, inputs.language)) and slots.get("name")
    }
    return tuple(sorted(names, key=len, reverse=True))


def _input_text(inputs: CheckInputs) -> str:
    return "\n".join((inputs.title, inputs.label, *(r.text for r in inputs.reasons)))


_MISREAD: dict[str, tuple[tuple[str, re.Pattern[str]], ...]] = {
    "zh": (
        ("wrong_direction", re.compile(r"还比现在高")),
        ("wrong_direction", re.compile(r"并不是降价前\d+天内的最低价")),
        (
            "invented_fact",
            re.compile(r"我可以[^，。；]*下单|我可以(?:帮你)?(?:第一时间|马上|立刻|立即)?买"),
        ),
        (
            "ungrammatical",
            re.compile(
                r"还会再买|([\u4e00-\u9fff]{2,})[，、]\1|[；，]现价。"
                r"|(?:低于|高于|(?<!性价)比[高低])(?=[，。；！？]|$)"
            ),
        ),
    ),
    "en": (
        ("false_comparison", re.compile(r"\btoday's price would bring (?:it|one unit) to\b")),
        ("false_comparison", re.compile(r"\bcloser to \S*\d\S* than \d")),
        ("false_comparison", re.compile(r"\b(?:above|below|under|over) (?:the )?[A-Z][a-z]+")),
    ),
}
"""What the adapter writes that no reason can make right, each read in a served store
beside its reasons (2026-12-03). Chinese: an all-time low "还比现在高" (still above today's
price), a hollow discount turned round ("但并不是降价前30天内的最低价"), a promise to order
or buy for the shopper ("我可以第一时间下单", "我可以第一时间买"), "而且还会再买", a word said
twice ("另外，另外"), a clause that is only "现价", a comparison that lost what it compares
with ("近90天的价格都低于。", "近90天的价格比低。"). English: "today's price would bring it
to $87.12" (today's price, where the reason gives what the offer would cost), "today's
price is closer to $114.99 than 97.2% of prices" (an offer's price and a share of past
prices run together), a price above or below a sale's name ("raised 14.4% above $298.57 in
the last 14 days, above Christmas Sale"; "10.8% below the Christmas Sale price" of the
sale's own price)."""
_SHARE_OF_PRICES_ZH = re.compile(r"(\d+(?:\.\d+)?)%的价格都?比现在(高|低)")
""""近90天里有92.8%的价格都比现在高": today is cheaper than that share of prices."""


def _inverted_share(body: str, inputs: CheckInputs) -> str:
    """A share of past prices said to lie on the wrong side of today's: "有92.8%的价格都比
    现在高" where the reason says today's price is above 92.8% of them. The number is the
    reason's, so the guard passes it; only the direction is wrong."""
    said = {
        (m.group(1), r.code)
        for r in inputs.reasons
        if r.code in _SIDES.values()
        for m in _PERCENT.finditer(r.text)
    }
    for match in _SHARE_OF_PRICES_ZH.finditer(body):
        share, side = match.group(1), match.group(2)
        meant, other = _SIDES[side], _SIDES["低" if side == "高" else "高"]
        if (share, other) in said and (share, meant) not in said:
            return match.group(0)
    return ""


_SIDES = {"高": "low_percentile", "低": "high_percentile"}
"""Past prices "比现在高" (above today's) is the reason that today's price is low, and the
reverse."""


def _faithfulness(body: str, inputs: CheckInputs) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    cue = _against(body, inputs)
    if cue:
        out.append(("wrong_direction", cue))
    if inputs.language == "zh":
        inverted = _inverted_share(body, inputs)
        if inverted:
            out.append(("wrong_direction", f"inverted share: {inverted!r}"))
    misread = _MISREAD.get(inputs.language, ())
    out += [(code, m.group(0)) for code, rule in misread if (m := rule.search(body))]
    grounds = _grounds(inputs)
    guard = check_grounding(body, grounds)
    if guard.ungrounded:
        out.append(("ungrounded_number", ", ".join(guard.ungrounded)))
    elif guard.false_comparisons:
        out.append(("false_comparison", "; ".join(guard.false_comparisons)))
    else:
        twisted = _twisted_comparison(body, inputs) if inputs.language == "en" else ""
        twisted = twisted or _todays_price(body, inputs) or _misused_amount(body, inputs)
        if twisted:
            out.append(("false_comparison", twisted))
    invented = _invented(body, inputs)
    if invented:
        out.append(("invented_fact", invented))
    share = _unbacked_percent(body, inputs)
    if share:
        out.append(("ungrounded_number", f"{share}: no reason gives this share"))
    other = _other_polarity(body, inputs)
    if other:
        out.append(("other_polarity", other))
    unknown = _unknown_words(body, inputs)
    if unknown:
        out.append(("unknown_words", ", ".join(unknown)))
    return out


def _writes(body: str, value: str) -> bool:
    """Whether the body writes `value` as the reason did: the words, or its number to
    the digit (stricter than `_names`, which lets "3" name a rating of 3.39)."""
    lowered = body.lower()
    if value.lower() in lowered:
        return True
    number = _NUMBER.search(value)
    if number is None or _ISO_DATE.search(value):
        return False
    digits = re.escape(number.group(0))
    return re.search(rf"(?<![\d.,]){digits}(?![\d]|[.,]\d)", lowered) is not None


_DIRECTIONS = frozenset({Polarity.BUY, Polarity.WAIT, Polarity.SKIP})


def _other_polarity(body: str, inputs: CheckInputs) -> str:
    """A reason that points another way, cited as if it were the verdict's ("口碑不错" in a
    WAIT, an all-time low in a SKIP): the card shows that reason on the other side, so the
    sentence would argue against its own verdict. Named by what only that reason says (a
    number also written by a supporting reason or the title is fair to repeat)."""
    if inputs.verdict is VerdictKind.INSUFFICIENT_DATA:
        return ""
    supporting = _SUPPORTS[inputs.verdict]
    own = "\n".join(
        [inputs.title] + [r.text for r in inputs.reasons if r.polarity is supporting]
    ).lower()
    for reason in inputs.reasons:
        if reason.polarity is supporting or reason.polarity not in _DIRECTIONS:
            continue
        if reason.code in _MODIFIERS:
            continue
        phrases = _KEY_PHRASES.get(reason.code, {}).get(inputs.language, ())
        slots = reason_slots(reason.code, reason.text, inputs.language)
        if slots is None:  # a sentence of another shape: its numbers name it
            values = [m.group(0) for m in _NUMBER.finditer(reason.text)]
        else:
            values = [slots[s] for s in _KEY_SLOTS.get(reason.code, ()) if s in slots]
        for value in (*phrases, *values):
            if len(value) < 2 or value.lower() in own:
                continue
            if _writes(body, value):
                return f"{reason.code} ({reason.polarity.value}): {value}"
    cue = _PRAISE.pattern.search(body.lower())
    if cue and supporting is not Polarity.BUY:
        return f"praise: {cue.group(0)!r}"
    return ""


def _against(body: str, inputs: CheckInputs) -> str:
    """The first claim in the body that points against the verdict, or ""."""
    supporting = _SUPPORTS[inputs.verdict]
    own = {r.code for r in inputs.reasons if r.polarity is supporting}
    return _unlicensed(body, _FORBIDDEN[inputs.verdict], own)


def _invented(body: str, inputs: CheckInputs) -> str:
    """The first fact the body claims that no reason of the inputs states, or ""."""
    return _unlicensed(body, _NEEDS_REASON, {r.code for r in inputs.reasons})


def _unlicensed(body: str, cues: Sequence[_Cue], codes: set[str]) -> str:
    """The first cue the body says that none of `codes` licenses, named, or ""."""
    lowered = body.lower()
    for cue in cues:
        match = cue.pattern.search(lowered)
        if match and not (cue.licensed_by & codes):
            return f"{cue.name}: {match.group(0)!r}"
    return ""


_PERCENT = re.compile(r"(?<![\d.,])(\d+(?:\.\d+)?)\s?%")


def _unbacked_percent(body: str, inputs: CheckInputs) -> str:
    """A share the body writes that no reason writes as a share: "$183.87 is 15% under
    today's price" where 15 is the days to the sale. Every number is the reasons', so the
    grounding guard lets it through; a share must be one of theirs, to the precision the
    body chose."""
    shares = {
        Decimal(m.group(1))
        for r in inputs.reasons
        for m in _PERCENT.finditer(unicodedata.normalize("NFKC", r.text))
    }
    for match in _PERCENT.finditer(unicodedata.normalize("NFKC", body)):
        written = Decimal(match.group(1))
        if not any(_rounds_to(share, written) for share in shares):
            return match.group(0)
    return ""


_THAN = re.compile(r"\b([a-z]+) than (?:[a-z]+ ){0,2}?(?:[a-z]{0,3}[$€£¥])?(\d[\d,]*(?:\.\d+)?)")


def _twisted_comparison(body: str, inputs: CheckInputs) -> str:
    """A reason's "higher than 87.2%" written as "better than 87.2%", or one reason's
    number said to be another's ("$649.82, which is a true discount of 5.6%"): the numbers
    are the reasons', the claim joining them is not."""
    said: dict[str, set[str]] = collections.defaultdict(set)
    for reason in inputs.reasons:
        for word, number in _THAN.findall(reason.text.lower()):
            said[number].add(word)
    for match in _THAN.finditer(body.lower()):
        word, number = match.groups()
        if said.get(number) and word not in said[number]:
            return match.group(0)
    texts = [r.text for r in inputs.reasons]
    for match in _WHICH_IS.finditer(body):
        first, second = match.groups()
        owners = [t for t in texts if first in t]
        if owners and not any(second in t for t in owners):
            return match.group(0)  # "$649.82, which is a true discount of 5.6%": two reasons
    return ""


_AMOUNT = r"(?:[A-Z]{0,3}[$€£¥])(\d[\d,]*(?:\.\d+)?)"
_TODAY = {
    "en": (
        re.compile(rf"{_AMOUNT} (?:today|now)\b"),
        re.compile(rf"\b(?:today|now)(?:'s price)?(?:,| is| at| of)? {_AMOUNT}", re.IGNORECASE),
        re.compile(rf"\b(?:instead of|rather than)(?: [a-z]+){{0,3}} {_AMOUNT}"),
    ),
    "zh": (re.compile(rf"(?:现价|当前价|今天)(?:为|是|仍是)?{_AMOUNT}"),),
}


def _today_amounts(text: str, language: str) -> set[str]:
    return {m.group(1) for pattern in _TODAY.get(language, ()) for m in pattern.finditer(text)}


def _todays_price(body: str, inputs: CheckInputs) -> str:
    """An amount the body calls today's price that no reason gives as today's ("should
    bring it to $111.69 to $114.11, against $114.11 today" where a reason said "today
    $121.10"; "the expected price then is $383.99 instead of $388.31", the range's upper
    end where the price it would replace is today's; "rather than holding out for $199.34"):
    each number is the reasons', the
    claim that it is today's is not. Judged only where a reason names today's price."""
    known = set().union(*(_today_amounts(r.text, inputs.language) for r in inputs.reasons))
    if not known:
        return ""
    wrong = sorted(_today_amounts(body, inputs.language) - known)
    return f"today's price {wrong[0]} (the reasons: {', '.join(sorted(known))})" if wrong else ""


_MONEY = re.compile(_AMOUNT)
_SHARE_AS_PRICE = re.compile(
    r"\b(?:dip|drops?|falls?|comes? down|back) (?:below|under|to|near) \d[\d.,]*\s?%"
    r"|(?:降到|降至|低于|回到)\d[\d.,]*\s?%"
)
"""A share where a price to wait for goes: "Wait for a dip below 18.1%"."""
_AMOUNT_AS_TIME = re.compile(rf"\b(?:starts?|ends?|comes?|is) in {_AMOUNT}")
"""'Wait until it starts in $405.61 or less': a price where the days to a sale go."""


def _amounts(text: str) -> list[tuple[str, Decimal]]:
    """Each amount of money the text writes, as written and as a value."""
    return [(m.group(0), Decimal(m.group(1).replace(",", ""))) for m in _MONEY.finditer(text)]


def _misused_amount(body: str, inputs: CheckInputs) -> str:
    """Money the reasons never write as money, or one amount given two roles: "Wait for a
    dip below $26.40" from a fall of 26.4%, "below 18.1%" as a price to wait for, "starts
    in $405.61", "the price of $1,265.67 is close to its 90-day average of $1,265.67" (the
    average called today's price), "fallen from $1,370.96 to $1,370.96". The grounding
    guard sees only that each number is the inputs'; what the number is said to be is
    judged here."""
    normal = unicodedata.normalize("NFKC", body)
    share = _SHARE_AS_PRICE.search(normal)
    if share:
        return f"a share as a price: {share.group(0)!r}"
    when = _AMOUNT_AS_TIME.search(normal)
    if when:
        return f"an amount as a time: {when.group(0)!r}"
    reasons = [
        [value for _, value in _amounts(unicodedata.normalize("NFKC", r.text))]
        for r in inputs.reasons
    ]
    known = [amount for values in reasons for amount in values]
    for written, value in _amounts(normal):
        if not any(_rounds_to(amount, value) for amount in known):
            return f"{written}: no reason gives this amount"
    for clause in _CLAUSE.split(normal):
        said = collections.Counter(v for _, v in _amounts(clause))
        for amount, count in said.items():
            if count > 1 and not any(values.count(amount) > 1 for values in reasons):
                return f"{amount} said twice in one clause, once by the reasons"
    return ""


_CLAUSE = re.compile(r"[，；;：。！？!?]|[,:.](?!\d)")


_WHICH_IS = re.compile(
    r"(\d[\d,]*(?:\.\d+)?)%?,? which (?:is|means) (?:[A-Za-z'-]+ ){0,5}?(?:[A-Z]{0,3}[$€£¥])?"
    r"(\d[\d,]*(?:\.\d+)?)"
)


@lru_cache(maxsize=1024)
def _grounds(inputs: CheckInputs) -> Grounds:
    """Every number the reasons and the title write, with their dates whole and in parts."""
    numbers: set[Decimal] = set()
    parts: set[Decimal] = set()
    dates: set[str] = set()
    for text in (inputs.title, *(r.text for r in inputs.reasons)):
        normal = unicodedata.normalize("NFKC", text)
        for match in _ISO_DATE.finditer(normal):
            year, month, day = match.groups()
            dates.add(f"{year}-{int(month):02d}-{int(day):02d}")
            parts.update((Decimal(month), Decimal(day)))
            numbers.add(Decimal(year))
        spans = [m.span() for m in _ISO_DATE.finditer(normal)]
        for match in _NUMBER.finditer(normal):
            if any(a <= match.start() and match.end() <= b for a, b in spans):
                continue
            numbers.add(_decimal(match))
    return Grounds(frozenset(numbers), frozenset(parts), frozenset(dates))


def _decimal(match: re.Match[str]) -> Decimal:
    whole = match.group(1).replace(",", "")
    return Decimal(f"{whole}.{match.group(2)}" if match.group(2) else whole)


def _unknown_words(body: str, inputs: CheckInputs) -> list[str]:
    """The body's words that are in neither the inputs nor the allow-lists."""
    source = _input_text(inputs)
    if inputs.language in ("zh", "ja"):
        return _unknown_cjk(body, source, inputs.language)
    known: set[str] = set()
    for word in _WORD.findall(source.lower()):
        known |= lemmas(word)
    allowed = _allowed_lemmas()
    unknown = []
    for word in _WORD.findall(body.lower()):
        if word in STOPWORDS_EN:
            continue
        forms = lemmas(word)
        if not (forms & known or forms & allowed) and word not in unknown:
            unknown.append(word)
    return unknown


@cache
def _allowed_lemmas() -> frozenset[str]:
    """Every form the English allow-list and stopwords stand for, computed once."""
    return frozenset(form for word in ALLOWED_EN | STOPWORDS_EN for form in lemmas(word))


_LONGEST = 8
_LATIN_OR_NUMBER = re.compile(
    r"[A-Za-z0-9$¥€£][A-Za-z0-9$¥€£.,%/'’&\-]*(?: [A-Za-z0-9][A-Za-z0-9.,%/'’&\-]*)*"
)
_PLACE = "#"
_PLACED_RUN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff#]+")
_PLACED_JA_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff々#]+")


def _unknown_cjk(body: str, source: str, language: str = "zh") -> list[str]:
    """Characters no reading of the body's Chinese (or Japanese) covers: each run is cut
    into pieces that are two or more characters of the inputs, allow-listed words or
    function characters, choosing the cut that leaves the fewest characters uncovered. A
    number or a Latin name is one placeholder on both sides ("近90天" reads as 近#天), so
    the words around it are matched as the inputs write them. In Japanese any hiragana is
    grammar (particles, endings) and passes; the content is in kanji and katakana, which
    must come from the inputs or the allow-list."""
    unknown: list[str] = []
    body = _LATIN_OR_NUMBER.sub(_PLACE, body)
    source = _LATIN_OR_NUMBER.sub(_PLACE, source)
    ja = language == "ja"
    allowed = ALLOWED_JA if ja else ALLOWED_ZH
    function = FUNCTION_JA if ja else FUNCTION_ZH

    def known(piece: str) -> bool:
        return (
            piece == _PLACE
            or (len(piece) >= 2 and piece in source)
            or piece in allowed
            or (len(piece) == 1 and piece in function)
            or (ja and _HIRAGANA.fullmatch(piece) is not None)
        )

    for run in (_PLACED_JA_RUN if ja else _PLACED_RUN).findall(body):
        n = len(run)
        cost = [0] + [n + 1] * n
        back = [0] * (n + 1)
        for end in range(1, n + 1):
            for start in range(max(0, end - _LONGEST), end):
                piece = run[start:end]
                step = 0 if known(piece) else (1 if len(piece) == 1 else n + 1)
                if cost[start] + step < cost[end]:
                    cost[end] = cost[start] + step
                    back[end] = start
        end = n
        while end > 0:
            start = back[end]
            piece = run[start:end]
            if len(piece) == 1 and not known(piece) and piece not in unknown:
                unknown.insert(0, piece)
            end = start
    return unknown


def _specificity(body: str, inputs: CheckInputs) -> list[tuple[str, str]]:
    """The strongest reason named. A verdict without reasons (a fair price, nothing of note)
    leaves the model nothing to name, so whatever it writes is made up ("because once the
    price settles, a 5G Smartphone from Stratus A50 drops to 5.00"): the template says it."""
    key = key_reason(inputs.verdict, inputs.reasons)
    if key is None:
        return [("not_specific", "no reason to name")]
    phrases = _KEY_PHRASES.get(key.code, {}).get(inputs.language, ())
    lowered = body.lower()
    if any(p in lowered for p in phrases):
        return []
    slots = reason_slots(key.code, key.text, inputs.language)
    if slots is None:  # a sentence of another shape: any of its numbers names it
        values = [m.group(0) for m in _NUMBER.finditer(key.text)]
    else:
        values = [slots[s] for s in _KEY_SLOTS.get(key.code, ()) if s in slots]
    if not values and not phrases:
        return []
    required = _KEY_REQUIRED.get(key.code)
    if slots is not None and required in slots:
        # a sale is named by its name, not only by its numbers ("在6天后开始" says nothing
        # of what starts), and "618" inside "618 Pre-sale" is another event
        others = [n for n in _names_of(inputs) if n != slots[required]]
        if _names_event(body, slots[required], others):
            return []
        return [("not_specific", f"does not name {key.code}'s {slots[required]}")]
    if any(_names(body, value) for value in values):
        return []
    wanted = ", ".join(values + list(phrases))
    return [("not_specific", f"names none of {key.code}'s {wanted}")]


def _names_event(body: str, name: str, others: Sequence[str]) -> bool:
    """Whether the body writes `name` other than as part of a longer name of the inputs."""
    for other in others:
        if name in other:
            body = body.replace(other, " ")
    return name.lower() in body.lower()


def _names(body: str, value: str) -> bool:
    """Whether the body writes `value`: a name as written, a date whole, a number at the
    precision the body chose ("$1,299.00" is named by 1,299 or 1299.00)."""
    if value.lower() in body.lower():
        return True
    numbers = [_decimal(m) for m in _NUMBER.finditer(value)]
    if not numbers or _ISO_DATE.search(value) or len(numbers) != 1:
        return False
    wanted = numbers[0]
    return any(
        _rounds_to(wanted, _decimal(match))
        for match in _NUMBER.finditer(unicodedata.normalize("NFKC", body))
    )


def _rounds_to(value: Decimal, written: Decimal) -> bool:
    """Whether `written` is `value` rounded to the places `written` shows (half up or half
    even: writers round both ways)."""
    exponent = written.as_tuple().exponent
    if not isinstance(exponent, int):
        return False
    quantum = Decimal(1).scaleb(exponent)
    try:
        return any(
            value.quantize(quantum, rounding=r) == written for r in (ROUND_HALF_UP, ROUND_HALF_EVEN)
        )
    except InvalidOperation:
        return False


def check_all(pairs: Iterable[tuple[str, CheckInputs]]) -> list[CheckResult]:
    """`check_explanation` over many pairs, in order."""
    return [check_explanation(text, inputs) for text, inputs in pairs]
