"""A comparison between two written numbers must hold as written.

"$260.79, which is lower than the all-time low of $260.19" passes the number lookup (both
are facts) and still tells the shopper something false. The guard reads the two numbers a
comparison word joins and checks the order of their values. Like the lookup, it is no
understanding of the sentence: a comparison is judged only in the few shapes where its two
sides cannot be mistaken, and every other shape is skipped, so a true sentence is never
refused for its wording, only a false one in a plain shape is.

Rule (on the NFKC text, with the numbers the guard read, multipliers applied):

1. Words. "<": lower / less / cheaper / fewer / smaller / less expensive than, below,
   under, beneath, 低于, 小于, 少于, 比 B 低/便宜/少. ">": higher / more / greater / pricier /
   costlier / more expensive than, above, over, exceed(s/ed/ing), 高于, 大于, 多于, 超过,
   比 B 高/贵/多. Strict: equal values are false ("$279, below the low of $279").
2. A is the number right before the word (or before 比), with only a comma, dash or "(",
   a linking verb (is, was, which is, that's, remains, sits, stays, comes in) and degree
   words (now, still, just, well, far, slightly, a bit...) between; Chinese allows nothing,
   or a comma and 已/仍/还/也/都/是/目前/这.... English needs the comma or the verb (the word
   "exceeds" is one): in "it is $20 higher than $260" the $20 is a difference, not a price.
3. B is the first number after the word: at most 6 words on (a CJK character counts half),
   in the same clause (no , ; . ! ? 、 ) between), and no word between that changes the
   claim (or, equal, not, by, half, twice, times, any, all, most, other, 不, 或, 等于, 倍,
   半, 分之, 任何, 其他, 降, 涨, 跌...). With 比, B stands between 比 and the adjective, with only
   还/更/要/略/稍/明显/也 after it. A negation before the word ("not lower", 不低于, 不比) is
   outside what rule 2 lets stand between A and the word, so that clause is skipped.
4. A chain compares with the first A: in "$260, lower than the $280 average, higher than
   the $250 low" (or "…, and higher…", "…，高于…", "…，比…高") 250 is compared with 260. Up
   to 4 words may follow B before the comma or "and"; a new subject there ("which is",
   "that", 这, 它) or a negation ends the chain, and the next comparison is skipped.
5. Skipped: a side of another kind than the other (a percentage against a price: "12%
   lower than $300"; a count, a rating or a measure against a price); a side that is part
   of a range or a ratio ("5-10", "4.3/5"), signed, a change or a starting point ("down
   3.2%", "$20 off", "高20元", "from $300"), part of a name ("NC700", "35th", "618大促"), or
   the far side of an earlier comparison in its clause that was not read; a second number
   close after B in its clause before any other comparison word (which one is compared is
   unclear: "lower than the 618 sale price of $259"); a clause the text has not finished
   (the streaming guard checks prefixes, and "over the 618" may go on "sale price of $259").
   Dates, years and durations ("90-day", "30 days", "近90天") are never sides: they are
   passed over inside the gap ("lower than the 90-day average of $280" compares with 280).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal

_WINDOW = 6.0
"""Words from the comparison word to B; a CJK character is half a word."""

_COMPARISON = re.compile(
    r"(?P<en_lt>\b(?:lower|less|cheaper|fewer|smaller|less\s+expensive)\s+than\b"
    r"|\b(?:below|under|beneath)\b)"
    r"|(?P<en_gt>\b(?:higher|more|greater|pricier|costlier|more\s+expensive)\s+than\b"
    r"|\b(?:above|over)\b)"
    r"|(?P<en_verb>\bexceed(?:s|ed|ing)?\b)"
    r"|(?P<zh_lt>低于|小于|少于)|(?P<zh_gt>高于|大于|多于|超过)"
    r"|(?P<bi>(?<![对相无好类评排占])比(?![较例如起率重]))",
    re.IGNORECASE,
)
_BI_ADJECTIVE = re.compile(
    r"\s*(?:(?:还要|还|更加|更|要|都|略微|略|稍微|稍|明显|也)\s*)*"
    r"(?:(?P<lt>低|便宜|少)|(?P<gt>高|贵|多))(?!不)"
)
_EN_LINK = re.compile(
    r"\s*(?P<punct>[,—–(]\s*)?"
    r"(?P<verb>(?:(?:which|that|it|this)\s*(?:is|was|'s|’s)|is|was|are|were|sits|stays"
    r"|remains|comes\s+in)\s+)?"
    r"(?:(?:now|still|already|just|well|much|far|slightly|a\s+bit|a\s+little|even"
    r"|significantly|clearly|comfortably)\s+)*",
    re.IGNORECASE,
)
_ZH_LINK = re.compile(
    r"\s*(?:[,—(]\s*)?"
    r"(?:(?:已经|已|仍然|仍旧|仍|还是|还|依然|目前|现在|均|都|是|要|略微|略|稍微|稍|明显|远远|远"
    r"|大幅|也|这)\s*)*"
)
_EN_CHAIN = re.compile(
    r"(?P<tail>[^\d,;.!?()]*?)(?:\s*,\s*(?:(?:and|but|yet)\s+)?|\s+(?:and|but|yet)\s+)"
    r"(?:(?:is|was|sits|stays|remains)\s+)?"
    r"(?:(?:also|still|now|just|well|much|far|slightly|a\s+bit|a\s+little|even)\s+)*",
    re.IGNORECASE,
)
_ZH_CHAIN = re.compile(
    r"(?P<tail>[^\d,;.!?()、。]*?)\s*,\s*"
    r"(?:(?:也|并且|而且|且|但是|但|同时|又|还|都|仍然|仍|略|稍|明显|远|是)\s*)*"
)
_CHAIN_TAIL = 4.0
"""Words between B and the next comparison word of a chain ("the $280 average, ...")."""
_EN_NEW_SUBJECT = re.compile(
    r"(?<![\w'’-])(?:which|that|it|this|they|who|not|no|never)(?![\w'’-])", re.IGNORECASE
)
_ZH_NEW_SUBJECT = re.compile(r"这|它|其|不|没")
_CLAUSE_END = re.compile(r"[,;!?。、…\n)]|\.(?!\d)")
_SIGNS = "$¢£¤¥\u058f\u060b\u09f2\u09f3\u0e3f\u17db\u20a0-\u20c0\ufdfc"
"""Unicode's currency symbols (category Sc) as NFKC leaves them (￥ is ¥)."""
_CURRENCY_BEFORE = re.compile(
    rf"(?:(?:(?<![A-Za-z])[A-Z]{{1,3}})?[{_SIGNS}]|元\s|(?:USD|RMB|CNY)\s?)$"
)
"""A sign written before an amount, as `worthit.text.money` writes them in every language
("$", "US$", "CN¥", "JP¥", "HK$", "元 "): its letters belong to the amount, so "JP¥5,490"
is a price, not a model code like "NC700"."""
_UNIT = re.compile(
    r"(?:-| )?(?:"
    r"(?P<percent>%|percent\b|per\s+cent\b|percentage\s+points?\b|个?百分点)"
    r"|(?P<time>(?:day|week|month|year|hour|minute)s?\b|天|日|周|星期|个月|月|年|小时|分钟)"
    r"|(?P<count>(?:left|units?|items?|pieces?|buyers?|reviews?|ratings?|votes?|people"
    r"|shoppers?|customers?|sold|sellers?|stores?|shops?|rivals?|competitors?|models?"
    r"|products?|options?|listings?|deals?|times|observations?|sales|orders?)\b"
    r"|件|人|条|个|次|家|台|款|位|名|笔|单)"
    r"|(?P<rating>stars?\b|星|分(?![钟之]))"
    r"|(?P<measure>(?:kg|g|grams?|lbs?|pounds?|oz|inch(?:es)?|mah|w|watts?|hz|gb|tb|mb|mm|cm"
    r"|ml|l|db|km|mph|ft|feet)\b|\"|英寸|寸|克|公斤|毫安|瓦|磅)"
    r"|(?P<money>(?:us\s+)?dollars?\b|bucks?\b|yuan\b|(?-i:[A-Z]{3})\b|美元|元|块钱|块|人民币)"
    r")",
    re.IGNORECASE,
)
_JOINED_AFTER = re.compile(r"\s*[-–/~]\s*[\d$¥]")
_JOINERS_BEFORE = "-−–/~+"
_FOLLOWS_A_SIDE = frozenset("还更要都略稍明显也的了比已仍依目现均是远这低高便宜贵少多")
"""CJK characters that may follow a number of a comparison; any other makes it a name."""
_EN_CHANGE = re.compile(
    r"(?<![A-Za-z])(?:down|up|by|off|save[sd]?|savings?|cut|drop(?:ped|s)?|fell|falls|rose"
    r"|rises|another|extra|minus|plus|from|vs|versus|against|than)\s*$",
    re.IGNORECASE,
)
_ZH_CHANGE = re.compile(r"(?:低|高|便宜|贵|省|降|涨|跌|少|多|减|优惠|差|了|从|由)\s*$")
_EN_WORD = re.compile(r"[A-Za-z]+(?:['’-][A-Za-z]+)*")
_CJK = re.compile(r"[\u3400-\u9fff]")
_EN_CHANGES_THE_CLAIM = re.compile(
    r"(?<![\w'’-])(?:or|equals?|not|no|nor|never|by|half|double|twice|triple|times|quarter"
    r"|thirds?|any|all|most|each|every|others?|many|some|few|down|up)(?![\w'’-])",
    re.IGNORECASE,
)
_ZH_CHANGES_THE_CLAIM = re.compile(
    r"或|等于|持平|不|没|倍|半|分之|任何|所有|其他|多数|降|涨|跌|减|差|幅"
)


