"""Product names and shoppers' text cut into the terms the search index matches.

Both sides go through this one analysis, so that what a shopper types meets what a
catalogue stores however either was spelt: NFKC and case folding ("ＮＣ７００" is
"nc700"); model codes joined across a hyphen or a space ("NC-700", "NC 700" and "NC700"
share the term "nc700"); Chinese and Japanese, written without spaces, cut into
overlapping character pairs, the usual unit of CJK search (Lucene's CJKAnalyzer does
the same), so "极光" is found inside "极光NC700降噪耳机" and the pairs of a whole question
("极光NC700值不值得买") only add terms that match nothing.

A term's text holds letters and digits only, so it can never be a pattern: no wildcard,
quote or operator of any query language survives analysis.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import NamedTuple

_CJK = "\u3040-\u30fa\u30fc-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(rf"[{_CJK}]+")
# A word: letters and digits, with inner hyphens, dots, slashes or apostrophes ("WH-1000XM5").
_WORD = re.compile(rf"[^\W_{_CJK}]+(?:[-./'’][^\W_{_CJK}]+)*")
_PIECE = re.compile(rf"{_CJK_RUN.pattern}|{_WORD.pattern}")
_CJK_START = re.compile(rf"[{_CJK}]")
_JOINER = re.compile(r"[-./'’]")
_DIGIT = re.compile(r"\d")
_HIRAGANA = re.compile(r"[\u3041-\u309f]+")

VARIANT_WORDS = frozenset(
    {"pro", "max", "lite", "plus", "mini", "ultra", "se", "slim", "neo", "ii", "iii", "iv"}
    | {"xl", "fe", "gen", "edition"}
)
"""Words that make a different model of the same line ("Q5 Pro", "SMARTCOBY Pro SLIM")."""
FILLER_WORDS = frozenset(
    {"a", "an", "the", "this", "that", "my", "new", "one", "for", "with", "and", "or", "of"}
    | {"in", "on", "to", "is", "it", "its", "i", "me"}
)
"""English words a shopper types around a name that say nothing about which product."""


class Term(NamedTuple):
    """One searchable unit and the positions of the text it stands for."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Analysed:
    """A text as positions (a word, or a CJK character pair) and the terms over them:
    each position is a term, and so is each model code joined across positions."""

    positions: tuple[str, ...]
    cjk: tuple[bool, ...]
    """Per position: whether it is a CJK pair (or a lone CJK character)."""
    joins: tuple[Term, ...]

    @property
    def terms(self) -> list[Term]:
        return [Term(p, i, i + 1) for i, p in enumerate(self.positions)] + list(self.joins)

    def texts(self) -> list[str]:
        """Every term's text, as the index stores them."""
        return [*self.positions, *(join.text for join in self.joins)]


def fold(text: str) -> str:
    """NFKC, case folded, spaces collapsed: the form every comparison is made in."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def analyse(text: str) -> Analysed:
    """Positions and terms of `text`; see the module's docstring for what joins and splits.

    It runs on every name of every product when the index is built (700,000 names at
    100,000 products), hence the plain loops and the tests before each regex."""
    positions: list[str] = []
    cjk: list[bool] = []
    joins: list[Term] = []
    for word in _PIECE.findall(unicodedata.normalize("NFKC", text).casefold()):
        if _CJK_START.match(word):
            pairs = [word[i : i + 2] for i in range(len(word) - 1)] if len(word) > 1 else [word]
            positions += pairs
            cjk += [True] * len(pairs)
            continue
        if _JOINER.search(word):
            parts = _JOINER.split(word)
            joins.append(Term("".join(parts), len(positions), len(positions) + len(parts)))
            positions += parts
            cjk += [False] * len(parts)
        else:
            positions.append(word)
            cjk.append(False)
    hyphenated = {join.start for join in joins if join.end - join.start == 2}
    for i in range(len(positions) - 1):
        left, right = positions[i], positions[i + 1]
        if i in hyphenated or cjk[i] or cjk[i + 1]:
            continue
        if right[0].isdigit() and left.isalpha():
            joins.append(Term(left + right, i, i + 2))  # "NC 700" is also "nc700"
    return Analysed(tuple(positions), tuple(cjk), tuple(joins))


def weight(position: str, is_cjk: bool, in_code: bool = False) -> float:
    """How much a query position says about which product is meant.

    A model code (it has a digit) says most; a word says something; a CJK pair less
    than a word (two pairs make a brand like "极光"); filler words and hiragana (the
    particles of a Japanese sentence: "AuroraのNC700") almost nothing.
    """
    if is_cjk:
        return 0.1 if _HIRAGANA.fullmatch(position) else 0.7
    if _DIGIT.search(position):
        return 2.0
    if position in FILLER_WORDS and not in_code:  # the "a" of "A-14" is no article
        return 0.1
    return 1.0


def is_variant(position: str) -> bool:
    """A word after a name that names another model of its line: "Pro", "Max", "2"."""
    return position in VARIANT_WORDS or (position.isdigit() and len(position) <= 4)
