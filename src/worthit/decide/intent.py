"""A shopper's question, in English, Chinese or Japanese, turned into what they ask and about what.

Rules rather than a model: intent parsing sits on the ≤ 25 ms path to the first SSE byte,
so it has to cost microseconds and be explainable when it is wrong. Phrases come in small
tables, one per cue family and language; a single scan finds them all, the kind follows
from which families were found (see `_decide_kind`), and each slot (window, count,
budget, metric, category) is read by its own function.

Product mentions are what is left once every recognised phrase, punctuation mark and
question word has been cut away. Cutting (rather than rewriting) keeps each mention a
verbatim slice of the normalised question, so model codes such as "WH-1000XM5" survive
intact and the resolver sees exactly what the shopper typed.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal

from worthit.market.categories import CATEGORIES, synonyms

MAX_QUESTION_CHARS = 500
"""Longer input is truncated: no shopping question needs more, and it bounds the work."""

Language = Literal["en", "zh", "ja"]
Metric = Literal["sales", "rating"]


class IntentKind(StrEnum):
    WORTH_BUYING = "worth_buying"
    COMPARE = "compare"
    TOP_N = "top_n"
    WAIT_OR_BUY = "wait_or_buy"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Intent:
    """Everything the decision core needs from the question; slots not asked about are None.

    A worth/wait intent may carry no mention: a shopper on a product page asks just
    "值不值得买", and the caller supplies the product from the page.
    """

    kind: IntentKind
    language: Language
    mentions: tuple[str, ...]
    category: str | None
    metric: Metric | None
    window_days: int | None
    n: int | None
    budget: float | None
    raw: str


# ASCII mode: `\b` then treats CJK as non-word, so "销量TOP3" still has a word boundary
# before "TOP"; case-insensitivity only concerns Latin letters anyway.
_FLAGS = re.IGNORECASE | re.ASCII


def _compile(*alternatives: str) -> re.Pattern[str]:
    return re.compile("|".join(f"(?:{a})" for a in alternatives), _FLAGS)


def _alternation(words: str) -> str:
    """Whitespace-separated words, longest first, so that "这款" is tried before "这"."""
    return "|".join(re.escape(w) for w in sorted(words.split(), key=len, reverse=True))


# --- numbers --------------------------------------------------------------------------------

_EN_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "couple": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "fifteen": 15,
    "twenty": 20,
    "thirty": 30,
}
_ZH_DIGITS = {
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_NUM = (
    r"\d{1,4}|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen"
    r"|twenty|thirty|[一二两三四五六七八九十]{1,3}"
)


def _zh_number(text: str) -> int | None:
    """Chinese numerals up to 99 ("三", "十五", "二十"); shoppers don't count further."""
    if "十" not in text:
        return _ZH_DIGITS.get(text) if len(text) == 1 else None
    tens, _, ones = text.partition("十")
    tens_value = _ZH_DIGITS.get(tens) if tens else 1
    ones_value = _ZH_DIGITS.get(ones) if ones else 0
    if tens_value is None or ones_value is None:
        return None
    return tens_value * 10 + ones_value


def _number(text: str) -> int | None:
    if text.isdigit():
        return int(text)
    word = text.split()[0].lower()
    return _EN_NUMBERS[word] if word in _EN_NUMBERS else _zh_number(text)


# --- phrase tables: English alternatives start at a word, Chinese ones anywhere -----------