@dataclass(frozen=True, slots=True)
class Number:
    """A number as the guard read it."""

    text: str
    value: Decimal
    """Multiplier applied: "3.2万" is 32000."""
    start: int
    end: int
    dated: bool
    """Inside a written date, where it is a month, a day or a year."""


@dataclass(frozen=True, slots=True)
class _Side:
    number: Number
    start: int
    """Where it starts, a currency sign before it included."""
    end: int
    """Where it ends, its unit included."""
    kind: str | None
    """What it counts ("" for prices and bare numbers); None when it cannot be a side."""
    passed_over: bool
    """A date, year or duration: it may stand inside the gap before B."""


@dataclass(frozen=True, slots=True)
class _Read:
    a: _Side
    b: _Side
    end: int
    """Where the claim's words end."""
    holds: bool


def false_comparisons(normal: str, numbers: Sequence[Number]) -> tuple[str, ...]:
    """Each comparison in `normal` whose two written values are in the wrong order, as
    written from A to B."""
    sides = [_side(normal, n) for n in numbers]
    words = list(_COMPARISON.finditer(normal))
    read: dict[int, _Read] = {}
    found = []
    for word in words:
        claim = _read(normal, sides, words, word, read)
        if claim is None:
            continue
        read[claim.b.number.start] = claim
        if not claim.holds:
            found.append(normal[claim.a.start : claim.end].strip())
    return tuple(found)


