"""Verdicts before explanations: in a burst every verdict goes out before any answer's
explanation, and no explanation is held past the bound."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.answer.answerer import Answerer
from worthit.answer.events import Finished, VerdictReady
from worthit.answer.verdict_first import VerdictFirst
from worthit.market.store import MarketStore

from conftest import market_clock

QUESTIONS = (
    "Is the Aurora NC700 worth buying?",
    "Kestrel Q5 or Nordvik Aria ANC?",
    "值不值得买 Aurora NC700",
    "top 3 headphones by sales in the last 3 days",
)


def test_nothing_deciding_means_no_wait() -> None:
    gate = VerdictFirst(quiet_s=0.0)

    async def run() -> None:
        ticket = gate.started()
        gate.decided()
        await gate.turn(ticket)

    asyncio.run(run())
    assert gate.held == 0


def test_an_explanation_waits_for_the_verdict_being_decided() -> None:
    gate = VerdictFirst(quiet_s=0.0, max_wait_s=10.0)
    order: list[str] = []

    async def first(ticket: int) -> None:
        await gate.turn(ticket)
        order.append("first explains")

    async def run() -> None:
        ticket = gate.started()
        gate.decided()
        gate.started()
        waiting = asyncio.create_task(first(ticket))
        for _ in range(5):
            await asyncio.sleep(0)
        order.append("second decided")
        gate.decided()
        await waiting

    asyncio.run(run())
    assert order == ["second decided", "first explains"]
    assert gate.held == 1


def test_a_verdict_that_never_comes_holds_nobody_past_the_bound() -> None:
    gate = VerdictFirst(quiet_s=0.0, max_wait_s=0.01)

    async def run() -> None:
        ticket = gate.started()
        gate.decided()
        gate.started()  # never decided
        await asyncio.wait_for(gate.turn(ticket), timeout=5)

    asyncio.run(run())
    assert gate.deciding == 1 and gate.held == 1


def test_an_answer_alone_is_not_held_even_right_after_another() -> None:
    gate = VerdictFirst(quiet_s=10.0, max_wait_s=10.0)

    async def run() -> None:
        for _ in range(3):
            ticket = gate.started()
            gate.decided()
            await asyncio.wait_for(gate.turn(ticket), timeout=5)

    asyncio.run(run())
    assert gate.held == 0


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=6), min_size=1, max_size=12))
def test_every_holder_is_released(yields_before_decided: list[int]) -> None:
    """Answers that started together and decide for any number of loop turns: each
    explanation goes on after the last verdict, and nobody is left waiting. (One that
    starts later is caught by the quiet time, which the burst test below exercises.)"""
    gate = VerdictFirst(quiet_s=0.0, max_wait_s=10.0)
    decided_at: list[int] = []
    released_at: list[int] = []
    clock = [0]

    async def answer(ticket: int, turns: int) -> None:
        for _ in range(turns):
            await asyncio.sleep(0)
        clock[0] += 1
        decided_at.append(clock[0])
        gate.decided()
        await gate.turn(ticket)
        clock[0] += 1
        released_at.append(clock[0])

    async def run() -> None:
        tickets = [gate.started() for _ in yields_before_decided]
        await asyncio.wait_for(
            asyncio.gather(
                *(answer(k, t) for k, t in zip(tickets, yields_before_decided, strict=True))
            ),
            timeout=5,
        )

    asyncio.run(run())
    assert len(released_at) == len(yields_before_decided)
    assert min(released_at) > max(decided_at)
    assert gate.deciding == 0


def test_a_burst_gets_every_verdict_before_any_explanation(small_market: Path) -> None:
    """Through the answer flow, as the server drives it: many questions at once, each
    rendered as its events come."""
    answerer = Answerer(MarketStore(small_market), None, clock=market_clock())
    seen: list[str] = []

    async def one(question: str) -> None:
        async for event in answerer.ask(question):
            if isinstance(event, VerdictReady):
                seen.append("verdict")
            elif isinstance(event, Finished):
                seen.append("finished")

    async def run() -> None:
        await asyncio.gather(*(one(QUESTIONS[i % len(QUESTIONS)]) for i in range(24)))

    asyncio.run(run())
    assert seen == ["verdict"] * 24 + ["finished"] * 24
    assert answerer.verdict_first.deciding == 0
