"""Other advice scored on the backtest's own decisions: the price trackers' one-line rules,
the forecaster, and the rules with the forecaster (`worthit backtest --anchors --forecast`).

Every policy here is scored on exactly the decisions where worthit's verdict was BUY or
WAIT (those `backtest.Score` counts), with the same shopper: BUY pays day d's price; WAIT
asks the same policy again at the end of each following day and pays on the first day it
says BUY, or on day d + horizon. So the shares are comparable line for line.

- keepa: BUY when today's price is at or below 0.95 × its 90-day average (Keepa's
  "deltaPercent" against the 90-day average), else WAIT.
- camel: BUY when within 5 % of the 90-day low (camelcamelcamel's "good deal", on the
  90 days the data has), else WAIT.
- always_wait: wait the whole horizon.
- forecast: `ForecastPolicy` where the forecaster has a model, the Keepa rule (its
  baseline) where it has none yet.
- rules+forecast: what the service answers (`decide_verdict` given the forecast): the
  rules' WAIT stands when it rests on facts the forecaster cannot see (out of stock, an
  announced sale, over budget); otherwise the forecaster decides where it has a model, the
  deal rule where it has none and the store's prices keep a regular level
  (`StoreForecaster.deal_rule_at`), and the rules elsewhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import date, timedelta

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view
from numpy.typing import NDArray

from worthit.decide.backtest import Outcome, ReplayPlan, Score, _Product
from worthit.decide.forecast import StoreForecaster
from worthit.decide.forecast_advice import DEAL_SHARE, DEFAULT_POLICY, ForecastPolicy
from worthit.decide.forecast_features import DEAL_WINDOW, trailing_average
from worthit.decide.verdict import VerdictKind
from worthit.facts.builder import FactsBuilder, ProductHistory
from worthit.text.time import from_ms

ANCHOR_WINDOW = DEAL_WINDOW
KEEPA_SHARE = DEAL_SHARE
CAMEL_SHARE = 1.05

ANCHORS = ("keepa", "camel", "always_wait")
FORECASTS = ("rules+forecast", "forecast")


class _Prices:
    """One product's end-of-day prices over the replay, and its 90-day average and low."""

    def __init__(self, product: _Product, first: date, last: date) -> None:
        self.first = first - timedelta(days=ANCHOR_WINDOW - 1)
        n = (last - self.first).days + 1
        values = [product.price(self.first + timedelta(days=i)) for i in range(n)]
        self.price: NDArray[np.float64] = np.array(
            [np.nan if v is None else v for v in values], dtype=float
        )
        self.avg90 = trailing_average(self.price, ANCHOR_WINDOW)
        padded = np.concatenate([np.full(ANCHOR_WINDOW - 1, np.nan), self.price])
        windows = sliding_window_view(padded, ANCHOR_WINDOW)
        known = ~np.isnan(windows)
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


def replay_policies(
    builder: FactsBuilder,
    plan: ReplayPlan,
    histories: Iterable[ProductHistory],
    forecaster: StoreForecaster | None = None,
    policy: ForecastPolicy = DEFAULT_POLICY,
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
        if forecaster is not None:
            rules["forecast"] = _forecast_or(forecaster, sku, policy, prices.keepa_buys)
            rules["rules+forecast"] = _served(product, forecaster, sku, policy)
        for day in plan.days:
            base = product.decide(day, h)
            outcomes = {"worthit": base}
            if base.counted:
                for name, buys in rules.items():
                    outcomes[name] = _follow(product, base, day, h, buys)
            yield outcomes
        if progress is not None:
            progress(done)


def _forecast_or(
    forecaster: StoreForecaster,
    sku: str,
    policy: ForecastPolicy,
    otherwise: Callable[[date], bool],
) -> Callable[[date], bool]:
    """The forecaster's advice where it has a model, `otherwise` where it has none."""

    def buys(day: date) -> bool:
        forecast = forecaster.at(sku, day)
        if forecast is None or not policy.applies(forecast):
            return otherwise(day)
        return not policy.waits(forecast)

    return buys


def _served(
    product: _Product, forecaster: StoreForecaster, sku: str, policy: ForecastPolicy
) -> Callable[[date], bool]:
    """The service's verdict on each day: the rules given that day's forecast."""

    def buys(day: date) -> bool:
        forecast = forecaster.at(sku, day)
        verdict = product.verdict(day, forecast, policy, forecaster.deal_rule_at(day))
        return verdict.kind is VerdictKind.BUY

    return buys


def compare_policies(
    builder: FactsBuilder,
    plan: ReplayPlan,
    skus: Iterable[str],
    span_ms: tuple[int, int],
    scores: dict[str, Score],
    forecast: bool = False,
    policy: ForecastPolicy = DEFAULT_POLICY,
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
