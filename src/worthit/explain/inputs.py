"""What an explanation depends on, and nothing else: the explanation's inputs.

The explanation words a verdict the facts already fixed, so it needs the product's title,
the verdict, its leading reasons with their numbers, and the language; not the question's
wording, not the facts version, not the time. Two askers of the same inputs get
byte-identical prompts, and a fact that changes no reason (stock from 950 to 949) changes
no input: that is what lets one checked explanation serve every asker of those inputs.
"""

from __future__ import annotations

from dataclasses import dataclass

from worthit.decide.verdict import Reason, Verdict, VerdictKind
from worthit.explain.templates import language_of, leading_reasons
from worthit.explain.untrusted import clean_untrusted, neutralise_markers
from worthit.text.money import money

TITLE_MAX_CHARS = 120


@dataclass(frozen=True, slots=True)
class ExplanationInputs:
    title: str
    """The catalogue title, cleaned as untrusted text (sellers write titles)."""
    verdict: VerdictKind
    reasons: tuple[str, ...]
    """The reasons the template would lead with, as the model reads them (`model_text`)."""
    language: str
    """"en", "zh" or "ja"."""

    @classmethod
    def of(cls, title: str, verdict: Verdict, currency: str = "USD") -> ExplanationInputs:
        """`currency` is the sheet's: a sale event's prices are written in it."""
        language = language_of(verdict)
        return cls(
            title=neutralise_markers(clean_untrusted(title, TITLE_MAX_CHARS)),
            verdict=verdict.kind,
            reasons=tuple(model_text(r, language, currency) for r in leading_reasons(verdict)),
            language=language,
        )

    @property
    def label(self) -> str:
        return self.verdict.label(self.language)


_SALE_EVENT = {
    "en": "{name} is in {days} days: expected price {prices} (today {current}).",
    "zh": "{days}天后是{name}：预计价格{prices}（现价{current}）。",
    "ja": "{days}日後は{name}：予想価格{prices}（現在{current}）。",
}
_RANGE = {"en": "{} to {}", "zh": "{}至{}", "ja": "{}〜{}"}


def model_text(reason: Reason, language: str, currency: str) -> str:
    """A reason as the model reads it: its sentence, except a calendar sale's, which comes
    as one short line of the event, its days, the prices it would bring and today's.

    The shopper's sentence also says what the evidence was (this product's past sales, its
    category's median, other events) and the discounts off the month before: about 80
    more tokens to prefill in English, 130 in Chinese, and more for a 135M model to
    misquote (on the demo market's sale-event best sellers the greedy try was kept 10
    times in 24 with the sentence, 21 with the line). Every number of the line is one of
    the sentence's, and the guard still allows all of the reason's."""
    if reason.code != "sale_event":
        return reason.text.strip()
    n = reason.numbers
    low, high, today = (
        money(float(n[key]), currency, language) for key in ("price_from", "price_to", "current")
    )
    prices = low if low == high else _RANGE[language].format(low, high)
    return _SALE_EVENT[language].format(
        name=n["name"], days=n["days"], prices=prices, current=today
    )