# Time windows: groups are (count, unit), or only (unit) for "this month" forms.
_WINDOW_EN = (
    r"\b(?:(?:in|over|during|for)\s+)?(?:the\s+)?(?:last|past|previous|recent)\s+"
    rf"(?:({_NUM}|a|an|couple(?:\s+of)?)\s+)?(days?|weeks?|fortnights?|months?|years?)\b",
    r"\b(?:this|current)\s+(week|month|year)\b",
)
_WINDOW_ZH = (
    rf"(?:最近|近|过去)的?\s*({_NUM})?\s*个?\s*(天|日|周|星期|礼拜|月|年)",
    r"(?:这|本|当)个?\s*(周|星期|礼拜|月|年)",
    rf"(?<![A-Za-z0-9])({_NUM})\s*个?\s*(天|日|周|星期|礼拜|月|年)\s*(?:以内|之内|内|里)",
)
_TOP_N_EN = (
    rf"\b(?:top|best)[\s-]*({_NUM})(?![A-Za-z0-9])",
    rf"\b({_NUM})\s+(?:best|top|most|highest)\b",
)
# "前三" is a count, but not in 目前/之前 and not in "前三天" (a time span).
_TOP_N_ZH = (
    rf"(?<![之以提目眼当面向上])前\s*({_NUM})(?!\s*(?:天|日|周|星期|个?月|年|小时))"
    r"\s*(?:名|个|款|位|强)?",
)
# Money: "1,299", "300", "1.5k", "3千"; at most nine digits so the float stays finite.
# Every budget pattern's only groups are these three: integer, fraction, multiplier.
_MONEY = (
    r"(?<![A-Za-z0-9.,])(\d{1,3}(?:,\d{3})+|\d{1,9})(?:\.(\d{1,2}))?(?!\d)\s*"
    r"(k(?![A-Za-z])|千(?!克|瓦|米)|万)?"
)
# A measure is not a price: "under 2 kg", "55 inches", "20000 mAh", "100W", 65".
_UNITS_EN = (
    r"kg|kgs|g|grams?|kilo(?:gram)?s?|lbs?|pounds?|oz|ounces?|inch(?:es)?|in|cm|mm|m|meters?"
    r"|metres?|ft|feet|w|watts?|kw|mah|ah|v|volts?|hz|khz|ghz|gb|tb|mb|mp|fps|ms|ml|l|litres?"
    r"|liters?|db|dpi|rpm|cores?|keys?"
)
# "4K" before a screen word is a resolution, not 4,000: "Lumina 55U7 Max 4K Smart TV" names
# a product, and its "Max 4K" is no budget.
_RESOLUTION_EN = r"uhd|hdr\d*|smart|tvs?|oled|qled|led|monitors?|displays?|screens?|projectors?"
_UNITS_ZH = r"寸|英寸|克|千克|公斤|斤|瓦|毫安|伏|赫兹|毫米|厘米|米|升|毫升|核|键"
_BUDGET_EN = (
    r"(?:\b(?:under|below|less\s+than|cheaper\s+than|no\s+more\s+than|not\s+more\s+than"
    r"|at\s+most|max(?:imum)?|up\s+to|within|budget(?:\s+(?:is|of))?)|<=?)"
    rf"\s*(?:us\s*)?[$¥]?\s*{_MONEY}(?:\s*(?:dollars?|usd|bucks|rmb|yuan)\b)?"
    r"(?!\s*(?:days?|weeks?|months?|years?|hours?|%|percent|stars?)\b)"
    rf"(?![\s-]*(?:{_UNITS_EN})\b)"
    rf"(?!(?<=[0-9][kK])[\s-]*(?:{_RESOLUTION_EN})\b)(?![kK][\s-]*(?:{_RESOLUTION_EN})\b)"
    r"(?!\s*[\"”″'])",
)
_BUDGET_ZH = (
    r"(?:预算|不超过|不高于|不到|低于|少于|小于|最多|顶多|控制在)\s*(?:是|为|在|:)?\s*[$¥]?\s*"
    rf"{_MONEY}\s*(?:元|块钱?|rmb)?(?!\s*(?:天|日|周|星期|月|年|个|名|款|%|折|星|分|{_UNITS_ZH}))"
    r"\s*(?:以内|以下|之内)?",
    rf"[$¥]?\s*{_MONEY}\s*(?:元|块钱?|rmb)?\s*(?:以内|以下|之内|内)",
)
_RANK_EN = (
    r"\b(?:best|top|highest|most)[\s-]*(?:rated|selling|sellers?|reviewed|popular|sold|bought)\b",
    r"\bbestsell(?:ing|ers?)\b|\brankings?\b|\bleaderboard\b",
    r"\b(?:by|on)\s+(?:sales|ratings?|reviews?|stars|popularity)\b",
)
_RANK_ZH = (
    r"(?:销量|评分|口碑|好评|评价|人气|销售额)率?\s*(?:最高|最好|最多|最佳|最棒|第一|排行|排名|榜)",
    r"卖得最好|卖得最多|卖最好|最畅销|最受欢迎|最火|热销|热卖|畅销|排行榜?|排名|榜单",
)
_WAIT_EN = (
    r"\b(?:wait(?:ing)?|hold\s+off|later)\b",
    r"\b(?:get|gets|getting|be|become)\s+cheaper\b|\bcheaper\s+(?:soon|later)\b",
    r"\b(?:go|goes|going)\s+(?:on\s+sale|down)\b",
    r"\bprice\s+(?:drops?|cuts?)\b|\bdrop\s+in\s+price\b",
    r"\b(?:next|upcoming)\s+sale\b|\b(?:black\s+friday|cyber\s+monday|prime\s+day)\b",
    r"\b(?:good|right|best)\s+time\s+to\s+buy\b",
)
_WAIT_ZH = (
    r"(?:还是|要不要|该不该|需不需要|是否|再|先)等(?:等|一等|一下|一阵子?|几天|到|待)?",
    r"等(?:等|一等|一下|一阵子?|几天|到|待|双十一|双11|618|大促|降价|打折|活动)",
    r"会不会降价|会降价|还会降|再降|降价吗|会不会便宜|会便宜",
    r"双十一|双11|双十二|双12|(?<![A-Za-z0-9])618(?!\d)|黑五|大促|观望|什么时候买|何时买|时机",
)
_WORTH_EN = (
    r"\bworth(?:\s+(?:buying|getting|it|the\s+(?:money|price|cost)|a\s+(?:buy|purchase)))?\b",
    r"\b(?:a\s+)?(?:good|great|fair|decent)\s+(?:deal|price|buy|value|purchase|choice)\b",
    r"\bshould\s+i\s+(?:buy|get|grab|order|purchase)\b|\bdo\s+you\s+recommend\b",
    r"\b(?:any\s+good|recommended|a\s+bargain|a\s+steal)\b",
)
_WORTH_ZH = (
    r"值不值得?(?:买|入手|购买|入)?|值得(?:买|入手|购买|入)?|划不划算|划算",
    r"性价比(?:高不高|怎么样|如何|高吗)?|能不能买|能买|可以买|该不该买|要不要买",
    r"靠不靠谱|靠谱|怎么样|好不好|推荐吗?|香不香|香吗|入手",
)
# Comparison phrasing cut from operands; the connectors between operands are not in it.
_COMPARE_EN = (r"\bwhich\s+one\b|\b(?:compare[sd]?|comparison|difference|better|worse)\b",)
_COMPARE_ZH = (
    r"哪个(?:更)?(?:好|值得买|值|划算)?|哪款(?:更)?好?|哪一个|哪一款|选哪个?|怎么选",
    r"区别|差别|有什么不同|更好|更值|比较好|比较|相比|比一比|好一点|好些",
)
_RATING_EN = (r"\b(?:rated|ratings?|reviews?|reviewed|stars)\b",)
_RATING_ZH = (r"评分|口碑|好评|评价|星级",)
_SALES_EN = (r"\b(?:sell(?:ing|ers?)|bestsell(?:ing|ers?)|sales|sold|bought|popular(?:ity)?)\b",)
_SALES_ZH = (r"销量|卖得|畅销|热销|热卖|人气|受欢迎|销售",)
_PLATFORM_EN = (
    r"\b(?:on|at|from|in)\s+(?:amazon|ebay|walmart|best\s*buy|target|jd|taobao|tmall"
    r"|aliexpress|costco)(?:\.com)?\b",
)
_PLATFORM_ZH = (
    r"(?:在|从)?(?:京东|天猫|淘宝|拼多多|苏宁|抖音|唯品会|亚马逊|闲鱼)(?:商城|平台|自营)?(?:上|里)?的?",
)
_NOW_EN = (r"\b(?:right\s+now|at\s+the\s+moment|these\s+days)\b",)
_NOW_ZH = (r"现在|目前|当前|此刻|这会儿",)

