"""`--db postgresql://…`: the commands build and read a market in PostgreSQL as in a file."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worthit.cli.app import app
from worthit.service.tenants import TenantStore

from conftest import run_cli


@pytest.fixture
def new_database(postgres_url: str) -> Iterator[str]:
    """A URL naming a database that does not exist yet; dropped after."""
    import psycopg

    name = f"worthit_test_{uuid.uuid4().hex[:10]}"
    base = postgres_url.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_simulate_builds_a_market_in_a_new_database_and_the_commands_read_it(
    new_database: str, tmp_path: Path
) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    sim = run_cli("simulate", "--skus", "8", "--days", "20", "--end", "2026-09-20",
                  "--db", new_database, cwd=tmp_path, env=env)  # fmt: skip
    assert sim.returncode == 0, sim.stderr
    facts = run_cli("facts", "S1", "--json", "--db", new_database, env=env)
    assert facts.returncode == 0, facts.stderr
    assert json.loads(facts.stdout)["sku"] == "S1"
    key = run_cli("keys", "create", "--tenant", "acme", "--priority", "high",
                  "--db", new_database, env=env)  # fmt: skip
    assert key.returncode == 0, key.stderr
    tenants = TenantStore(new_database)
    assert tenants.authenticate(key.stdout.strip()).name == "acme"
    tenants.close()
    assert not (tmp_path / "postgresql:").exists()


def test_an_unreachable_postgres_is_a_clear_error() -> None:
    result = CliRunner().invoke(app, ["facts", "S1", "--db", "postgresql://postgres@127.0.0.1:1/x"])
    assert result.exit_code == 2, result.output
    assert "cannot use the --db database" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
