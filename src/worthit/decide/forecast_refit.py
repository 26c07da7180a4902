"""The store's forecaster in the running service: fitted from the store's own history at
start and again every so often, off the request path; the verdict reads the latest fit.

Fitting reads every product's history, builds its daily features and fits the models:
seconds of CPU, most of it Python. It runs in `executor`, which the composition root makes
a process of its own, so that it never holds the interpreter lock the event loop answers
with; the snapshot comes back pickled and replaces the last one in a single assignment,
which a verdict reads without a lock. Until the first fit is done, or while the history
is too short for a model, there is no forecast and the rules answer alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import Executor

from worthit.decide.backtest import DEFAULT_HORIZON
from worthit.decide.forecast import StoreForecaster
from worthit.decide.forecast_advice import DEFAULT_REFIT_S, ForecastSnapshot
from worthit.facts.builder import FactsBuilder
from worthit.market.store import MarketStore
from worthit.text.time import Clock, from_ms, now_ms

log = logging.getLogger(__name__)


def fit_store(path: str, at_ms: int, horizon: int = DEFAULT_HORIZON) -> ForecastSnapshot | None:
    """Fit the store at `path` on its history up to `at_ms`, and forecast every product at
    its price of that day; None for a store without prices. A top-level function, so that a
    process pool can run it."""
    started = time.process_time()
    store = MarketStore(path)
    try:
        span = store.price_span()
        if span is None:
            return None
        builder = FactsBuilder(store)
        histories = [h for h in (builder.history(x.sku) for x in store.all_names()) if h]
        first, today = from_ms(span[0]).date(), from_ms(at_ms).date()
        if today < first:
            return None
        forecaster = StoreForecaster.latest(histories, first, today, horizon)
        by_sku = {
            sku: found
            for sku in forecaster.products
            if (found := forecaster.at(sku, today)) is not None
        }
    finally:
        store.close()
    fitted_in_s = round(time.process_time() - started, 2)
    return ForecastSnapshot(today, by_sku, fitted_in_s, forecaster.deal_rule_at(today))


class StoreForecasts:
    """The latest `ForecastSnapshot` of one store, and the loop that refreshes it."""

    def __init__(
        self,
        path: str,
        executor: Executor,
        *,
        clock: Clock = now_ms,
        every_s: float = DEFAULT_REFIT_S,
        horizon: int = DEFAULT_HORIZON,
    ) -> None:
        self.path = path
        self.executor = executor
        self.clock = clock
        self.every_s = every_s
        self.horizon = horizon
        self._snapshot: ForecastSnapshot | None = None
        self.fits = 0

    def latest(self) -> ForecastSnapshot | None:
        """The last fit's forecasts (None before the first): one attribute read."""
        return self._snapshot

    async def refit(self) -> ForecastSnapshot | None:
        loop = asyncio.get_running_loop()
        snapshot = await loop.run_in_executor(
            self.executor, fit_store, self.path, self.clock(), self.horizon
        )
        self._snapshot = snapshot
        self.fits += 1
        if snapshot is not None:
            log.info(
                "forecasts for %d products fitted in %.1f s of CPU",
                len(snapshot.by_sku),
                snapshot.fitted_in_s,
            )
        return snapshot

    def close(self) -> None:
        """Stop fitting now. A fit in flight is killed, not waited for: nobody will read its
        result, and a process pool's exit otherwise joins it, which held Ctrl-C on `serve`
        for a minute when it came during the first fit."""
        processes = dict(getattr(self.executor, "_processes", None) or {})
        self.executor.shutdown(wait=False, cancel_futures=True)
        for process in processes.values():
            process.terminate()

    async def run(self) -> None:
        """Fit now, then every `every_s`; a failed fit keeps the last snapshot."""
        while True:
            try:
                await self.refit()
            except Exception:
                log.exception("fitting the store's forecaster failed; the last fit stands")
            await asyncio.sleep(self.every_s)