# Japanese: the same families. A question ends in a particle or a polite form
# ("ですか", "でしょうか"), cut with the phrase it closes.
_JA_ASK = r"(?:です|でしょう|ます)?か?(?:ね|な)?"
_JA_UNIT = r"(?:ヶ|か|カ|ヵ|ケ)?(日|週|月|年)(?:間)?"
_WINDOW_JA = (
    rf"(?:最近|直近|過去|ここ)の?\s*({_NUM})\s*{_JA_UNIT}",
    r"(?:今|本)(週|月|年)",
)
_TOP_N_JA = (
    rf"(?:トップ|ベスト|上位)\s*({_NUM})\s*(?:位|件|つ|個|選)?",
    rf"(?<![\d.])({_NUM})\s*選",
)
_BUDGET_JA = (
    rf"予算(?:は|が)?\s*[¥￥]?\s*{_MONEY}\s*円?(?:以下|以内|まで|未満|くらい|ぐらい)?",
    rf"[¥￥]?\s*{_MONEY}\s*円?\s*(?:以下|以内|まで|未満|より安い)",
)
_RANK_JA = (
    r"売れ筋|人気ランキング|ランキング|人気の?|一番売れ(?:てる|ている)|売れてる|売れている",
    r"(?:評価|レビュー|口コミ)(?:が|の)?(?:高い|いい|良い)",
)
_WAIT_JA = (
    r"待つべき" + _JA_ASK + r"|待った方が(?:いい|良い)" + _JA_ASK + r"|待(?:つ|ち|って)",
    r"買い時" + _JA_ASK,
    r"値下がり(?:する|します|しそう)?" + _JA_ASK + r"|安くなる(?:まで|の)?" + _JA_ASK,
    r"セール(?:を|まで)(?:待[つちっ]て?)?|セール待ち|ブラックフライデー|プライムデー|初売り|いつ買う",
)
_WORTH_JA = (
    r"買うべき" + _JA_ASK + r"|買う価値(?:は|が)?(?:ある|あります)" + _JA_ASK,
    r"(?:って|は)?買い(?!時|物)(?:です|でしょう)?か?|お得"
    + _JA_ASK
    + r"|おすすめ"
    + _JA_ASK
    + r"|コスパ(?:は|が)?(?:いい|良い)?"
    + _JA_ASK,
    r"安い" + _JA_ASK + r"|どう(?:です|でしょう)か|(?:いい|良い)(?:です|でしょう)か",
)
_COMPARE_JA = (
    r"どっち(?:が)?(?:いい|良い|おすすめ|買い)?" + _JA_ASK,
    r"どちら(?:が)?(?:いい|良い|おすすめ|買い)?" + _JA_ASK + r"|比較|違い|比べ(?:て|る)?",
)
_RATING_JA = (r"評価|レビュー|口コミ|星",)
_SALES_JA = (r"売れ筋|売上|販売数|売れ|人気",)
_PLATFORM_JA = (
    r"(?:アマゾン|Amazon|楽天|ヤフー|ヨドバシ|ビックカメラ)(?:市場|ショッピング)?(?:で|の)",
)
_NOW_JA = (r"今|現在|いま",)

