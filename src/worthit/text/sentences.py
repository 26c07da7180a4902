"""Where a sentence ends, in English and Chinese.

An ASCII terminator (or an ellipsis) ends a sentence only before white space or the end
of the text, so "4.5" and "v1.2" do not; a CJK terminator always does. A line break is
layout, not an end: the explanation flow decides what a new line means.
"""

from __future__ import annotations

import re

TERMINATORS = ".!?…。！？"
"""Every character that can end a sentence."""

SENTENCE_END = re.compile(r"[.!?…](?=\s|$)|[。！？]")


def sentence_ends(text: str) -> list[int]:
    """Index just after each complete sentence of text, in order."""
    return [m.end() for m in SENTENCE_END.finditer(text)]


def last_sentence_end(text: str) -> int:
    """Index just after the last complete sentence of text (0 if none)."""
    ends = sentence_ends(text)
    return ends[-1] if ends else 0


def ends_sentence(text: str) -> bool:
    """Whether text, trailing white space aside, ends with a sentence terminator."""
    stripped = text.rstrip()
    return bool(stripped) and stripped[-1] in TERMINATORS