def _read(
    normal: str,
    sides: list[_Side],
    words: list[re.Match[str]],
    word: re.Match[str],
    read: dict[int, _Read],
) -> _Read | None:
    """The comparison `word` makes, when it can be read for sure."""
    kind = word.lastgroup
    english = kind is not None and kind.startswith("en")
    a = _a_side(normal, sides, words, word, english, read)
    if a is None:
        return None
    b = _b_side(normal, sides, word.end())
    if b is None or b.kind != a.kind:
        return None
    if kind == "bi":
        adjective = _BI_ADJECTIVE.match(normal, b.end)
        if adjective is None:
            return None
        less, end = adjective["lt"] is not None, adjective.end()
    else:
        if not _settled(normal, sides, b):
            return None
        less, end = kind in ("en_lt", "zh_lt"), b.end
    x, y = a.number.value, b.number.value
    return _Read(a, b, end, x < y if less else x > y)


def _a_side(
    normal: str,
    sides: list[_Side],
    words: list[re.Match[str]],
    word: re.Match[str],
    english: bool,
    read: dict[int, _Read],
) -> _Side | None:
    before = [s for s in sides if s.number.end <= word.start()]
    if not before:
        return None
    a = before[-1]
    earlier = read.get(a.number.start)
    if earlier is not None:  # "A, lower than B, higher than C": C is compared with A
        return earlier.a if _chained(normal, earlier.end, word.start(), english) else None
    if a.kind is None or a.end > word.start() or _changed(normal, a.start):
        return None
    link = (_EN_LINK if english else _ZH_LINK).fullmatch(normal, a.end, word.start())
    if link is None:
        return None
    if english and word.lastgroup != "en_verb" and not (link["punct"] or link["verb"]):
        return None
    clause = _clause_start(normal, a.start)
    if any(clause <= w.start() and w.end() <= a.start for w in words):
        return None  # A is the far side of a comparison not read
    return a