# Earlier families win where two phrases start at the same place.
# The second table of each family holds Chinese and Japanese: both are tried at the same
# places (non-ASCII characters and digits), and no phrase of one is a phrase of the other.
_FAMILIES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "window": (_WINDOW_EN, _WINDOW_ZH + _WINDOW_JA),
    "budget": (_BUDGET_EN, _BUDGET_ZH + _BUDGET_JA),
    "top_n": (_TOP_N_EN, _TOP_N_ZH + _TOP_N_JA),
    "rank": (_RANK_EN, _RANK_ZH + _RANK_JA),
    "wait": (_WAIT_EN, _WAIT_ZH + _WAIT_JA),
    "worth": (_WORTH_EN, _WORTH_ZH + _WORTH_JA),
    "compare": (_COMPARE_EN, _COMPARE_ZH + _COMPARE_JA),
    "metric": (_RATING_EN + _SALES_EN, _RATING_ZH + _SALES_ZH + _RATING_JA + _SALES_JA),
    "platform": (_PLATFORM_EN, _PLATFORM_ZH + _PLATFORM_JA),
    "now": (_NOW_EN, _NOW_ZH + _NOW_JA),
}
_PUNCTUATION = (
    r"[?!,;:。，；：！？…()\[\]{}（）【】《》「」『』\"“”]|\s[-–—~]+\s|[–—]+|\.(?:\s|$)|\.{2,}"
)


