"""Checks on the model's wording beyond its numbers: a small model loops, echoes its
prompt, or says the opposite of the verdict it was asked to explain.

Each check names the problem, so the fallback to the template is explainable.
"""

from __future__ import annotations

import re
from collections import Counter

from worthit.decide.verdict import VerdictKind

_ECHOES = (
    "one or two short sentences",
    "one or two friendly sentences",
    "rewrite the verdict",
    "tell the shopper",
    "请把结论",
    "the main reason in",
    "verdict:",
    "reasons:",
    "product:",
    "商品：",
    "because:",
    "question:",
    "请用中文",
    "结论：",
    "理由：",
    "<<<",
    "facts ",
)
_WORDS = re.compile(r"\w+", re.UNICODE)
_CJK = re.compile(r"[\u4e00-\u9fff]")
_DANGLING = re.compile(
    r"([:：,，;；(（]|\b(that|of|the|and|because|is|at|to)|(^|(?<!double)[\s:：])\d{1,2}\.)$",
    re.IGNORECASE,
)
"""Ends mid-clause, or with a list's next marker (" 2."); a sale named with its number
("ahead of Double 12.") is no marker."""
_TAUTOLOGY = re.compile(
    r"\b(it'?s|it is) (not )?worth (buying|it)\b|\bthe fact that\s*[:：]?$|because of the price\.?$"
    r"|\bit'?s a great product\b|值得买，|不值得买。$"
)
_RUN = re.compile(r"([^\s\d])\1{4,}")
_BUY_CLAIMS = re.compile(
    r"(?<!not )(?<!n't )\b(worth buying|buy (it )?now|good deal|great deal)\b|值得买|值得入手"
)
_NEGATIVE_CLAIMS = re.compile(
    r"\b(not worth|don't buy|do not buy|skip it|avoid)\b|不值得|不建议|别买"
)


def problem(text: str, kind: VerdictKind, min_words: int = 4) -> str | None:
    """Why the text (the model's words after the headline) cannot be shown, or None.

    A reason that only restates the verdict ("because it's worth it") or stops mid-
    sentence says nothing the template would not say better, so it falls back too. A
    Chinese character counts as a word: "目前缺货" (out of stock) is a whole reason in four,
    the strict checker's own Chinese minimum.
    """
    lowered = text.lower()
    if any(echo in lowered for echo in _ECHOES):
        return "echoed_prompt"
    cjk = len(_CJK.findall(text))
    if len(_WORDS.findall(_CJK.sub(" ", lowered))) + cjk < min_words:
        return "too_short"
    if repetitive(text):
        return "repetitive"
    if _DANGLING.search(text.rstrip()):
        return "incomplete"
    if kind is VerdictKind.BUY and _NEGATIVE_CLAIMS.search(lowered):
        return "contradicts_verdict"
    if kind is not VerdictKind.BUY and _BUY_CLAIMS.search(_after_headline(lowered, kind)):
        return "contradicts_verdict"
    if _TAUTOLOGY.search(lowered):
        return "says_nothing"
    return None


def repetitive(text: str) -> bool:
    """A word trigram three times, a character five times running, or one line twice."""
    if _RUN.search(text):
        return True
    words = _WORDS.findall(text.lower())
    trigrams = Counter(zip(words, words[1:], words[2:], strict=False))
    if trigrams and max(trigrams.values()) >= 3:
        return True
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return len(lines) != len(set(lines))


def _after_headline(text: str, kind: VerdictKind) -> str:
    """The headline "Not worth buying" itself must not count as a buy claim."""
    if kind is VerdictKind.SKIP:
        return text.replace("not worth buying", "")
    return text
