"""Question → decision: intent, product resolution, facts, verdict. No LLM anywhere here.

compare and top_n answer from the same fact sheets and the same rules as a single
product question, so every product in an answer is judged the same way. Asked as of a
past moment, every sheet and ranking in the answer is as of that moment; products are
resolved against today's catalogue (product rows keep no history).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from functools import lru_cache

from worthit.decide.as_of import check_as_of, parse_as_of
from worthit.decide.calibration import Calibrated, Calibration
from worthit.decide.forecast_advice import ForecastSnapshot
from worthit.decide.intent import Intent, IntentKind, parse_intent
from worthit.decide.phrasing import number, sentence
from worthit.decide.resolve import ProductResolver, Resolution, ResolutionStatus
from worthit.decide.verdict import Polarity, Reason, Verdict, VerdictKind
from worthit.decide.verdict_cache import VerdictCache
from worthit.facts.builder import DEFAULT_STALE_PRICE_DAYS, FactsBuilder
from worthit.facts.cache import FactsCache, SheetTier
from worthit.facts.rankings import RankedItem, Rankings
from worthit.facts.sheet import FactSheet
from worthit.market.categories import BY_KEY, category_name
from worthit.market.store import MarketStore
from worthit.text.time import Clock, now_ms

DEFAULT_TOP_N = 3
MAX_TOP_N = 10
DEFAULT_TOP_WINDOW_DAYS = 7
INTENTS_KEPT = 8192
"""Parsed questions kept: shoppers ask the same few phrasings about the best sellers."""


class DecisionStatus(StrEnum):
    ANSWERED = "answered"
    AMBIGUOUS = "ambiguous"
    UNKNOWN_PRODUCT = "unknown_product"
    NOT_UNDERSTOOD = "not_understood"


@dataclass(frozen=True, slots=True)
class Judged:
    """One product with its facts and verdict, as compare lists them."""

    sheet: FactSheet
    verdict: Verdict


@dataclass
class Decision:
    question: str
    intent: Intent
    status: DecisionStatus
    verdict: Verdict | None = None
    sheet: FactSheet | None = None
    resolutions: tuple[Resolution, ...] = ()
    compared: tuple[Judged, ...] = ()
    ranking: tuple[RankedItem, ...] = ()
    summary: tuple[Reason, ...] = ()
    timings_ms: dict[str, float] = field(default_factory=dict)
    as_of_ms: int | None = None
    """The past moment this decision was taken as of (None: now)."""
    calibrated: Calibrated | None = None
    """The verdict's confidence calibrated on outcomes (None: no calibration, or no advice)."""

    @property
    def language(self) -> str:
        return self.intent.language


class _Clock:
    def __init__(self) -> None:
        self.timings: dict[str, float] = {}
        self._last = time.perf_counter()

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.timings[stage] = round(self.timings.get(stage, 0.0) + (now - self._last) * 1000, 3)
        self._last = now


_RANK = {
    VerdictKind.BUY: 3,
    VerdictKind.WAIT: 2,
    VerdictKind.INSUFFICIENT_DATA: 1,
    VerdictKind.SKIP: 0,
}