def _scanner() -> re.Pattern[str]:
    """All families in one pattern, each in a group named "<family>_<language>".

    The guards are the speed: English alternatives are only tried where a word starts
    and Chinese ones only at non-ASCII characters or digits, instead of every phrase at
    every character.
    """
    en = "|".join(f"(?P<{f}_en>{'|'.join(en)})" for f, (en, _) in _FAMILIES.items())
    zh = "|".join(f"(?P<{f}_zh>{'|'.join(zh)})" for f, (_, zh) in _FAMILIES.items())
    return re.compile(
        rf"(?P<punctuation>{_PUNCTUATION})"
        rf"|(?:\b(?=\w)|(?=[<$]))(?:{en})"
        rf"|(?=[^\x00-\x7f]|[\d$])(?:{zh})",
        _FLAGS,
    )


_SCANNER = _scanner()
# A cut phrase becomes this; normalise() removes control characters, so no mention has it.
_CUT = "\x00"

_WINDOWS = tuple(re.compile(p, _FLAGS) for p in (*_WINDOW_EN, *_WINDOW_ZH, *_WINDOW_JA))
_BUDGETS = tuple(re.compile(p, _FLAGS) for p in (*_BUDGET_EN, *_BUDGET_ZH, *_BUDGET_JA))
_TOP_N = _compile(*_TOP_N_EN, *_TOP_N_ZH, *_TOP_N_JA)
_RATING = _compile(*_RATING_EN, *_RATING_ZH, *_RATING_JA)
_SALES = _compile(*_SALES_EN, *_SALES_ZH, *_SALES_JA)
_UNIT_DAYS = {
    "d": 1,
    "w": 7,
    "f": 14,
    "m": 30,
    "y": 365,
    "天": 1,
    "日": 1,
    "周": 7,
    "週": 7,
    "星": 7,
    "礼": 7,
    "月": 30,
    "年": 365,
}
_MULTIPLIERS = {"k": 1000.0, "千": 1000.0, "万": 10000.0}

# Words that make two operands a comparison even when they don't look like products.
_COMPARE_CUE = _compile(
    r"\b(?:compare[sd]?|comparison|difference|which|better|versus|vs|pk|than)\b",
    r"比较|相比|对比|比一比|哪个|哪款|哪一个|哪一款|区别|差别|更好|更值|选哪",
    r"どっち|どちら|比較|違い|比べ",
)
# Where one operand ends and the next begins.
_CONNECTOR = _compile(
    r"\s+(?:or|and|with|to|than|against)\s+",
    r"\s*\b(?:vs|v\.?s|versus|pk)\b\.?\s*",
    r"还是|或者|对比|和|与|跟|、|/|\s&\s",
    r"それとも|または|と(?![\u3040-\u309f])|か(?=\s*[^\u3040-\u309f\s])",
)

# --- trimming mentions ---------------------------------------------------------------------

