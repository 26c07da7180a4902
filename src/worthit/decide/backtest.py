"""The backtest: replay the store and score what following worthit's verdicts would have
earned a shopper, against buying at once and against a clairvoyant.

At each decision day d, for each product, the verdict as of the end of day d, from the
rows stamped by then (the same sheets and the same `decide_verdict` as an as-of answer).
The policy it scores:

- BUY pays the price of day d: what one unit costs then (the sheet's effective price,
  so an offer at the till counts, not only a promotional price).
- WAIT asks again at the end of each following day and pays on the first day the
  verdict is BUY, or on day d + horizon, whatever the verdict then.
- SKIP and INSUFFICIENT_DATA buy nothing; they are counted apart, not in the savings.

The score is Etzioni et al.'s ("To buy or not to buy", KDD 2003): the saving against
buying at once as a share of the clairvoyant's, Σ(buy_now − paid) / Σ(buy_now − best),
where best is the lowest price in [d, d + horizon], and the share of shoppers left worse
off than if they had bought at once. Hamlet captured 61.8 %.

Each product's rows are read once and cut in memory for every day it is asked about
(`FactsBuilder.history`, `build_from`), and each (product, day) verdict is computed once,
however many waits ask for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from worthit.decide.as_of import end_of_day_ms
from worthit.decide.forecast_advice import DEFAULT_POLICY, Forecast, ForecastPolicy
from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, Verdict, VerdictKind
from worthit.facts.builder import FactsBuilder, ProductHistory, effective_price_at
from worthit.facts.sheet import FactSheet
from worthit.market.store import MarketStore
from worthit.text.time import from_ms

DEFAULT_EVERY = 7
DEFAULT_HORIZON = 30
LOWER_AFTER_BUY = 0.05
"""A BUY is counted as followed by a lower price when the horizon's best is this much below."""


@dataclass(frozen=True)
class ReplayPlan:
    """Which days are decision days, and how long a WAIT may wait."""

    first: date
    last: date
    """The last decision day: its horizon ends inside the data."""
    every: int = DEFAULT_EVERY
    horizon: int = DEFAULT_HORIZON

    @property
    def days(self) -> list[date]:
        count = (self.last - self.first).days // self.every + 1
        return [self.first + timedelta(days=i * self.every) for i in range(max(0, count))]


def plan_replay(
    store: MarketStore,
    start: date | None = None,
    end: date | None = None,
    every: int = DEFAULT_EVERY,
    horizon: int = DEFAULT_HORIZON,
) -> ReplayPlan:
    """Decision days from `start` (default: the market's first price) to `end` (default and
    at most: `horizon` days before its last price, so every wait can run its course).

    Raises ValueError when no day is left to decide on.
    """
    if every < 1 or horizon < 0:
        raise ValueError("every must be at least 1 and horizon at least 0")
    span = store.price_span()
    if span is None:
        raise ValueError("the market has no prices to replay")
    first_day, last_day = from_ms(span[0]).date(), from_ms(span[1]).date()
    latest = last_day - timedelta(days=horizon)
    first = max(start or first_day, first_day)
    last = min(end or latest, latest)
    if first > last:
        raise ValueError(
            f"no decision day left: the market's prices run {first_day} to {last_day}, and a "
            f"{horizon}-day horizon needs decisions on {latest} at the latest"
        )
    return ReplayPlan(first, last, every, horizon)


@dataclass(frozen=True, slots=True)
class Outcome:
    """One decision and what following it cost."""

    sku: str
    category: str
    day: str
    verdict: str
    bought_day: str | None
    """None for SKIP and INSUFFICIENT_DATA: nothing was bought."""
    paid: float | None
    buy_now_price: float | None
    best_price: float | None
    """The lowest price in [day, day + horizon]."""
    reasons: tuple[str, ...] = ()
    """The codes of the reasons that carried the decision-day verdict."""

    @property
    def counted(self) -> bool:
        return self.paid is not None and self.buy_now_price is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "sku": self.sku,
            "category": self.category,
            "day": self.day,
            "verdict": self.verdict,
            "bought_day": self.bought_day,
            "paid": self.paid,
            "buy_now_price": self.buy_now_price,
            "best_price": self.best_price,
            "reasons": list(self.reasons),
        }


class _Product:
    """One product's replay: verdicts and day prices computed once each, on demand."""

    def __init__(self, builder: FactsBuilder, history: ProductHistory) -> None:
        self.builder = builder
        self.history = history
        self._verdicts: dict[tuple[date, bool, bool], Verdict] = {}
        self._prices: dict[date, float | None] = {}
        self._sheets: dict[date, FactSheet] = {}
        """The sheet of each day asked about, built once for every verdict read from it
        (the rules', and the service's with the forecaster or the deal rule)."""

    def verdict(
        self,
        day: date,
        forecast: Forecast | None = None,
        policy: ForecastPolicy = DEFAULT_POLICY,
        deal_rule: bool = False,
    ) -> Verdict:
        """The verdict as of the end of `day`: the rules alone, or given that day's forecast
        and whether the deal rule stands in for a missing one (one policy per replay, so the
        day and what was given key it)."""
        key = (day, forecast is not None, deal_rule)
        cached = self._verdicts.get(key)
        if cached is None:
            sheet = self._sheets.get(day)
            if sheet is None:
                sheet = self._sheets[day] = self.builder.build_from(
                    self.history, end_of_day_ms(day)
                )
            verdict = decide_verdict(sheet, forecast=forecast, policy=policy, deal_rule=deal_rule)
            cached = self._verdicts[key] = verdict
        return cached

    def price(self, day: date) -> float | None:
        if day not in self._prices:
            self._prices[day] = effective_price_at(self.history, end_of_day_ms(day))
        return self._prices[day]

    def decide(self, day: date, horizon: int) -> Outcome:
        verdict = self.verdict(day)
        now = self.price(day)
        later = [self.price(day + timedelta(days=k)) for k in range(horizon + 1)]
        seen = [p for p in later if p is not None]
        bought: date | None = None
        if verdict.kind is VerdictKind.BUY:
            bought = day
        elif verdict.kind is VerdictKind.WAIT:
            bought = next(
                (
                    day + timedelta(days=k)
                    for k in range(1, horizon)
                    if self.verdict(day + timedelta(days=k)).kind is VerdictKind.BUY
                ),
                day + timedelta(days=horizon),
            )
        lead = _LEADS.get(verdict.kind)
        product = self.history.product
        return Outcome(
            sku=product.sku,
            category=product.category,
            day=day.isoformat(),
            verdict=verdict.kind.value,
            bought_day=None if bought is None else bought.isoformat(),
            paid=None if bought is None else self.price(bought),
            buy_now_price=now,
            best_price=min(seen) if seen else None,
            reasons=tuple(r.code for r in verdict.reasons if r.polarity is lead),
        )


