"""Verdicts kept for the sheets they were decided from, so that the same product asked
about again costs a dictionary lookup instead of the rules.

`decide_verdict` is pure in the sheet, the language and the budget, so a verdict holds
for as long as everything it reads is unchanged: the sheet's `version` (a hash of every
fact on it, the product's revision included), its `as_of` moment (the rules compare
promotion starts with it, and the version leaves it out), the language and the budget.
A new event or a rolled window changes the version, so nothing needs evicting: an old
entry is simply never asked for again and ages out.

A sheet rebuilt with nothing changed (its TTL ran out; the idle-time refresher) has the
same version at a new `as_of`. Its verdict is decided again, and when it equals the one
kept, the kept object is handed out: what is kept downstream per verdict object (the
explanation run's prompt and guard numbers, answer/run_memo.py) then still holds, and a
sale's first burst after a quiet spell does not rebuild it for every product.

The one thing a sheet's version does not fix is its data's age, which grows with every
read. Age only counts on a live sheet past its freshness objective, where the verdict
says how old the data is and is less sure (decide/rules.py); those verdicts are decided
afresh every time and never kept. Within the objective, age changes nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from worthit.decide.forecast_advice import Forecast, ForecastSnapshot
from worthit.decide.rules import (
    DEFAULT_THRESHOLDS,
    Thresholds,
    decide_verdict,
    past_freshness_objective,
)
from worthit.decide.verdict import Verdict
from worthit.facts.sheet import FactSheet
from worthit.text.lru import LRU

DEFAULT_CAPACITY = 8192
"""Verdicts kept: a few per product (two languages, the budgets shoppers name)."""

_Key = tuple[str, str, str, float | None, Forecast | None, bool]
"""Sku, version, language, budget, the store's forecast, whether the deal rule stands in
for a missing one; the entry holds the `as_of` it was decided at."""


class VerdictCache:
    def __init__(
        self,
        capacity: int = DEFAULT_CAPACITY,
        thresholds: Thresholds = DEFAULT_THRESHOLDS,
        forecasts: Callable[[], ForecastSnapshot | None] | None = None,
    ) -> None:
        self.capacity = capacity
        self.thresholds = thresholds
        self.forecasts = forecasts
        """The store's latest forecasts (decide/forecast_refit.py); None: the rules alone."""
        self._entries: LRU[_Key, tuple[str, Verdict]] = LRU(capacity)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.uncacheable = 0
        """Verdicts on live data past its objective: their text names the age."""

    def verdict(self, sheet: FactSheet, language: str, budget: float | None = None) -> Verdict:
        """What `decide_verdict(sheet, language, budget=budget, forecast=…)` returns, once
        per key, with the store's forecast for the sheet's product at its price, if any."""
        forecast, deal_rule = self._forecast(sheet)
        if not self._ageless(sheet):
            with self._lock:
                self.uncacheable += 1
            return decide_verdict(
                sheet, language, self.thresholds, budget, forecast, deal_rule=deal_rule
            )
        key = (sheet.sku, sheet.version, language, budget, forecast, deal_rule)
        with self._lock:
            cached = self._entries.peek(key)
            if cached is not None and cached[0] == sheet.as_of:
                self._entries.get(key)
                self.hits += 1
                return cached[1]
            self.misses += 1
        verdict = decide_verdict(
            sheet, language, self.thresholds, budget, forecast, deal_rule=deal_rule
        )
        if cached is not None and cached[1] == verdict:
            verdict = cached[1]
        with self._lock:
            self._entries.put(key, (sheet.as_of, verdict))
        return verdict

    def _forecast(self, sheet: FactSheet) -> tuple[Forecast | None, bool]:
        """The store's forecast for the sheet's product at its price, and whether the deal
        rule stands in where there is none (the latest fit's day only)."""
        snapshot = None if self.forecasts is None else self.forecasts()
        if snapshot is None:
            return None, False
        price = sheet.effective_price if sheet.effective_price is not None else sheet.current_price
        return snapshot.forecast(sheet.sku, price, sheet.as_of), snapshot.deal_rule_on(sheet.as_of)

    def _ageless(self, sheet: FactSheet) -> bool:
        """Whether the data's age leaves the verdict alone (the rules' own test)."""
        return not past_freshness_objective(sheet, self.thresholds)

    def __len__(self) -> int:
        return len(self._entries)
