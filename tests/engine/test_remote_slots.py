"""A replica's request slots (engine/remote/slots.py) and how `--engine` states them."""

from __future__ import annotations

import asyncio

import pytest

from worthit.engine.remote.client import engine_address
from worthit.engine.remote.slots import Slots
from worthit.engine.sequence import Priority

from conftest import run_cli


def test_an_engine_url_states_its_concurrency_and_nothing_else() -> None:
    assert engine_address("http://127.0.0.1:8001/v1/") == ("http://127.0.0.1:8001/v1", None)
    assert engine_address("http://h:1/v1?concurrency=2") == ("http://h:1/v1", 2)
    for bad in ("http://h/v1?concurrency=0", "http://h/v1?concurrency=x", "http://h/v1?slots=1"):
        with pytest.raises(ValueError):
            engine_address(bad)


def test_worthit_serve_names_a_bad_engine_option() -> None:
    done = run_cli("serve", "--demo", "--engine", "http://127.0.0.1:9/v1?slots=1")
    assert done.returncode == 2
    assert "--engine" in done.stderr and "unknown engine option 'slots'" in done.stderr


def test_waiters_are_served_live_first_then_in_arrival_order() -> None:
    async def main() -> list[str]:
        slots = Slots(1)
        first = await slots.acquire(Priority.MEDIUM)
        order: list[str] = []

        async def wait(name: str, priority: Priority) -> None:
            slot = await slots.acquire(priority)
            order.append(name)
            slot.release()

        waiters = [asyncio.create_task(wait(n, p)) for n, p in
                   [("bg1", Priority.BACKGROUND), ("low", Priority.LOW),
                    ("bg2", Priority.BACKGROUND), ("high", Priority.HIGH)]]  # fmt: skip
        await asyncio.sleep(0)
        assert slots.waiting == 4 and slots.held == 1
        first.release()
        await asyncio.gather(*waiters)
        assert slots.held == 0
        return order

    assert asyncio.run(main()) == ["high", "low", "bg1", "bg2"]


def test_a_live_request_preempts_background_work_and_a_cancelled_wait_takes_nothing() -> None:
    async def main() -> None:
        slots = Slots(1)
        background = await slots.acquire(Priority.BACKGROUND)
        assert background.preemptible and not background.preempted.is_set()
        live = asyncio.create_task(slots.acquire(Priority.MEDIUM))
        await asyncio.sleep(0)
        assert background.preempted.is_set()  # told to give its slot up
        background.release()
        taken = await live
        late = asyncio.create_task(slots.acquire(Priority.LOW))
        await asyncio.sleep(0)
        late.cancel()  # a deadline passed while it waited
        with pytest.raises(asyncio.CancelledError):
            await late
        assert slots.waiting == 0
        taken.release()
        assert slots.held == 0 and slots.try_acquire() is not None

    asyncio.run(main())


def test_without_a_limit_nothing_waits_and_nothing_is_preempted() -> None:
    async def main() -> None:
        slots = Slots()
        held = [await slots.acquire(Priority.BACKGROUND) for _ in range(50)]
        await slots.acquire(Priority.HIGH)
        assert not any(slot.preempted.is_set() or slot.preemptible for slot in held)

    asyncio.run(main())
