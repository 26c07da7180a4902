"""The whole service app on a real uvicorn, over a copy of the small demo market.

The fast tests run it on the engine with a fake model runner (the HTTP layer, the
decision core and the store are all real); tests marked slow run the bundled model.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from worthit.engine.config import EngineConfig
from worthit.engine.engine import Engine
from worthit.http.app import create_app
from worthit.service.settings import ServiceSettings
from worthit.service.transport import DEFAULT_LIMITS, TransportLimits

from conftest import market_clock
from engine_fakes import FakeRunner
from live_server import LiveServer


def fake_engine() -> Engine:
    config = EngineConfig(context_size=4096, block_size=16)
    return Engine(FakeRunner(n_ctx=config.context_size, step_delay_s=(0.001, 0.0)), config)


def market_settings(path: Path, **overrides: Any) -> ServiceSettings:
    """The service over a copy of the small market, its clock pinned to the market's end;
    the background generator is off unless a test turns it on (it keeps the engine busy)."""
    return ServiceSettings(
        db_path=path, **({"clock": market_clock(), "background": False} | overrides)
    )


@pytest.fixture
def market_copy(small_market: Path, tmp_path: Path) -> Path:
    path = tmp_path / "market.db"
    shutil.copy(small_market, path)
    return path


@pytest.fixture
def open_service(market_copy: Path) -> Iterator[LiveServer]:
    """Auth off, as `worthit serve --demo` runs."""
    engine = fake_engine()
    app = create_app(market_settings(market_copy, auth=False), engine=engine)
    with LiveServer(app) as server:
        yield server
    engine.close()


@pytest.fixture
def keyed_service(market_copy: Path) -> Iterator[LiveServer]:
    """Auth on: every API call needs a tenant's key."""
    engine = fake_engine()
    app = create_app(market_settings(market_copy, auth=True), engine=engine)
    with LiveServer(app) as server:
        yield server
    engine.close()


@contextmanager
def serving(
    market: Path, limits: TransportLimits = DEFAULT_LIMITS, **settings: Any
) -> Iterator[LiveServer]:
    """The service over `market` on the fake engine, with these settings, for one test."""
    engine = fake_engine()
    app = create_app(market_settings(market, **settings), engine=engine)
    try:
        with LiveServer(app, limits) as server:
            yield server
    finally:
        engine.close()


def start_workers(
    small_market: Path, tmp_path: Path, port: int, *extra: str
) -> subprocess.Popen[bytes]:
    """`worthit serve --demo --workers 2` on a copy of the small market and the bundled
    model (one thread, a small context), its output in tmp_path/serve.log."""
    market = tmp_path / "market.db"
    shutil.copy(small_market, market)
    with (tmp_path / "serve.log").open("wb") as log:  # the child writes to its own copy
        return subprocess.Popen(
            [sys.executable, "-m", "worthit", "serve", "--demo", "--db", str(market),
             "--port", str(port), "--workers", "2", "--live-rate", "0", "--no-background",
             "--threads", "1", "--context", "1024", "--max-sequences", "4", *extra],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "NO_COLOR": "1"},
        )  # fmt: skip
