"""The demo heroes S1–S6 keep their documented verdicts whatever day the market ends on.

A market ending on every day of a year (so on every day before, during and after each
sale event of the calendar) is read at the moments a running service reads it: the end
day before and after each hero's own hour, when some of that day's rows are still in
the future, and the two days after it, when a server started on the end day is still
answering from the same data. The seed turns with the day, so neighbouring end days,
those around each sale's start and end included, run on different seeds.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from worthit.decide.rules import decide_verdict
from worthit.demo.simulator import HEROES_FROM_SKUS, simulate
from worthit.facts.builder import FactsBuilder
from worthit.market.store import MarketStore
from worthit.text.time import to_ms

END_DAYS = [date(2026, 1, 1) + timedelta(days=n) for n in range(365)]
DAYS = 60
"""The shortest history the stories are documented for: five weeks for the all-time low
to count, and a month of reviews before the last 30 days to judge a fall against."""
SEEDS = range(1, 7)
MOMENTS = (
    timedelta(minutes=5),
    timedelta(hours=12),
    timedelta(hours=23, minutes=59),
    timedelta(days=1, hours=12),
    timedelta(days=2, hours=23, minutes=59),
)
"""After the end day's midnight."""


@dataclass(frozen=True)
class Story:
    """A hero's verdict and the reasons (one of them) it must rest on."""

    verdict: str
    because: frozenset[str]


STORIES = {
    "S1": Story("BUY", frozenset({"at_all_time_low", "near_all_time_low"})),
    "S2": Story("WAIT", frozenset({"upcoming_sale"})),
    "S3": Story("SKIP", frozenset({"rating_falling"})),
    "S4": Story("INSUFFICIENT_DATA", frozenset({"few_observations"})),
    # compare ranks verdicts first, so these two also pick S6 over S5 and S1 over S5
    "S5": Story("WAIT", frozenset({"upcoming_sale"})),
    "S6": Story("BUY", frozenset({"at_all_time_low", "near_all_time_low"})),
}


def _off_story(end: date) -> Iterator[str]:
    """Every reading of the market ending on `end` that departs from its hero's story."""
    store = MarketStore(":memory:")
    try:
        seed = SEEDS[end.toordinal() % len(SEEDS)]
        simulate(store, skus=HEROES_FROM_SKUS, days=DAYS, seed=seed, end=end)
        builder = FactsBuilder(store)
        midnight = datetime(end.year, end.month, end.day, tzinfo=UTC)
        for moment in (midnight + offset for offset in MOMENTS):
            for sku, story in STORIES.items():
                sheet = builder.build(sku, at_ms=to_ms(moment))
                assert sheet is not None
                verdict = decide_verdict(sheet)
                codes = {r.code for r in verdict.reasons}
                kind = verdict.kind.value
                if kind != story.verdict or not story.because & codes or not sheet.stock:
                    yield (
                        f"end {end} (seed {seed}) at {moment:%m-%d %H:%M}: {sku} {kind}"
                        f" {sorted(codes)}, stock {sheet.stock}"
                    )
    finally:
        store.close()


def test_the_heroes_keep_their_stories_on_any_end_day() -> None:
    off = [line for end in END_DAYS for line in _off_story(end)]
    assert not off, f"{len(off)} readings off their story:\n" + "\n".join(off[:20])