_EN_STOPWORDS = """
a an the this that these those my your our its their some any i i'm im me we us you it
it's they them he she is are was were be been am do does did should shall would could
can will may might must what what's whats which how how's why when where who whether if
buy buying bought get getting purchase order grab pick choose take think know tell
recommend want need consider wait waiting compare worth deal price sale discount now
today currently right still yet really actually please just already also so then or and
vs with to for on of at in from by about than between into not no yes ok okay good great
bad better best worse cheaper cheap expensive overpriced hello hi hey thanks
"""
_ZH_LEADING = """
请问 问一下 问下 我想知道 我想 我要 想问 想 你觉得 觉得 帮我 给我 看看 看一下 看下
这个 这款 这台 这部 那个 那款 这 那 买 入手 购买 要不要 是不是 一下 能不能 可不可以 应该
还 就 你好 您好 嗨 谢谢 和 与 跟 或 我 你 的
この その あの これ それ 私 僕 今 は の
"""
_ZH_TRAILING = """
的 吗 呢 吧 啊 呀 嘛 么 了 哦 好 买 入手 一下 怎么样 如何 价格 多少钱 你好 谢谢 和 与 跟 还 是 比
は が を の って に も で と か ね よ な を買う 買う 買って 教えて ください です
"""
_EN_STOP_SET = frozenset(_EN_STOPWORDS.split())
_EN_STOP_SET_REVERSED = frozenset(w[::-1] for w in _EN_STOP_SET)
_ZH_LEADING_STOP = re.compile(_alternation(_ZH_LEADING))
_ZH_TRAILING_STOP_REVERSED = re.compile(_alternation(_ZH_TRAILING[::-1]))
_ASCII_WORD = re.compile(r"[A-Za-z]+(?:['’][A-Za-z]+)?(?![A-Za-z0-9])")
# "+" and inner hyphens are kept: "Galaxy S24+" and "WH-1000XM5" are names.
_EDGE_JUNK = " '\"`*_#~^|\\<>.,;:!?()[]{}-–—·…、。"

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_KANA = re.compile(r"[\u3041-\u3096\u30a1-\u30fa]")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z0-9'-]*")
_UPPER = re.compile(r"[A-Z]")
_DIGIT = re.compile(r"\d", re.ASCII)
_LETTER = re.compile(r"[^\W\d_]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2064\ufeff]+")


def _category_rules() -> tuple[tuple[str, re.Pattern[str], str], ...]:
    """(hint, pattern, category key) per synonym, longest synonym first.

    The hint is a plain substring test that rules most synonyms out in nanoseconds; the
    pattern then accepts "noise cancelling" for "noise-cancelling" and plurals.
    """
    rules = []
    for category in CATEGORIES:
        for word in synonyms(category):
            if word.isascii():
                parts = re.split(r"[\s-]+", word.lower())
                body = r"[\s-]?".join(re.escape(p) for p in parts)
                pattern, hint = rf"(?<![A-Za-z]){body}(?:e?s)?(?![A-Za-z])", parts[0]
            else:
                pattern, hint = re.escape(word), word
            rules.append((len(word), hint, re.compile(pattern, _FLAGS), category.key))
    rules.sort(key=lambda rule: rule[0], reverse=True)
    return tuple((hint, pattern, key) for _, hint, pattern, key in rules)


_CATEGORY_RULES = _category_rules()
# Every synonym as a lower-case, space-separated phrase, singular and plural.
_CATEGORY_WORDS = frozenset(
    f"{' '.join(word.lower().replace('-', ' ').split())}{plural}"
    for category in CATEGORIES
    for word in synonyms(category)
    for plural in ("", "s", "es")
)


# --- public API ----------------------------------------------------------------------------


def normalise(question: str) -> str:
    """The text that mentions are cut from: NFKC, control characters gone, spaces collapsed.

    NFKC folds full-width "ＴＯＰ３" and "？" into ASCII so one pattern serves both input
    methods. Input is truncated to MAX_QUESTION_CHARS first so that work stays bounded.
    """
    text = unicodedata.normalize("NFKC", question[:MAX_QUESTION_CHARS])
    text = " ".join(_CONTROL.sub(" ", text).split())
    return text[:MAX_QUESTION_CHARS].rstrip()


