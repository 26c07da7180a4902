"""The forecaster never learns from the future: the rolling-origin split, the labels, the
features, and a whole fitted store checked by changing what came after a day."""

from __future__ import annotations

from datetime import date

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.decide.forecast import RollingOrigins, StoreForecaster
from worthit.decide.forecast_advice import Forecast
from worthit.decide.forecast_features import (
    Calendar,
    ProductSeries,
    labels,
    product_features,
    shop_signals,
)


@settings(max_examples=300, deadline=None)
@given(
    start=st.integers(0, 60),
    every=st.integers(1, 40),
    horizon=st.integers(1, 60),
    days=st.integers(1, 400),
    day=st.integers(0, 400),
)
def test_the_model_used_on_a_day_never_trained_on_a_label_after_it(
    start: int, every: int, horizon: int, days: int, day: int
) -> None:
    schedule = RollingOrigins(start=start, every=every, horizon=horizon)
    origin = schedule.origin_for(day)
    if origin is None:
        assert day < start
        return
    assert start <= origin <= day
    rows = np.arange(days, dtype=np.int64)
    trained = rows[schedule.trainable(rows, origin)]
    assert np.all(trained + horizon <= day), "a label window ends after the decision day"
    # and nothing that had matured by the origin is left out
    assert set(trained.tolist()) == {r for r in range(days) if r + horizon <= origin}


prices = st.lists(st.one_of(st.just(float("nan")), st.floats(1.0, 100.0)), min_size=2, max_size=120)


@settings(max_examples=200, deadline=None)
@given(values=prices, horizon=st.integers(1, 30), cut=st.integers(0, 119))
def test_labels_read_only_their_own_window(values: list[float], horizon: int, cut: int) -> None:
    """Changing prices after day i + horizon changes no label of day i."""
    price = np.array(values)
    changed = price.copy()
    changed[cut + 1 :] = 1.0
    before, after = labels(price, horizon, 0.05), labels(changed, horizon, 0.05)
    for i in range(len(price)):
        if i + horizon <= cut:
            for a, b in zip(before, after, strict=True):
                assert (np.isnan(a[i]) and np.isnan(b[i])) or a[i] == b[i]


def _series(sku: str, price: np.ndarray, category: str = "c") -> ProductSeries:
    nan = np.full(len(price), np.nan)
    return ProductSeries(sku, category, price, nan.copy(), nan.copy())


@settings(max_examples=60, deadline=None)
@given(values=prices, cut=st.integers(0, 119))
def test_features_of_a_day_read_nothing_after_it(values: list[float], cut: int) -> None:
    price = np.array(values)
    changed = price.copy()
    changed[cut + 1 :] = 50.0
    cal = Calendar(date(2024, 1, 1), len(price))
    one = [_series("a", price)]
    two = [_series("a", changed)]
    a = product_features(one[0], shop_signals(one, 0.05, cal.days), cal, 7, 0.05)
    b = product_features(two[0], shop_signals(two, 0.05, cal.days), cal, 7, 0.05)
    upto = min(cut, len(price) - 1) + 1
    np.testing.assert_array_equal(a.x[:upto], b.x[:upto])
    np.testing.assert_array_equal(a.comparable[:upto], b.comparable[:upto])


def _market(days: int, seed: int) -> list[ProductSeries]:
    """Products on a regular price with sales of 20-30 % every 3-7 weeks, some rising."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(24):
        regular = float(rng.uniform(5, 50))
        price = np.full(days, regular)
        day = int(rng.integers(0, 30))
        while day < days:
            length = int(rng.integers(5, 15))
            price[day : day + length] = regular * float(rng.uniform(0.7, 0.8))
            day += length + int(rng.integers(20, 50))
        if k % 8 == 0:
            price *= np.linspace(1.0, 1.2, days)
        price[: int(rng.integers(0, 20))] = np.nan
        out.append(_series(f"p{k}", np.round(price, 2), category=f"c{k % 3}"))
    return out


def _fit(series: list[ProductSeries], days: int) -> StoreForecaster:
    forecaster = StoreForecaster(Calendar(date(2024, 1, 1), days), horizon=14, refit_every=20)
    forecaster.fit(series)
    return forecaster


def test_a_fitted_store_gives_the_same_forecasts_whatever_came_after() -> None:
    """Replacing every price after day `cut` changes no forecast on or before it: no model
    used then saw a row, a label or a shop-wide share from after it."""
    days, cut = 160, 100
    series = _market(days, seed=3)
    changed = [
        _series(
            s.sku, np.concatenate([s.price[: cut + 1], s.price[cut + 1 :][::-1] * 0.5]), s.category
        )
        for s in series
    ]
    a, b = _fit(series, days), _fit(changed, days)
    assert a.fits > 0
    for s in series:
        np.testing.assert_array_equal(
            a.predictions[s.sku][: cut + 1], b.predictions[s.sku][: cut + 1]
        )
        np.testing.assert_array_equal(a.origin_of[s.sku][: cut + 1], b.origin_of[s.sku][: cut + 1])
    late = [
        sku for sku in a.predictions if not np.array_equal(a.predictions[sku], b.predictions[sku])
    ]
    assert late, "the later forecasts should have moved with the later prices"


def test_a_forecast_says_what_it_waits_for() -> None:
    forecaster = _fit(_market(160, seed=5), 160)
    found = [
        fc
        for sku in forecaster.products
        for i in range(160)
        if (fc := forecaster.at(sku, forecaster.calendar.day(i))) is not None
    ]
    assert found
    for fc in found[:200]:
        assert isinstance(fc, Forecast)
        assert 0.0 <= fc.p_drop <= 1.0
        assert 0 < fc.expected_low <= fc.price + 0.01
        assert fc.deal_price > 0 and fc.expected_wait_price > 0
        assert 0 <= fc.comparable_drops <= fc.comparable_moments
    # before any label has matured there is no model, so the caller keeps the rules
    assert forecaster.at("p1", date(2024, 1, 3)) is None


def test_no_model_learns_from_the_rows_of_a_few_days() -> None:
    """At the first origin every matured row is from the market's first day or two: plenty
    of rows, but one outcome window, so what they teach is what the whole shop did that
    month. No model is fitted until the rows span a horizon's worth of days."""
    days = 80
    rng = np.random.default_rng(11)
    series = []
    for k in range(400):
        price = np.full(days, float(rng.uniform(5, 50)))
        start = int(rng.integers(0, 30))
        price[start : start + int(rng.integers(5, 15))] *= 0.75
        series.append(_series(f"p{k}", np.round(price, 2), category=f"c{k % 3}"))
    forecaster = _fit(series, days)
    origins = {int(o) for sku in forecaster.origin_of for o in forecaster.origin_of[sku] if o >= 0}
    assert 15 not in origins  # the first origin: rows of days 0 and 1 only, 800 of them
    assert origins and min(origins) == 35  # rows of days 0-21
    assert forecaster.withheld >= 1
