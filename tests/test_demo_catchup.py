"""A demo market is a simulation: served or asked days after it was built, the days it
missed are simulated first, so its prices are not stale; an imported market is never
touched, so its stale prices show. Dates are counted from the day the test runs (the
CLI's clock is the wall clock), and nothing is asserted about which day that is."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from worthit.cli.market import DEMO_DAYS, DEMO_SEED
from worthit.decide.rules import decide_verdict
from worthit.demo.catchup import DemoBuild, catch_up, recall, recognise, remember
from worthit.demo.simulator import extend, generate, simulate
from worthit.facts.builder import FactsBuilder
from worthit.market.store import MarketStore
from worthit.text.time import date_to_ms, now_ms

from conftest import run_cli

SKUS, DAYS, LATE = 8, 60, 10
DECIDED = {"BUY", "WAIT", "SKIP"}
CAUGHT_UP = re.compile(r"demo market brought up to (\d{4}-\d{2}-\d{2}): (\d+) days? simulated")
TABLES = ("prices", "stock", "sales", "reviews", "promotions")


def ask(db: Path, sku: str, *extra: str) -> tuple[dict[str, Any], str]:
    result = run_cli("ask", "--db", str(db), "--no-llm", "--json", "--sku", sku, *extra, "?")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout), result.stderr


def codes(answer: dict[str, Any]) -> set[str]:
    return {reason["code"] for reason in answer["reasons"]}


def rows(db: Path) -> dict[str, list[tuple[object, ...]]]:
    with sqlite3.connect(db) as conn:
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1, 2, 3").fetchall() for t in TABLES}


def test_a_demo_built_days_ago_is_simulated_up_to_today_and_answers(tmp_path: Path) -> None:
    built = datetime.now(UTC).date() - timedelta(days=LATE)
    db = tmp_path / "demo.db"
    sim = run_cli("simulate", "--db", str(db), "--skus", str(SKUS), "--days", str(DAYS),
                  "--end", built.isoformat())  # fmt: skip
    assert sim.returncode == 0, sim.stderr

    then, said = ask(db, "S1", "--as-of", built.isoformat())
    assert then["verdict"] == "BUY" and "brought up" not in said  # as of a moment: no writes

    now, said = ask(db, "S1")
    found = CAUGHT_UP.search(" ".join(said.split()))
    assert found is not None, said
    through, days = date.fromisoformat(found[1]), int(found[2])
    assert (through - built).days == days and days in (LATE, LATE + 1)  # midnight may pass
    assert now["verdict"] in DECIDED and "stale_price" not in codes(now)
    assert not now["facts"]["price_stale"]

    again = run_cli("ask", "--db", str(db), "--no-llm", "--sku", "S3", "?")
    assert again.returncode == 0 and "brought up" not in again.stderr  # once is enough
    with MarketStore(db) as store:
        assert_fresh(store, now_ms())


def assert_fresh(store: MarketStore, at_ms: int) -> None:
    """No product's price is stale at `at_ms`, and the heroes with a story get a verdict."""
    builder = FactsBuilder(store)
    for hit in store.all_names():
        sheet = builder.build(hit.sku, at_ms=at_ms)
        assert sheet is not None and not sheet.price_stale, hit.sku
        verdict = decide_verdict(sheet)
        assert "stale_price" not in {reason.code for reason in verdict.reasons}, hit.sku
        if hit.sku in ("S1", "S3", "S5", "S6"):
            assert verdict.kind.name in DECIDED, (hit.sku, verdict.kind)


def test_an_imported_market_is_never_brought_forward(tmp_path: Path) -> None:
    built = datetime.now(UTC).date() - timedelta(days=LATE)
    lines = tmp_path / "market.jsonl"
    lines.write_text(
        "".join(r.model_dump_json() + "\n" for r in generate(SKUS, DAYS, seed=7, end=built))
    )
    db = tmp_path / "imported.db"
    imported = run_cli("import", str(lines), "--db", str(db))
    assert imported.returncode == 0, imported.stderr
    before = rows(db)

    answer, said = ask(db, "S1")
    assert answer["verdict"] == "INSUFFICIENT_DATA" and "stale_price" in codes(answer)
    assert "brought up" not in said
    assert rows(db) == before