def parse_intent(question: str) -> Intent:
    """Parse one question; never raises, and answers UNKNOWN rather than guessing.

    Only the first MAX_QUESTION_CHARS characters are read (see `normalise`).
    """
    text = normalise(question)
    language = _language(text)
    if not text:
        return Intent(IntentKind.UNKNOWN, language, (), None, None, None, None, None, question)
    families, cut = _scan(text)
    mention = _best_mention(cut)
    operands = _compare_operands(cut, text)
    category = _category(text)
    n = _top_n(text) if "top_n" in families else None
    kind = _decide_kind(families, mention, operands, category, n)
    if kind is IntentKind.COMPARE:
        mentions = operands
    elif kind in (IntentKind.WORTH_BUYING, IntentKind.WAIT_OR_BUY) and mention:
        mentions = (mention,)
    else:
        mentions = ()
    is_top = kind is IntentKind.TOP_N
    return Intent(
        kind=kind,
        language=language,
        mentions=mentions,
        category=category,
        metric=_metric(text) if is_top else None,
        window_days=_window_days(text) if "window" in families else None,
        n=n if is_top else None,
        budget=_budget(text) if "budget" in families else None,
        raw=question,
    )


# --- kind ----------------------------------------------------------------------------------


def _scan(text: str) -> tuple[frozenset[str], str]:
    """The cue families present, and the text with every recognised phrase cut out."""
    families: set[str] = set()
    pieces = []
    end = 0
    for match in _SCANNER.finditer(text):
        family = (match.lastgroup or "").rpartition("_")[0]  # "" for punctuation
        if family:
            families.add(family)
        pieces.append(text[end : match.start()])
        end = match.end()
    pieces.append(text[end:])
    return frozenset(families), _CUT.join(pieces)


def _decide_kind(
    families: frozenset[str],
    mention: str | None,
    operands: tuple[str, ...],
    category: str | None,
    n: int | None,
) -> IntentKind:
    """Cue order settles the overlaps between kinds.

    Waiting first: "buy now or wait?" also has the shape of a comparison. An explicit count
    ("top 3") always means a list. Two operands beat ranking words ("NC700 vs Q5, which
    sells better?"). A ranking word means a list unless the shopper names one product and
    asks whether it is worth buying ("热销的NC700值得买吗"). A bare product name is a
    worth-buying question; a bare category is a request for a list.
    """
    names_product = mention is not None and _looks_like_product(mention)
    asks_worth = "worth" in families
    if "wait" in families:
        return IntentKind.WAIT_OR_BUY
    if n is not None:
        return IntentKind.TOP_N
    if len(operands) >= 2:
        return IntentKind.COMPARE
    if "rank" in families and not (asks_worth and names_product):
        return IntentKind.TOP_N
    if asks_worth or names_product:
        return IntentKind.WORTH_BUYING
    if category is not None:
        return IntentKind.TOP_N
    return IntentKind.UNKNOWN


# --- mentions ------------------------------------------------------------------------------


def _compare_operands(cut: str, text: str) -> tuple[str, ...]:
    """Operands between connectors; product-looking ones win when there are two of them.

    Without a comparison cue only product-looking operands count, so "NC700还是很贵吗"
    ("still expensive?") is not a comparison while "小米和华为哪个好" is.
    """
    parts = _CONNECTOR.split(cut)
    if len(parts) < 2:
        return ()
    operands: list[str] = []
    for part in parts:
        mention = _best_mention(part)
        if mention and mention.casefold() not in {o.casefold() for o in operands}:
            operands.append(mention)
    products = tuple(o for o in operands if _looks_like_product(o))
    if len(products) >= 2:
        return products
    if len(operands) >= 2 and _COMPARE_CUE.search(text):
        return tuple(operands)
    return ()


