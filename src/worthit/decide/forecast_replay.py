"""Other advice scored on the backtest's own decisions: the price trackers' one-line rules,
the forecaster alone, and the rules with the forecaster (`worthit backtest --anchors
--forecast`).

Every policy here is scored on exactly the decisions where worthit's verdict was BUY or
WAIT (those `backtest.Score` counts), with the same shopper: BUY pays day d's price; WAIT
asks the same policy again at the end of each following day and pays on the first day it
says BUY, or on day d + horizon. So the shares are comparable line for line.

- keepa: BUY when today's price is at or below 0.95 × its 90-day average (Keepa's
  "deltaPercent" against the 90-day average), else WAIT.
- camel: BUY when within 5 % of the 90-day low (camelcamelcamel's "good deal", on the
  90 days the data has), else WAIT.
- always_wait: wait the whole horizon.
- forecast: WAIT when the forecaster says a drop is likely and worth it
  (`ForecastPolicy.waits`), else BUY; BUY where it has no model yet.
- rules+forecast: the rules' WAIT stands when it rests on facts the forecaster cannot see
  (out of stock, an announced sale, over budget); otherwise the forecaster decides where it
  has a model, and the rules where it has none.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from worthit.decide.backtest import Outcome, ReplayPlan, Score, _Product
from worthit.decide.forecast import Forecast, StoreForecaster
from worthit.decide.verdict import Polarity, VerdictKind
from worthit.facts.builder import FactsBuilder, ProductHistory
from worthit.text.time import from_ms

ANCHOR_WINDOW = 90
KEEPA_SHARE = 0.95
CAMEL_SHARE = 1.05
HARD_WAITS = frozenset({"out_of_stock", "upcoming_sale", "over_budget"})
"""Rule reasons for waiting that rest on facts outside the price history."""

ANCHORS = ("keepa", "camel", "always_wait")
FORECASTS = ("rules+forecast", "keepa+forecast", "forecast")


@dataclass(frozen=True)
class ForecastPolicy:
    """When a forecast is a reason to wait: waiting is expected to save at least
    `min_saving` of today's price, and a drop is at least `p_wait` likely. Fixed, the same
    on every market, not fitted to one."""

    p_wait: float = 0.0
    min_saving: float = 0.0
    max_p_worse: float = 0.2
    """The largest risk of ending dearer the forecaster takes to wait: fixed beforehand
    from the target (≤ 5 % of shoppers worse off, with about a quarter of them waiting)."""
    overrule: float = 0.02
    """How sure the forecaster must be (expected saving or cost, as a share of the price)
    to overrule the Keepa rule in `keepa+forecast`."""
    watch: bool = True
    """WAIT names a price (today's less the drop) and the shopper buys when it is reached;
    without, the shopper asks the forecaster again each day, as with the rules."""

    def waits(self, forecast: Forecast) -> bool:
        return (
            forecast.p_drop >= self.p_wait
            and forecast.expected_saving >= self.min_saving
            and forecast.p_worse <= self.max_p_worse
        )


class _Prices:
    """One product's end-of-day prices over the replay, and its 90-day average and low."""

    def __init__(self, product: _Product, first: date, last: date) -> None:
        self.first = first - timedelta(days=ANCHOR_WINDOW - 1)
        n = (last - self.first).days + 1
        values = [product.price(self.first + timedelta(days=i)) for i in range(n)]
        self.price: NDArray[np.float64] = np.array(
            [np.nan if v is None else v for v in values], dtype=float
        )
        padded = np.concatenate([np.full(ANCHOR_WINDOW - 1, np.nan), self.price])
        windows = sliding_window_view(padded, ANCHOR_WINDOW)
        known = ~np.isnan(windows)
        counts = known.sum(axis=1)
        sums = np.where(known, windows, 0.0).sum(axis=1)
        self.avg90 = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
        self.min90 = np.where(known, windows, np.inf).min(axis=1)

    def _i(self, day: date) -> int:
        return (day - self.first).days

    def keepa_buys(self, day: date) -> bool:
        i = self._i(day)
        p = self.price[i]
        return bool(p == p and p <= KEEPA_SHARE * self.avg90[i])

    def camel_buys(self, day: date) -> bool:
        i = self._i(day)
        p = self.price[i]
        return bool(p == p and p <= CAMEL_SHARE * self.min90[i])


def _follow(
    product: _Product, base: Outcome, day: date, horizon: int, buys: Callable[[date], bool]
) -> Outcome:
    """The shopper who follows `buys` from `day`: the backtest's wait rule, another policy."""
    if buys(day):
        bought = day
    else:
        bought = next(
            (day + timedelta(days=k) for k in range(1, horizon) if buys(day + timedelta(days=k))),
            day + timedelta(days=horizon),
        )
    return Outcome(
        sku=base.sku,
        category=base.category,
        day=base.day,
        verdict=(VerdictKind.BUY if bought == day else VerdictKind.WAIT).value,
        bought_day=bought.isoformat(),
        paid=product.price(bought),
        buy_now_price=base.buy_now_price,
        best_price=base.best_price,
    )


def _watch(product: _Product, base: Outcome, day: date, horizon: int, target: float) -> Outcome:
    """The shopper told to wait for `target`: buys on the first following day the price is
    at or below it, or on day d + horizon."""
    bought = next(
        (
            day + timedelta(days=k)
            for k in range(1, horizon)
            if (p := product.price(day + timedelta(days=k))) is not None and p <= target
        ),
        day + timedelta(days=horizon),
    )
    return Outcome(
        sku=base.sku,
        category=base.category,
        day=base.day,
        verdict=VerdictKind.WAIT.value,
        bought_day=bought.isoformat(),
        paid=product.price(bought),
        buy_now_price=base.buy_now_price,
        best_price=base.best_price,
    )


def _forecast_outcome(
    product: _Product,
    base: Outcome,
    day: date,
    horizon: int,
    forecast: Forecast,
    forecaster: StoreForecaster,
    policy: ForecastPolicy,
) -> Outcome:
    """BUY now, or WAIT for the drop the forecaster expects (a price watch at today's
    price less `drop`), which is the shopper its `expected_wait_price` was learned for."""
    if not policy.waits(forecast):
        return _follow(product, base, day, horizon, lambda _day: True)
    if policy.watch:
        return _watch(product, base, day, horizon, forecast.price * (1 - forecast.drop))
    forecaster_buys = _asks_again(forecaster, base.sku, policy)
    return _follow(product, base, day, horizon, forecaster_buys)


def _asks_again(
    forecaster: StoreForecaster, sku: str, policy: ForecastPolicy
) -> Callable[[date], bool]:
    def buys(day: date) -> bool:
        forecast = forecaster.at(sku, day)
        return forecast is None or not policy.waits(forecast)

    return buys


def replay_policies(
    builder: FactsBuilder,
    plan: ReplayPlan,
    histories: Iterable[ProductHistory],
    forecaster: StoreForecaster | None = None,
    policy: ForecastPolicy = ForecastPolicy(),
    progress: Callable[[int], None] | None = None,
) -> Iterator[dict[str, Outcome]]:
    """For each decision of the plan: worthit's outcome under "worthit", and, when worthit
    bought or waited, every other policy's on the same decision."""
    h = plan.horizon
    for done, history in enumerate(histories, 1):
        product = _Product(builder, history)
        sku = history.product.sku
        prices = _Prices(product, plan.first, plan.last + timedelta(days=h))

        rules: dict[str, Callable[[date], bool]] = {
            "keepa": prices.keepa_buys,
            "camel": prices.camel_buys,
            "always_wait": lambda _day: False,
        }
        for day in plan.days:
            base = product.decide(day, h)
            outcomes = {"worthit": base}
            if base.counted:
                for name, buys in rules.items():
                    outcomes[name] = _follow(product, base, day, h, buys)
                if forecaster is not None:
                    outcomes.update(_with_forecast(product, base, day, h, forecaster, policy))
                    anchored = _anchor_with_forecast(prices, forecaster, sku, policy)
                    outcomes["keepa+forecast"] = _follow(product, base, day, h, anchored)
            yield outcomes
        if progress is not None:
            progress(done)


def _with_forecast(
    product: _Product,
    base: Outcome,
    day: date,
    horizon: int,
    forecaster: StoreForecaster,
    policy: ForecastPolicy,
) -> dict[str, Outcome]:
    """The forecaster alone (BUY where it has no model), and the rules with it: the rules'
    WAIT stands where it rests on facts the history cannot show, the forecaster decides
    where it has a model, the rules where it has none."""
    forecast = forecaster.at(base.sku, day)
    if forecast is None:
        alone = _follow(product, base, day, horizon, lambda _day: True)
        return {"rules+forecast": base, "forecast": alone}
    alone = _forecast_outcome(product, base, day, horizon, forecast, forecaster, policy)
    verdict = product.verdict(day)
    waits_for = {r.code for r in verdict.reasons if r.polarity is Polarity.WAIT}
    hard = verdict.kind is VerdictKind.WAIT and bool(waits_for & HARD_WAITS)
    return {"rules+forecast": base if hard else alone, "forecast": alone}


def _anchor_with_forecast(
    prices: _Prices, forecaster: StoreForecaster, sku: str, policy: ForecastPolicy
) -> Callable[[date], bool]:
    """The Keepa rule, overruled where the forecaster is sure enough: WAIT at a deal when a
    deeper drop is expected, BUY above it when waiting is expected to cost."""

    def buys(day: date) -> bool:
        anchor = prices.keepa_buys(day)
        forecast = forecaster.at(sku, day)
        if forecast is None:
            return anchor
        if anchor:
            return forecast.expected_saving < policy.overrule
        return forecast.expected_saving <= -policy.overrule

    return buys


def compare_policies(
    builder: FactsBuilder,
    plan: ReplayPlan,
    skus: Iterable[str],
    span_ms: tuple[int, int],
    scores: dict[str, Score],
    forecast: bool = False,
    policy: ForecastPolicy = ForecastPolicy(),
    progress: Callable[[int], None] | None = None,
) -> Iterator[Outcome]:
    """worthit's outcomes, as `backtest.replay` yields them, while the other policies'
    are scored into `scores` by name (anchors always; the forecaster's when `forecast`).

    The forecaster is fitted over the market's price span (`span_ms`, first and last price)
    on rolling origins, so every forecast read on a day came from a model that saw nothing
    after it.
    """
    histories = [h for h in (builder.history(sku) for sku in skus) if h is not None]
    forecaster = None
    if forecast:
        first, last = from_ms(span_ms[0]).date(), from_ms(span_ms[1]).date()
        forecaster = StoreForecaster.build(histories, first, last, plan.horizon)
    names = ANCHORS + (FORECASTS if forecast else ())
    for name in names:
        scores.setdefault(name, Score())
    for outcomes in replay_policies(builder, plan, histories, forecaster, policy, progress):
        for name, outcome in outcomes.items():
            if name != "worthit":
                scores[name].add(outcome)
        yield outcomes["worthit"]
