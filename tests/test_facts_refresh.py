"""The idle-time refresher: the sheets events dropped are built again between questions,
never while questions keep coming."""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from worthit.answer.answerer import Answerer
from worthit.answer.facts_refresh import refresh_facts
from worthit.market.store import MarketStore
from worthit.service.build import build_answerer

from conftest import market_clock


@pytest.fixture
def answerer(small_market: Path, tmp_path: Path) -> Answerer:
    shutil.copy(small_market, tmp_path / "m.db")
    answerer = build_answerer(MarketStore(tmp_path / "m.db"), None, clock=market_clock())
    answerer.warm(budget_s=60)
    return answerer


async def run_until(
    done: Callable[[], bool], answerer: Answerer, within_s: float, **options: float
) -> None:
    """Run the refresher until `done()` holds, or for `within_s` at most."""
    task = asyncio.create_task(refresh_facts(answerer, poll_s=0.01, **options))
    give_up = time.monotonic() + within_s
    while not done() and time.monotonic() < give_up:
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_dropped_sheets_are_built_again_in_a_quiet_moment(answerer: Answerer) -> None:
    facts = answerer.facts
    held = len(facts)
    assert facts.evict(["S1", "S2", "S3"]) == 3
    asyncio.run(run_until(lambda: facts.refresh_pending == 0, answerer, 30, quiet_s=0.0))
    assert facts.refreshed == 3 and facts.refresh_pending == 0 and len(facts) == held


def test_nothing_is_built_while_questions_keep_coming(answerer: Answerer) -> None:
    facts = answerer.facts
    facts.evict(["S1"])
    answerer.asked_at = time.perf_counter()
    asyncio.run(run_until(lambda: facts.refreshed > 0, answerer, 0.3, quiet_s=60.0))
    assert facts.refreshed == 0 and facts.refresh_pending == 1


@pytest.mark.parametrize("share", [0.0, -0.5, 1.5])
def test_a_share_outside_zero_to_one_is_refused(answerer: Answerer, share: float) -> None:
    with pytest.raises(ValueError, match="share"):
        asyncio.run(refresh_facts(answerer, share))