def test_a_demo_built_before_builds_were_marked_is_recognised(tmp_path: Path) -> None:
    """`serve --demo` and `ask` built 180 days with seed 7 and no mark: such a market is
    recognised by its hero's prices; the imported one above (60 days) is not."""
    built = datetime.now(UTC).date() - timedelta(days=LATE)
    db = tmp_path / "old-demo.db"
    with MarketStore(db) as store:
        simulate(store, skus=SKUS, days=DEMO_DAYS, seed=DEMO_SEED, end=built)
        assert recognise(store, DEMO_DAYS + 1, DEMO_SEED) is None
        assert recognise(store, DEMO_DAYS, DEMO_SEED + 1) is None
    answer, said = ask(db, "S1")
    assert CAUGHT_UP.search(" ".join(said.split())) is not None, said
    assert answer["verdict"] in DECIDED and "stale_price" not in codes(answer)
    marked = recall(db)
    assert marked is not None and (marked.skus, marked.end) == (SKUS, built)


@pytest.fixture
def built(tmp_path: Path) -> DemoBuild:
    return DemoBuild(skus=SKUS, days=DAYS, seed=7, end=date(2026, 3, 1), through=date(2026, 3, 1))


def _demo(path: Path, build: DemoBuild) -> MarketStore:
    store = MarketStore(path)
    simulate(store, skus=build.skus, days=build.days, seed=build.seed, end=build.end)
    remember(path, build)
    return store


def test_catching_up_in_steps_gives_the_same_days(tmp_path: Path, built: DemoBuild) -> None:
    end = built.end
    stepped = _demo(tmp_path / "stepped.db", built)
    first = catch_up(stepped, end + timedelta(days=3))
    second = catch_up(stepped, end + timedelta(days=10))
    assert first is not None and first.days == 3 and first.through == end + timedelta(days=3)
    assert second is not None and second.days == 7
    assert catch_up(stepped, end + timedelta(days=10)) is None
    recalled = recall(stepped.path)
    assert recalled is not None and recalled.through == end + timedelta(days=10)
    stepped.close()

    at_once = _demo(tmp_path / "once.db", built)
    assert catch_up(at_once, end + timedelta(days=10)) is not None
    at_once.close()
    assert rows(tmp_path / "stepped.db") == rows(tmp_path / "once.db")

    with sqlite3.connect(tmp_path / "once.db") as conn:
        new_days = conn.execute(
            "SELECT day, COUNT(*) FROM sales WHERE day > ? GROUP BY day", (end.isoformat(),)
        ).fetchall()
    assert [day for day, _ in new_days] == [
        (end + timedelta(days=n)).isoformat() for n in range(1, 11)
    ]
    assert {count for _, count in new_days} == {SKUS}
    with MarketStore(tmp_path / "once.db") as store:
        assert_fresh(store, date_to_ms(end + timedelta(days=10)) + 12 * 3_600_000)
        with pytest.raises(AssertionError):  # the same market, had it not been caught up
            assert_fresh(store, date_to_ms(end + timedelta(days=14)) + 12 * 3_600_000)


def test_extending_adds_only_the_new_days(tmp_path: Path, built: DemoBuild) -> None:
    store = _demo(tmp_path / "m.db", built)
    before = rows(tmp_path / "m.db")
    summary = extend(
        store, skus=SKUS, days=built.days, seed=7, end=built.end, through=built.end + timedelta(1)
    )
    store.close()
    after = rows(tmp_path / "m.db")
    assert summary.products == 0 and summary.promotions == 0
    assert summary.prices == summary.stock == summary.sales == SKUS
    assert len(after["prices"]) == len(before["prices"]) + SKUS
    assert (
        set(before["prices"]) <= set(after["prices"])
        and after["promotions"] == before["promotions"]
    )
