"""Fact sheets rebuilt in the service's quiet moments, so a live feed does not drain them.

Each event evicts its product's sheet, and at the demo's 80 events a second nearly every
sheet went within minutes (`/readyz` once showed 7 of 2,000 left): the next question about
each product then paid its sheet's build, 1-6 ms instead of 0.1; and after a quiet spell
every sheet had expired, so a sale's first burst built them all. `FactsCache.refresh`
rebuilds the sheets events dropped and those about to expire, the read ones first. This
loop calls it once no question has come for `QUIET_S`, one sheet at a time, and spends at
most `share` of the time on it, so a flash sale's event rate cannot take the loop from the
questions. It builds on the event loop, as a question's own miss does: a question arriving
mid-build waits for one build at most. (Slices of several builds, 5 ms each, cost more on
the verdict's p99 than the misses they saved: bench/live_cache.py.)
"""

from __future__ import annotations

import asyncio
import time

from worthit.answer.answerer import Answerer

DEFAULT_REFRESH_SHARE = 0.25
"""The demo's feed drops ~80 sheets a second, ~1 ms each: a tenth of a core rebuilds them."""
QUIET_S = 0.02
POLL_S = 0.05


async def refresh_facts(
    answerer: Answerer,
    share: float = DEFAULT_REFRESH_SHARE,
    *,
    quiet_s: float = QUIET_S,
    poll_s: float = POLL_S,
) -> None:
    """Rebuild queued fact sheets while no question is being asked; runs until cancelled."""
    if not 0 < share <= 1:
        raise ValueError(f"share must be in (0, 1], not {share}")
    facts = answerer.facts
    while True:
        quiet_for = time.perf_counter() - answerer.asked_at
        if quiet_for < quiet_s:
            await asyncio.sleep(quiet_s - quiet_for)
            continue
        started = time.perf_counter()
        if not facts.refresh(budget_s=0):
            await asyncio.sleep(poll_s)
            continue
        await asyncio.sleep((time.perf_counter() - started) * (1 - share) / share)
