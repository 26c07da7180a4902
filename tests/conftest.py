"""Shared fixtures: a small simulated market, built once per test session."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path

import pytest

from worthit.demo.simulator import simulate
from worthit.market.store import MarketStore
from worthit.text.time import Clock, date_to_ms, fixed_clock, iso

SMALL_SKUS = 60
SMALL_DAYS = 150
MARKET_END = date(2026, 9, 20)
"""The small market's last day: pinned, so no expectation depends on the day the suite runs."""
MARKET_NOW_MS = date_to_ms(MARKET_END + timedelta(days=1)) - 60_000
""""Now" for everything that reads the small market: a minute before its end day is over."""
MARKET_AS_OF = iso(MARKET_NOW_MS)
"""The same moment as the CLI's --as-of takes it."""


def market_clock() -> Clock:
    return fixed_clock(MARKET_NOW_MS)


@pytest.fixture(scope="session")
def small_market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 products × 150 days ending on MARKET_END, heroes S1–S6 included (read-only)."""
    path = tmp_path_factory.mktemp("market") / "small.db"
    store = MarketStore(path)
    simulate(store, skus=SMALL_SKUS, days=SMALL_DAYS, seed=7, end=MARKET_END)
    store.close()  # the last connection's close checkpoints the WAL, so copies hold all data
    return path


def run_cli(
    *args: str,
    stdin: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the real `worthit` command in a child process, as a user would."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "worthit", *args],
        input=stdin,
        cwd=cwd,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=600,
        check=False,
    )


REDIS_URL_ENV = "WORTHIT_TEST_REDIS"
DEFAULT_TEST_REDIS = "redis://127.0.0.1:6379/0"


def require_service(available: bool, reason: str) -> None:
    """Skip a test whose outside service is absent, but fail it in CI (CI=true), where
    .ci/run starts every service the tests need: there a skip would hide a broken set-up."""
    if available:
        return
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason}, and CI=true: .ci/run should have started it")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The real Redis the tests may use ($WORTHIT_TEST_REDIS, else 127.0.0.1:6379/0);
    each test keeps to keys of its own and deletes them after."""
    import redis

    url = os.environ.get(REDIS_URL_ENV, DEFAULT_TEST_REDIS)
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)
    try:
        answers = bool(client.ping())
    except (redis.RedisError, OSError):
        answers = False
    finally:
        client.close()
    require_service(answers, f"no Redis answers at {url}")
    return url


POSTGRES_URL_ENV = "WORTHIT_TEST_POSTGRES"
DEFAULT_TEST_POSTGRES = "postgresql://postgres@127.0.0.1/test"


@pytest.fixture(scope="session")
def postgres_url() -> str:
    """The real PostgreSQL the tests may use ($WORTHIT_TEST_POSTGRES, else the `test`
    database on 127.0.0.1); each test works in a schema of its own (`postgres_schema`)."""
    import psycopg

    url = os.environ.get(POSTGRES_URL_ENV, DEFAULT_TEST_POSTGRES)
    try:
        psycopg.connect(url, connect_timeout=2).close()
        answers = True
    except psycopg.Error:
        answers = False
    require_service(answers, f"no PostgreSQL answers at {url}")
    return url


@contextmanager
def postgres_schema(url: str) -> Iterator[str]:
    """A new, empty schema; yields a URL whose connections see only it (search_path), so
    tests never see each other's rows. Dropped after, with everything in it."""
    import psycopg

    schema = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            sep = "&" if "?" in url else "?"
            yield f"{url}{sep}options=-csearch_path%3D{schema}"
        finally:
            admin.execute("SET lock_timeout = '10s'")
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
def pg_market(postgres_url: str) -> Iterator[str]:
    """A URL to an empty PostgreSQL schema of this test's own."""
    with postgres_schema(postgres_url) as url:
        yield url


@pytest.fixture(params=["sqlite", "postgresql"])
def market_db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store's tests run on both databases: a new SQLite file, or a new schema."""
    if request.param == "sqlite":
        return str(tmp_path / "m.db")
    return str(request.getfixturevalue("pg_market"))