def _chained(normal: str, start: int, end: int, english: bool) -> bool:
    chain = (_EN_CHAIN if english else _ZH_CHAIN).fullmatch(normal, start, end)
    if chain is None:
        return False
    tail = chain["tail"]
    if english:
        return _weight(tail) <= _CHAIN_TAIL and not _EN_NEW_SUBJECT.search(tail)
    return _weight(tail) <= _CHAIN_TAIL / 2 and not _ZH_NEW_SUBJECT.search(tail)


def _b_side(normal: str, sides: list[_Side], at: int) -> _Side | None:
    gap: list[str] = []
    cursor = at
    for side in sides:
        if side.number.start < at:
            continue
        if side.passed_over:
            gap.append(normal[cursor : side.start])
            cursor = max(cursor, side.end)
            continue
        if side.kind is None:
            return None
        gap.append(normal[cursor : side.start])
        text = " ".join(gap)
        if _CLAUSE_END.search(text) or _weight(text) > _WINDOW or _changes_the_claim(text):
            return None
        return side
    return None


def _settled(normal: str, sides: list[_Side], b: _Side) -> bool:
    """Whether B is the number compared: no other one follows it closely in its clause,
    and the clause is written far enough to know."""
    stop = _CLAUSE_END.search(normal, b.end)
    end = stop.start() if stop else len(normal)
    follows = _COMPARISON.search(normal, b.end, end)  # the next number is its own side
    if follows is not None:
        end = follows.start()
    for side in sides:
        if b.end <= side.number.start < end and not side.passed_over:
            return _weight(normal[b.end : side.start]) > _WINDOW
    segment = normal[b.end : end]
    if stop is not None or follows is not None or _weight(segment) >= _WINDOW:
        return True
    return not (_EN_WORD.search(segment) or _CJK.search(segment))


def _side(normal: str, number: Number) -> _Side:
    currency = _CURRENCY_BEFORE.search(normal, 0, number.start)
    start = currency.start() if currency else number.start
    unit = _UNIT.match(normal, number.end)
    end = unit.end() if unit else number.end
    what = unit.lastgroup if unit else None
    if what == "measure" and unit is not None:
        what = "measure " + unit[0].strip(" -").lower()
    year = (
        currency is None
        and what in (None, "time")
        and re.fullmatch(r"(?:19|20)\d\d", number.text) is not None
    )
    passed_over = number.dated or what == "time" or year
    kind: str | None = "" if what in (None, "money") else what
    previous = normal[start - 1] if start else ""
    following = normal[end] if end < len(normal) else ""
    named = (previous.isascii() and previous.isalpha()) or (
        unit is None
        and (
            (following.isascii() and following.isalpha())
            or (
                _CJK.match(following) is not None
                and following not in _FOLLOWS_A_SIDE
                and not _COMPARISON.match(normal, end)
            )
        )
    )
    joined = (previous != "" and previous in _JOINERS_BEFORE) or bool(
        _JOINED_AFTER.match(normal, number.end)
    )
    if passed_over or named or joined:
        kind = None
    return _Side(number, start, end, kind, passed_over)


def _changed(normal: str, start: int) -> bool:
    """Whether the number at `start` is a change or a starting point, not a level."""
    before = normal[max(0, start - 24) : start]
    return _EN_CHANGE.search(before) is not None or _ZH_CHANGE.search(before) is not None


def _changes_the_claim(gap: str) -> bool:
    return bool(_EN_CHANGES_THE_CLAIM.search(gap) or _ZH_CHANGES_THE_CLAIM.search(gap))


def _weight(text: str) -> float:
    return len(_EN_WORD.findall(text)) + len(_CJK.findall(text)) / 2


def _clause_start(normal: str, at: int) -> int:
    ends = [m.end() for m in _CLAUSE_END.finditer(normal, 0, at)]
    return ends[-1] if ends else 0
