"""What the forecaster says about one product on one day, and the advice it gives.

Kept apart from the models (`forecast`, scikit-learn) so that the verdict rules, which
run on every request, read a forecast without importing the learning stack.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date

DEAL_SHARE = 0.95
"""A deal: a price at or below this share of its 90-day average (Keepa's deltaPercent
against the 90-day average). The deal rule buys at one and waits for one otherwise; the
forecaster improves on that rule, and decides in its place where it has no forecast
(`decide_verdict`'s `deal_rule`)."""

DEFAULT_REFIT_S = 3600.0
"""How often the service fits the store's forecaster again (decide/forecast_refit.py):
prices move through the day, what the history says about them hardly does."""


@dataclass(frozen=True, slots=True)
class Forecast:
    """What the model says about one product on one day, with the history behind it."""

    p_drop: float
    """P(price falls ≥ drop within horizon)."""
    expected_low: float
    """Expected lowest price over the horizon (today's included)."""
    expected_wait_price: float
    """Expected price paid by waiting: on the first later day that is a deal (at or below
    `deal_price` then), or at the horizon."""
    p_worse: float
    """P(waiting so ends dearer than buying today)."""
    price: float
    deal_price: float
    """A deal today: `DEAL_SHARE` × the 90-day average. At or below it the policy buys."""
    drop: float
    horizon: int
    comparable_moments: int
    comparable_drops: int
    """Of the latest comparable moments of this product (same state: near its low, near
    its high, or between; a week apart at least), how many saw such a drop."""
    origin: date

    @property
    def expected_saving(self) -> float:
        """The share of today's price that waiting is expected to save (negative: cost)."""
        return 1 - self.expected_wait_price / self.price if self.price > 0 else 0.0

    @property
    def is_deal(self) -> bool:
        return self.price <= self.deal_price


@dataclass(frozen=True)
class ForecastPolicy:
    """BUY or WAIT from a forecast: one step of policy improvement on the deal rule.

    The deal rule (BUY at or below 0.95 × the 90-day average, else WAIT and ask again) is
    the baseline the forecaster's `expected_wait_price` is learned for: what a shopper pays
    who waits now and then buys at the first deal or at the horizon. Acting greedily on
    that value is at least as good as the rule when the value is right: at a deal, buy;
    at an ordinary price, wait unless waiting is expected to cost at least `max_cost` of
    today's price (a rise is coming and no deal before it). The margin leans towards
    waiting because the two mistakes are not alike: a wait that was not needed costs the
    rise, usually a few per cent, while a buy at an ordinary price forgoes the sale that
    came, often a fifth. Fixed, the same on every market (set in trial runs on ocado and
    the simulator, not fitted to one).
    """

    max_cost: float = 0.02
    min_comparable: int = 1
    """A forecast's reason names the product's own comparable moments; with fewer behind
    it, the rules decide alone."""

    def applies(self, forecast: Forecast) -> bool:
        return forecast.comparable_moments >= self.min_comparable

    def waits(self, forecast: Forecast) -> bool:
        return not forecast.is_deal and forecast.expected_saving > -self.max_cost


DEFAULT_POLICY = ForecastPolicy()


@dataclass(frozen=True)
class ForecastSnapshot:
    """The forecasts of one fit, for the prices of its day: what the verdict reads.

    A forecast is for the price it was made at. When the product's price has moved since,
    or the day has turned, it says nothing (the rules answer) until the next fit."""

    day: date
    by_sku: Mapping[str, Forecast]
    fitted_in_s: float = 0.0
    deal_rule: bool = False
    """The store's prices keep a regular level (`StoreForecaster.deal_rule_at`), so a
    product without a forecast here is judged by the deal rule the forecaster improves on,
    not by the rules' price reasons."""

    def forecast(self, sku: str, price: float | None, day: str) -> Forecast | None:
        """The forecast for `sku` at `price` on `day` (ISO, a sheet's `as_of` will do)."""
        found = self.by_sku.get(sku)
        if found is None or price is None or day[:10] != self.day.isoformat():
            return None
        return found if abs(found.price - price) < 0.005 else None

    def deal_rule_on(self, day: str) -> bool:
        """Whether the deal rule judges a product without a forecast on `day` (ISO): the
        fit's own day only, as for its forecasts."""
        return self.deal_rule and day[:10] == self.day.isoformat()