class Decider:
    def __init__(
        self,
        facts: FactsCache,
        resolver: ProductResolver,
        calibration: Calibration | None = None,
        verdicts: VerdictCache | None = None,
    ) -> None:
        self.facts = facts
        self.resolver = resolver
        self.rankings = Rankings(facts.builder)
        self.calibration = calibration
        """Outcomes learnt so far (decide/calibration.py); None: answers carry none."""
        self.verdicts = VerdictCache() if verdicts is None else verdicts
        """Verdicts of unchanged sheets, so a popular product costs a lookup."""
        self._parse = lru_cache(maxsize=INTENTS_KEPT)(parse_intent)
        """`parse_intent` reads the question alone, so a question asked again is a lookup."""

    @classmethod
    def for_store(
        cls,
        store: MarketStore,
        clock: Clock = now_ms,
        *,
        calibration: Calibration | None = None,
        live: bool = False,
        tier: SheetTier | None = None,
        stale_price_days: float = DEFAULT_STALE_PRICE_DAYS,
        forecasts: Callable[[], ForecastSnapshot | None] | None = None,
    ) -> Decider:
        """The decider over `store` as of `clock`: its fact cache (`live`: the store is fed
        by events, so old data counts against an answer; `tier`: the sheets shared with
        other processes; `stale_price_days`: how old a last price may be), its product
        resolver and its verdicts (`forecasts`: the store's latest forecasts, read by each
        verdict)."""
        builder = FactsBuilder(store, clock, stale_price_days=stale_price_days)
        facts = FactsCache(builder, fed_by_events=live, tier=tier)
        verdicts = VerdictCache(forecasts=forecasts)
        return cls(facts, ProductResolver(store), calibration, verdicts)

    @property
    def store(self) -> MarketStore:
        return self.facts.builder.store

    def verdict(
        self, sheet: FactSheet, language: str = "en", budget: float | None = None
    ) -> Verdict:
        """The verdict on `sheet`, through the verdict cache: every verdict worthit shows
        (an answer's, a product's facts page, a watch's notification) comes from here."""
        return self.verdicts.verdict(sheet, language, budget)

    def as_of(self, text: str) -> int:
        """The moment `text` names (`parse_as_of`), if a decision can be taken as of it:
        not after now, not before the market's first price. ValueError saying why not."""
        at = parse_as_of(text)
        span = self.store.price_span()
        check_as_of(at, self.facts.builder.clock(), None if span is None else span[0])
        return at

    def decide(
        self,
        question: str,
        sku: str | None = None,
        language: str | None = None,
        at_ms: int | None = None,
    ) -> Decision:
        """`language` ("en"/"zh"/"ja") overrides the one detected in the question; `at_ms`
        takes the decision as of that moment (see `as_of`), from the rows stamped by then."""
        decision = self._decide(question, sku, language, at_ms)
        decision.as_of_ms = at_ms
        if self.calibration is not None and decision.verdict is not None and decision.sheet:
            decision.calibrated = self.calibration.calibrate(
                decision.verdict.kind, decision.sheet.category, decision.verdict.confidence
            )
        return decision

    def _decide(
        self, question: str, sku: str | None, language: str | None, at_ms: int | None
    ) -> Decision:
        clock = _Clock()
        intent = self._parse(question)
        if language in ("en", "zh", "ja") and language != intent.language:
            intent = replace(intent, language=language)  # type: ignore[arg-type]
        clock.lap("intent")
        if sku is not None:
            return self._single(question, intent, sku, (), clock, at_ms)
        if intent.kind is IntentKind.TOP_N:
            return self._top_n(question, intent, clock, at_ms)
        if not intent.mentions:
            return self._finish(Decision(question, intent, DecisionStatus.NOT_UNDERSTOOD), clock)
        resolutions = tuple(self.resolver.resolve(m) for m in intent.mentions)
        clock.lap("resolve")
        unresolved = [r for r in resolutions if r.status is not ResolutionStatus.RESOLVED]
        if unresolved:
            status = (
                DecisionStatus.UNKNOWN_PRODUCT
                if any(r.status is ResolutionStatus.UNKNOWN for r in unresolved)
                else DecisionStatus.AMBIGUOUS
            )
            return self._finish(Decision(question, intent, status, resolutions=resolutions), clock)
        skus = list(dict.fromkeys(r.sku for r in resolutions if r.sku))
        if intent.kind is IntentKind.COMPARE and len(skus) >= 2:
            return self._compare(question, intent, skus, resolutions, clock, at_ms)
        return self._single(question, intent, skus[0], resolutions, clock, at_ms)

    def _single(
        self,
        question: str,
        intent: Intent,
        sku: str,
        resolutions: tuple[Resolution, ...],
        clock: _Clock,
        at_ms: int | None,
    ) -> Decision:
        sheet = self.facts.get(sku, at_ms)
        clock.lap("facts")
        if sheet is None:
            return self._finish(
                Decision(question, intent, DecisionStatus.UNKNOWN_PRODUCT, resolutions=resolutions),
                clock,
            )
        verdict = self.verdict(sheet, intent.language, intent.budget)
        clock.lap("verdict")
        decision = Decision(
            question,
            intent,
            DecisionStatus.ANSWERED,
            verdict=verdict,
            sheet=sheet,
            resolutions=resolutions,
        )
        return self._finish(decision, clock)

    def _compare(
        self,
        question: str,
        intent: Intent,
        skus: list[str],
        resolutions: tuple[Resolution, ...],
        clock: _Clock,
        at_ms: int | None,
    ) -> Decision:
        judged: list[Judged] = []
        for sku in skus:
            sheet = self.facts.get(sku, at_ms)
            if sheet is not None:
                judged.append(Judged(sheet, self.verdict(sheet, intent.language, intent.budget)))
        clock.lap("facts")
        ranked = sorted(judged, key=_compare_key, reverse=True)
        best, other = ranked[0], ranked[1]
        tie = _compare_key(best) == _compare_key(other)
        values: dict[str, str | float] = {
            "title": best.sheet.title,
            "kind": best.verdict.kind.label(intent.language),
            "other_title": other.sheet.title,
            "other_kind": other.verdict.kind.label(intent.language),
            "rating": best.sheet.rating.bayesian or 0.0,
            "other_rating": other.sheet.rating.bayesian or 0.0,
        }
        if tie:
            code = "compare_tie"
        elif best.verdict.kind is other.verdict.kind:
            code = "compare_pick_rating"
        else:
            code = "compare_pick"
        numbers: dict[str, float | int | str] = {
            "sku": best.sheet.sku,
            "other_sku": other.sheet.sku,
        }
        if code == "compare_pick_rating":
            numbers.update(rating=values["rating"], other_rating=values["other_rating"])
        pick = Reason(code, Polarity.INFO, numbers, sentence(code, intent.language, values))
        clock.lap("verdict")
        return self._finish(
            Decision(
                question,
                intent,
                DecisionStatus.ANSWERED,
                verdict=best.verdict,
                sheet=best.sheet,
                resolutions=resolutions,
                compared=tuple(ranked),
                summary=(pick,),
            ),
            clock,
        )

    def _top_n(self, question: str, intent: Intent, clock: _Clock, at_ms: int | None) -> Decision:
        n = min(MAX_TOP_N, intent.n or DEFAULT_TOP_N)
        days = intent.window_days or DEFAULT_TOP_WINDOW_DAYS
        metric = intent.metric or "sales"
        items = self.rankings.top(
            intent.category, metric, days, n, at_ms=at_ms, max_price=intent.budget
        )
        clock.lap("facts")
        category = BY_KEY.get(intent.category or "")
        shown_category = category_name(category, intent.language) if category else "products"
        if not items:
            empty = "top_empty" if intent.budget is None else "top_empty_budget"
            shown = {"days": days, "category": shown_category, "budget": number(intent.budget or 0)}
            text = sentence(empty, intent.language, shown)
            summary: tuple[Reason, ...] = (Reason(empty, Polarity.INFO, {"days": days}, text),)
        else:
            code = "top_rating" if metric == "rating" else "top_sales"
            summary = tuple(
                Reason(
                    code,
                    Polarity.INFO,
                    {"rank": item.rank, "value": item.value, "count": item.count, "days": days},
                    sentence(
                        code,
                        intent.language,
                        {
                            "rank": item.rank,
                            "title": item.title,
                            "value": number(item.value) if metric == "rating" else int(item.value),
                            "count": item.count,
                            "days": days,
                        },
                    ),
                )
                for item in items
            )
        if intent.budget is not None and items:
            shown = {"budget": number(intent.budget)}
            limit = Reason(
                "top_budget",
                Polarity.INFO,
                {"budget": intent.budget},
                sentence("top_budget", intent.language, shown),
            )
            summary = (limit, *summary)
        clock.lap("verdict")
        return self._finish(
            Decision(
                question, intent, DecisionStatus.ANSWERED, ranking=tuple(items), summary=summary
            ),
            clock,
        )

    @staticmethod
    def _finish(decision: Decision, clock: _Clock) -> Decision:
        decision.timings_ms = dict(clock.timings)
        decision.timings_ms["decide_total"] = round(sum(clock.timings.values()), 3)
        return decision


def _compare_key(judged: Judged) -> tuple[int, float, float]:
    rating = judged.sheet.rating.bayesian or 0.0
    return (_RANK[judged.verdict.kind], rating, judged.verdict.confidence)
