"""Deterministic explanation text: what the shopper reads when the model's text cannot be used.

It replaces the model's text when that fails the grounding guard or misses the deadline,
so it has to be right by construction: it restates the verdict and the decision core's own
reason sentences (already in the question's language, already carrying their numbers) and
adds no number of its own except the current price when no reason has text.
"""

from __future__ import annotations

from worthit.decide.verdict import Polarity, Reason, Verdict, VerdictKind
from worthit.facts.sheet import FactSheet
from worthit.text.money import money
from worthit.text.sentences import ends_sentence

_SUPPORTING = {
    VerdictKind.BUY: Polarity.BUY,
    VerdictKind.WAIT: Polarity.WAIT,
    VerdictKind.SKIP: Polarity.SKIP,
    VerdictKind.INSUFFICIENT_DATA: Polarity.INFO,
}


def language_of(verdict: Verdict) -> str:
    """Chinese for any Chinese tag ("zh", "zh-CN"), Japanese for any Japanese one,
    English for everything else."""
    tag = verdict.language.lower()[:2]
    return tag if tag in ("zh", "ja") else "en"


def template_explanation(verdict: Verdict, sheet: FactSheet) -> str:
    """One or two sentences: the headline with the strongest reason, then the next one."""
    language = language_of(verdict)
    end = "。" if language in ("zh", "ja") else "."
    sentences = [_sentence(r.text, end) for r in leading_reasons(verdict)]
    if not sentences and sheet.current_price is not None:
        price = money(sheet.current_price, sheet.currency, language)
        sentences = [_SELLS_FOR.get(language, _SELLS_FOR["en"]).format(price=price)]
    headline = verdict.kind.label(language)
    if not sentences:
        return headline + end
    # A colon before a complete sentence keeps that sentence's capital (APA style), so
    # the reason text is used verbatim in both languages.
    colon, space = ("：", "") if language in ("zh", "ja") else (": ", " ")
    return headline + colon + space.join(sentences)


_SELLS_FOR = {
    "en": "It sells for {price} now.",
    "zh": "当前售价{price}。",
    "ja": "現在の価格は{price}です。",
}


def leading_reasons(verdict: Verdict) -> list[Reason]:
    """Reasons for the verdict first, then neutral ones, then those against; order kept."""
    supporting = _SUPPORTING[verdict.kind]

    def rank(reason: Reason) -> int:
        if reason.polarity is supporting:
            return 0
        return 1 if reason.polarity is Polarity.INFO else 2

    with_text = [r for r in verdict.reasons if r.text.strip()]
    return sorted(with_text, key=rank)[:2]


def _sentence(text: str, end: str) -> str:
    text = text.strip()
    return text if ends_sentence(text) else text + end
