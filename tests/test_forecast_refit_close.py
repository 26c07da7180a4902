"""Stopping the service's forecaster does not wait for a fit in flight."""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from worthit.decide.forecast_refit import StoreForecasts


def test_close_kills_a_fit_in_flight_instead_of_waiting_for_it(tmp_path: Path) -> None:
    """Ctrl-C on `worthit serve` during the first fit waited for the fit to end (a minute
    on a demo market): the pool's exit joins its process. Closing now ends that process."""
    executor = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
    forecasts = StoreForecasts(str(tmp_path / "market.db"), executor)
    busy = executor.submit(time.sleep, 600)  # stands in for a long fit
    while not busy.running():
        time.sleep(0.05)
    (process,) = list(executor._processes.values())  # the process to watch
    forecasts.close()
    give_up = time.monotonic() + 30  # the sleep would hold it 600 s
    while process.is_alive() and time.monotonic() < give_up:
        time.sleep(0.05)
    assert not process.is_alive()