def _best_mention(cut: str) -> str | None:
    """The piece left between cut phrases that most looks like a product name.

    A shopper may add context ("for my son"); a model code or capitalised name is the
    product, otherwise the longest piece is. A bare category word is not a mention.
    """
    pieces = [p for p in (_trim(raw) for raw in cut.split(_CUT)) if p and not _is_category(p)]
    for piece in pieces:
        if _looks_like_product(piece):
            return piece
    return max(pieces, key=len, default=None)


def _trim(piece: str) -> str:
    """Strip question words and particles from both ends, never from the middle of a name.

    The tail is trimmed as the head of the reversed piece: an anchored match there costs
    one word, where a `$`-anchored search would try every position.
    """
    while True:
        trimmed = piece.strip(_EDGE_JUNK)
        trimmed = trimmed[_stop_length(trimmed, _EN_STOP_SET, _ZH_LEADING_STOP) :]
        reversed_ = trimmed[::-1]
        stop = _stop_length(reversed_, _EN_STOP_SET_REVERSED, _ZH_TRAILING_STOP_REVERSED)
        trimmed = trimmed[: len(trimmed) - stop]
        if trimmed == piece:
            return piece
        piece = trimmed


def _stop_length(text: str, english: frozenset[str], chinese: re.Pattern[str]) -> int:
    """How many leading characters of text are one stopword (0 if it starts with none)."""
    if word := _ASCII_WORD.match(text):
        return word.end() if word[0].lower() in english else 0
    particle = chinese.match(text)
    return particle.end() if particle else 0


def _looks_like_product(text: str) -> bool:
    """Model codes mix letters and digits; brand names are capitalised. "hello" is neither."""
    return bool(_UPPER.search(text) or (_DIGIT.search(text) and _LETTER.search(text)))


def _is_category(text: str) -> bool:
    return " ".join(text.lower().replace("-", " ").split()) in _CATEGORY_WORDS


# --- slots ---------------------------------------------------------------------------------


def _language(text: str) -> Language:
    """Kana make it Japanese (Chinese has none); otherwise Han characters against Latin
    words, so that "NC700和Q5哪个好" counts as Chinese.

    A product code inside a Chinese or Japanese sentence must not turn the answer into
    English.
    """
    if _KANA.search(text):
        return "ja"
    han = len(_HAN.findall(text))
    return "zh" if han and han >= len(_LATIN_WORD.findall(text)) else "en"


def _category(text: str) -> str | None:
    """The category of the longest synonym found: "降噪耳机" and "耳机" agree, "笔记本" loses."""
    lowered = text.lower()
    best_key, best_length = None, 0
    for hint, pattern, key in _CATEGORY_RULES:
        if hint in lowered and (match := pattern.search(text)) and len(match[0]) > best_length:
            best_key, best_length = key, len(match[0])
    return best_key


def _metric(text: str) -> Metric:
    """Sales unless the shopper mentions ratings first: "销量" is the default ranking."""
    rating = _RATING.search(text)
    sales = _SALES.search(text)
    if rating and (sales is None or rating.start() < sales.start()):
        return "rating"
    return "sales"


def _top_n(text: str) -> int | None:
    match = _TOP_N.search(text)
    if match is None:
        return None
    return _number(next(g for g in match.groups() if g)) or None


def _window_days(text: str) -> int | None:
    for pattern in _WINDOWS:
        for match in pattern.finditer(text):
            count_text, unit = match.groups() if pattern.groups == 2 else (None, match[1])
            if count_text is None and unit in ("天", "日"):
                continue  # "近日" means "lately", not "in the last day"
            count = _number(count_text) if count_text else 1
            if count:
                return count * _UNIT_DAYS[unit[0].lower()]
    return None


def _budget(text: str) -> float | None:
    for pattern in _BUDGETS:
        for match in pattern.finditer(text):
            integer, fraction, multiplier = match.groups()
            value = float(f"{integer.replace(',', '')}.{fraction or 0}")
            value *= _MULTIPLIERS.get((multiplier or "").lower(), 1.0)
            if value > 0:
                return value
    return None