_LEADS = {
    VerdictKind.BUY: Polarity.BUY,
    VerdictKind.WAIT: Polarity.WAIT,
    VerdictKind.SKIP: Polarity.SKIP,
    VerdictKind.INSUFFICIENT_DATA: Polarity.INFO,
}


def replay(
    builder: FactsBuilder,
    plan: ReplayPlan,
    skus: Iterable[str],
    progress: Callable[[int], None] | None = None,
) -> Iterator[Outcome]:
    """Every decision of the plan for each product, product by product, in day order."""
    days = plan.days
    for done, sku in enumerate(skus, 1):
        history = builder.history(sku)
        if history is not None:
            product = _Product(builder, history)
            for day in days:
                yield product.decide(day, plan.horizon)
        if progress is not None:
            progress(done)


@dataclass
class Score:
    """Running totals over a set of decisions; the shares are read from them."""

    decisions: int = 0
    counts: dict[VerdictKind, int] = field(default_factory=lambda: dict.fromkeys(VerdictKind, 0))
    saving: float = 0.0
    """Σ(buy_now − paid) over BUY and WAIT decisions."""
    clairvoyant: float = 0.0
    """Σ(buy_now − best) over the same decisions."""
    worse_off: int = 0
    regret_pct: float = 0.0
    """Σ 100·(paid − best)/best."""
    lower_after_buy: int = 0
    waited_days: int = 0

    @property
    def counted(self) -> int:
        return self.counts[VerdictKind.BUY] + self.counts[VerdictKind.WAIT]

    def add(self, outcome: Outcome) -> None:
        self.decisions += 1
        self.counts[VerdictKind(outcome.verdict)] += 1
        if not outcome.counted:
            return
        assert outcome.paid is not None and outcome.buy_now_price is not None
        now, paid = outcome.buy_now_price, outcome.paid
        best = outcome.best_price if outcome.best_price is not None else now
        self.saving += now - paid
        self.clairvoyant += now - best
        self.worse_off += paid > now
        self.regret_pct += 100.0 * (paid - best) / best if best > 0 else 0.0
        if outcome.verdict == VerdictKind.BUY and best <= now * (1 - LOWER_AFTER_BUY):
            self.lower_after_buy += 1
        if outcome.bought_day is not None:
            waited = date.fromisoformat(outcome.bought_day) - date.fromisoformat(outcome.day)
            self.waited_days += waited.days

    @property
    def captured(self) -> float | None:
        """The share of the clairvoyant saving captured (None when there was none to have)."""
        return self.saving / self.clairvoyant if self.clairvoyant > 0 else None

    def to_dict(self) -> dict[str, Any]:
        counted = self.counted
        buys = self.counts[VerdictKind.BUY]
        waits = self.counts[VerdictKind.WAIT]
        return {
            "decisions": self.decisions,
            "verdicts": {kind.value: n for kind, n in self.counts.items()},
            "saving": round(self.saving, 2),
            "clairvoyant_saving": round(self.clairvoyant, 2),
            "captured": _share(self.saving, self.clairvoyant if self.clairvoyant > 0 else 0),
            "worse_off": _share(self.worse_off, counted),
            "mean_regret_pct": round(self.regret_pct / counted, 2) if counted else None,
            "buy_then_lower": _share(self.lower_after_buy, buys),
            "mean_wait_days": round(self.waited_days / waits, 1) if waits else None,
        }


def _share(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass
class Summary:
    """Scores overall, by category, and by the reasons that carried each verdict."""

    overall: Score = field(default_factory=Score)
    by_category: dict[str, Score] = field(default_factory=dict)
    by_reason: dict[str, Score] = field(default_factory=dict)

    def add(self, outcome: Outcome) -> None:
        self.overall.add(outcome)
        self.by_category.setdefault(outcome.category, Score()).add(outcome)
        for code in outcome.reasons or ("(none)",):
            self.by_reason.setdefault(code, Score()).add(outcome)

    def to_dict(self) -> dict[str, Any]:
        return {
            "overall": self.overall.to_dict(),
            "by_category": {k: v.to_dict() for k, v in sorted(self.by_category.items())},
            "by_reason": {k: v.to_dict() for k, v in sorted(self.by_reason.items())},
        }


def summarize(outcomes: Iterable[Outcome]) -> Summary:
    summary = Summary()
    for outcome in outcomes:
        summary.add(outcome)
    return summary
