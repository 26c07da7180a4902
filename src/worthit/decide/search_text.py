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

_CJK = "\u3040-\u30fa\u30fc-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af"
_CJK_RUN = re.compile(rf"[{_CJK}]+")
# A word: letters and digits, with inner hyphens, dots, slashes or apostrophes ("WH-1000XM5").
_WORD = re.compile(rf"[^\W_{_CJK}]+(?:[-./'’][^\W_{_CJK}]+)*")
_PIECE = re.compile(rf"{_CJK_RUN.pattern}|{_WORD.pattern}")
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


@dataclass(frozen=True, slots=True)
class Term:
    """One searchable unit and the positions of the text it stands for."""

    text: str
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Analysed:
    """A text as positions (a word, or a CJK character pair) and the terms over them."""

    positions: tuple[str, ...]
    terms: tuple[Term, ...]
    cjk: tuple[bool, ...]
    """Per position: whether it is a CJK pair (or a lone CJK character)."""


def fold(text: str) -> str:
    """NFKC, case folded, spaces collapsed: the form every comparison is made in."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def analyse(text: str) -> Analysed:
    """Positions and terms of `text`; see the module's docstring for what joins and splits."""
    positions: list[str] = []
    cjk: list[bool] = []
    terms: list[Term] = []
    for piece in _PIECE.finditer(fold(text)):
        word = piece[0]
        if _CJK_RUN.fullmatch(word):
            pairs = [word[i : i + 2] for i in range(len(word) - 1)] or [word]
            for pair in pairs:
                terms.append(Term(pair, len(positions), len(positions) + 1))
                positions.append(pair)
                cjk.append(True)
            continue
        parts = [p for p in _JOINER.split(word) if p]
        start = len(positions)
        for part in parts:
            terms.append(Term(part, len(positions), len(positions) + 1))
            positions.append(part)
            cjk.append(False)
        if len(parts) > 1:
            terms.append(Term("".join(parts), start, len(positions)))
    terms.extend(_code_joins(positions, cjk))
    return Analysed(tuple(positions), tuple(terms), tuple(cjk))


def _code_joins(positions: list[str], cjk: list[bool]) -> list[Term]:
    """A letters-only word followed by one starting with a digit is also one model code:
    "NC 700" is "nc700", "Pulse 2" is "pulse2"."""
    joins = []
    for i in range(len(positions) - 1):
        left, right = positions[i], positions[i + 1]
        if cjk[i] or cjk[i + 1]:
            continue
        if left.isalpha() and right[0].isdigit():
            joins.append(Term(left + right, i, i + 2))
    return joins


def weight(position: str, is_cjk: bool) -> float:
    """How much a query position says about which product is meant.

    A model code (it has a digit) says most; a word says something; a CJK pair less
    than a word (two pairs make a brand like "极光"); filler words and hiragana (the
    particles of a Japanese sentence: "AuroraのNC700") almost nothing.
    """
    if is_cjk:
        return 0.1 if _HIRAGANA.fullmatch(position) else 0.7
    if _DIGIT.search(position):
        return 2.0
    if position in FILLER_WORDS:
        return 0.1
    return 1.0


def is_variant(position: str) -> bool:
    """A word after a name that names another model of its line: "Pro", "Max", "2"."""
    return position in VARIANT_WORDS or (position.isdigit() and len(position) <= 4)
