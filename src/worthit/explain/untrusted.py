"""Text written by strangers reaches the model only through here.

The explanation prompt holds one such text, the product's title (sellers write titles);
reviews and the shopper's question never reach the model. Two steps, kept apart because
they answer different threats:

* `clean_untrusted` removes what a reader cannot see but a tokenizer can (zero-width
  characters, bidi overrides and isolates, the BOM, tag characters, variation selectors,
  control codes, lone surrogates), so that what an auditor reads is what the model read,
  and it bounds the length. NFKC comes first so that full-width or stylised look-alikes
  (``＜｜im_start｜＞``) become the plain characters the next step recognises.
* `neutralise_markers` rewrites every character that could open a chat turn.

Both are pure functions of their input: the same title must give the same prompt bytes,
since the prompt is the key of the stored explanation.
"""

from __future__ import annotations

import re
import unicodedata

ELLIPSIS = "…"

# Controls, format characters (zero-width, bidi, BOM, tags), surrogates, private use and
# unassigned code points: none of them renders as anything a reader could check.
_INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn"})
# Invisible code points that Unicode files as marks or letters (combining grapheme joiner,
# Hangul fillers, Khmer inherent vowels, Mongolian variation selectors).
_INVISIBLE_POINTS = frozenset(
    {0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x180B, 0x180C, 0x180D, 0x180F, 0x3164, 0xFFA0}
)

# Every chat template we know of (ChatML <|im_start|>, Llama <s> [INST] <<SYS>>, Gemma
# <start_of_turn>, Llama 3 <|eot_id|>) needs an angle or a square bracket, and so do our
# own markers: rewriting the four brackets defuses the whole family, including tokens
# nobody has invented yet.
_BRACKETS = str.maketrans({"<": "‹", ">": "›", "[": "(", "]": ")"})
_ROLE_MARKER = re.compile(
    r"(system|assistant|user|developer|human|tool|系统|助手|用户)\s*[:：]", re.IGNORECASE
)


def clean_untrusted(text: str, max_chars: int = 240) -> str:
    """Visible, single-line text of at most `max_chars` characters, "…" included."""
    if max_chars < 1:
        raise ValueError("max_chars must be at least 1")
    return _truncate(_visible(text), max_chars)


def neutralise_markers(text: str) -> str:
    """Rewrite brackets and role markers so that `text` cannot open a turn or close a quote.

    Apply it after `clean_untrusted`, whose NFKC step turns look-alikes into the plain
    characters matched here.
    """
    return _ROLE_MARKER.sub(r"\1 -", text.translate(_BRACKETS))


def _visible(text: str) -> str:
    normal = unicodedata.normalize("NFKC", text)
    kept = "".join(" " if ch.isspace() else ch for ch in normal if not _is_hidden(ch))
    return " ".join(kept.split())


def _is_hidden(ch: str) -> bool:
    if ch.isspace():  # newlines and tabs are controls too, but they separate words
        return False
    code = ord(ch)
    return (
        unicodedata.category(ch) in _INVISIBLE_CATEGORIES
        or code in _INVISIBLE_POINTS
        or 0xFE00 <= code <= 0xFE0F  # variation selectors
        or 0xE0000 <= code <= 0xE01EF  # tag characters and variation selectors supplement
    )


def _truncate(text: str, max_chars: int) -> str:
    if len(text) <= max_chars:
        return text
    cut = max_chars - len(ELLIPSIS)
    # Never leave a base character without the accents that follow it.
    while cut > 0 and unicodedata.category(text[cut]).startswith("M"):
        cut -= 1
    return text[:cut].rstrip() + ELLIPSIS
