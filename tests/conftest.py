"""Shared fixtures: a small simulated market, built once per test session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from worthit.market.simulator import simulate
from worthit.market.store import MarketStore

SMALL_SKUS = 60
SMALL_DAYS = 150


@pytest.fixture(scope="session")
def small_market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 products × 150 days ending today, heroes S1–S6 included (read-only for tests)."""
    path = tmp_path_factory.mktemp("market") / "small.db"
    store = MarketStore(path)
    simulate(store, skus=SMALL_SKUS, days=SMALL_DAYS, seed=7)
    store.close()  # the last connection's close checkpoints the WAL, so copies hold all data
    return path


def run_cli(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run the real `worthit` command in a child process, as a user would."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "worthit", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=600,
        check=False,
    )
