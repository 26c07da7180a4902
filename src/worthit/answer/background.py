"""The background generator: explanations written in the engine's idle time, stored for
the shoppers about to ask for them.

It walks (product, language) pairs in order of expected demand (last week's sales × the
share of questions in each language), after the inputs shoppers just missed, and has the
model write each missing explanation with best-of-k at the engine's lowest class, so a
live request always goes first. It keeps walking: a new pass every `rewalk_s` finds the
pairs whose inputs changed (a new price moves a reason's numbers, hence the key), and the
stored texts that no longer hold. `worthit serve` runs it behind live traffic; `worthit
explain --warm` runs it alone until the store covers the market or time is up.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field

from worthit.answer.answerer import Answerer, stale_reason
from worthit.answer.demand import SALES_WINDOW_DAYS, demand_order
from worthit.answer.generation import DEFAULT_TRIES, Generated, generate
from worthit.decide.decider import DecisionStatus
from worthit.engine.backend import EngineBackend
from worthit.engine.sequence import Priority
from worthit.explain.explainer import ExplanationRun
from worthit.explain.store import ExplanationStore, StoredExplanation
from worthit.text.time import now_ms

log = logging.getLogger(__name__)

QUESTIONS = {"en": "Is it worth buying?", "zh": "值得买吗？", "ja": "買うべきですか？"}
DEFAULT_PARALLEL = 8
"""Explanations in flight at once: enough for the engine to decode them as one batch."""
REWALK_S = 600.0
ENGINE_BACKOFF_S = 1.0

Pair = tuple[str, str]


@dataclass(frozen=True, slots=True)
class _Look:
    run: ExplanationRun
    write: bool
    covered: bool
    tried: int = 0
    """Tries an earlier round spent on these inputs: the next round starts after them."""


@dataclass
class GeneratorStats:
    """What the generator did, for /readyz, /metrics and `explain --warm`'s summary."""

    started: float = field(default_factory=time.monotonic)
    kept: int = 0
    failed: int = 0
    tries: collections.Counter[int] = field(default_factory=collections.Counter)
    completion_tokens: int = 0
    passes: int = 0
    covered_weight: float = 0.0
    total_weight: float = 0.0
    pairs: int = 0
    covered_pairs: int = 0

    @property
    def coverage(self) -> float:
        """Share of expected demand whose explanation is in the store."""
        return self.covered_weight / self.total_weight if self.total_weight else 0.0

    @property
    def per_second(self) -> float:
        elapsed = time.monotonic() - self.started
        return (self.kept + self.failed) / elapsed if elapsed > 0 else 0.0


class ExplanationGenerator:
    def __init__(
        self,
        answerer: Answerer,
        *,
        parallel: int = DEFAULT_PARALLEL,
        tries: int = DEFAULT_TRIES,
        method: str = "background",
        priority: Priority = Priority.BACKGROUND,
        rewalk_s: float = REWALK_S,
    ) -> None:
        if answerer.explanations is None:
            raise ValueError("the generator needs an explanation store")
        self.answerer = answerer
        self.engine: EngineBackend | None = answerer.engine
        self.explanations: ExplanationStore = answerer.explanations
        self.parallel = parallel
        self.tries = tries
        self.method = method
        self.priority = priority
        self.rewalk_s = rewalk_s
        self.stats = GeneratorStats()
        self._status: dict[Pair, tuple[float, bool]] = {}
        """Each pair's demand weight and whether its explanation was in the store when last
        looked at: the coverage figure."""
        self._in_flight: set[Pair] = set()
        self._explained: set[Pair] = set()
        """Pairs this generator has found or left explained: the ones whose rewrite an
        event asks for (`Answerer.restated`)."""

    async def run(
        self,
        *,
        budget_s: float | None = None,
        until_covered: bool = False,
        write: bool = True,
        progress: Callable[[GeneratorStats], None] | None = None,
    ) -> GeneratorStats:
        """Generate until cancelled, or for `budget_s`, or (`until_covered`) until one pass
        over the market finds nothing left to write. `write=False` makes one pass that
        only measures how much of the demand the store covers (no engine needed)."""
        if not write:
            async for _ in self._plan(None):
                pass
            self.stats.passes += 1
            self._publish(progress)
            return self.stats
        if self.engine is None:
            raise ValueError("writing explanations needs an engine")
        deadline = None if budget_s is None else time.monotonic() + budget_s
        jobs: asyncio.Queue[Pair] = asyncio.Queue(maxsize=self.parallel)
        workers = [asyncio.create_task(self._work(jobs, progress)) for _ in range(self.parallel)]
        try:
            while deadline is None or time.monotonic() < deadline:
                passed_at = time.monotonic()
                async for pair in self._plan(deadline):
                    await self._put_wanted(jobs)
                    await jobs.put(pair)
                self.stats.passes += 1
                self._publish(progress)
                if until_covered:
                    break
                await self._serve_wanted(jobs, passed_at + self.rewalk_s, deadline)
            if until_covered:
                await _join(jobs, deadline)
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
        self._publish(progress)
        return self.stats

    async def _plan(self, deadline: float | None) -> AsyncIterator[Pair]:
        """One pass over the market in demand order: every pair is looked at (the coverage
        figure is whole once it ends), the ones to write are yielded as they are found.

        The walk goes no faster than the workers take its pairs (the queue holds
        `parallel`), so writing starts with the first pair found missing: looking at all
        6,000 pairs of the demo market first costs 10 s of CPU with the engine idle, more
        behind traffic, and would read a pair's inputs a whole pass before writing it."""
        for sku, language, weight in self._order():
            if deadline is not None and time.monotonic() >= deadline:
                return
            needed = self._needs((sku, language), weight)
            await asyncio.sleep(0)  # a pass reads every product: let requests in between
            if needed:
                yield (sku, language)

    async def _put_wanted(self, jobs: asyncio.Queue[Pair]) -> None:
        """What shoppers just missed goes before the rest of the pass, then the rewrites
        of explanations events made stale."""
        while (wanted := self._next_wanted()) is not None:
            if self._needs(wanted):
                await jobs.put(wanted)

    def _next_wanted(self) -> Pair | None:
        """A shopper's miss, else a changed product this generator had covered. A changed
        product it never covered waits for the walk: a live feed restates products in
        no order of demand, and writing them first would push best sellers back."""
        wanted = self.answerer.wanted.pop()
        while wanted is None:
            restated = self.answerer.restated.pop()
            if restated is None:
                return None
            if restated in self._explained:
                wanted = restated
        return wanted

    async def _serve_wanted(
        self, jobs: asyncio.Queue[Pair], until: float, deadline: float | None
    ) -> None:
        """Between passes, write what shoppers miss as they miss it."""
        end = until if deadline is None else min(until, deadline)
        while time.monotonic() < end:
            wanted = self._next_wanted()
            if wanted is None:
                await asyncio.sleep(0.2)
            elif self._needs(wanted):
                await jobs.put(wanted)

    def _order(self) -> Iterator[tuple[str, str, float]]:
        decider = self.answerer.decider
        skus = [hit.sku for hit in self.answerer.store.all_names()]
        ranked = decider.rankings.top(None, "sales", SALES_WINDOW_DAYS, len(skus))
        sales = {item.sku: item.value for item in ranked}
        pairs = list(demand_order(sales, skus, self.answerer.languages.shares()))
        self.stats.total_weight = sum(weight for _, _, weight in pairs)
        self.stats.pairs = len(pairs)
        return iter(pairs)

    def _needs(self, pair: Pair, weight: float | None = None) -> bool:
        """Whether the pair's current explanation is missing or no longer holds; records
        what was found for the coverage figure."""
        if pair in self._in_flight:
            return False
        look = self._look(pair)
        if weight is None:
            weight = self._status.get(pair, (0.0, False))[0]
        self._mark(pair, weight, look is not None and look.covered)
        return look is not None and look.write

    def _look(self, pair: Pair) -> _Look | None:
        """What the store holds for the pair's current inputs; None when there is nothing
        to explain (the product is gone)."""
        sku, language = pair
        decision = self.answerer.decider.decide(QUESTIONS[language], sku=sku, language=language)
        if decision.status is not DecisionStatus.ANSWERED:
            return None
        assert decision.sheet is not None and decision.verdict is not None
        run = ExplanationRun(decision.sheet, decision.verdict)
        stored = self.explanations.get(self.answerer.key(run))
        if stored is None:
            return _Look(run, write=True, covered=False)
        why = stale_reason(stored, run, now_ms())
        if why is None:
            return _Look(run, write=False, covered=True)
        # failed recently: its turn comes again after RETRY_FAILED_AFTER_MS
        write = why[0] != "model_failed_checks"
        tried = stored.tries if write and stored.text is None else 0
        return _Look(run, write=write, covered=False, tried=tried)

    def _mark(self, pair: Pair, weight: float, covered: bool) -> None:
        if covered:
            self._explained.add(pair)
        before = self._status.get(pair)
        if before is not None and before[1]:
            self.stats.covered_weight -= before[0]
            self.stats.covered_pairs -= 1
        if covered:
            self.stats.covered_weight += weight
            self.stats.covered_pairs += 1
        self._status[pair] = (weight, covered)

    async def _work(
        self, jobs: asyncio.Queue[Pair], progress: Callable[[GeneratorStats], None] | None
    ) -> None:
        while True:
            pair = await jobs.get()
            self._in_flight.add(pair)
            try:
                await self._write(pair)
            except Exception:  # one product's failure must not stop the generator
                log.exception("could not write the explanation of %s", pair)
            finally:
                self._in_flight.discard(pair)
                jobs.task_done()
            self._publish(progress)

    async def _write(self, pair: Pair) -> None:
        look = self._look(pair)
        if look is None or not look.write:
            return
        run = look.run
        assert self.engine is not None
        generated = await generate(
            self.engine,
            run.sheet,
            run.verdict,
            priority=self.priority,
            tries=self.tries,
            tried=look.tried,
        )
        if generated.engine_failed:
            await asyncio.sleep(ENGINE_BACKOFF_S)
            return
        self.explanations.put(self._entry(run, pair, generated))
        self._count(generated)
        weight = self._status.get(pair, (0.0, False))[0]
        self._mark(pair, weight, generated.explanation is not None)

    def _entry(self, run: ExplanationRun, pair: Pair, generated: Generated) -> StoredExplanation:
        return StoredExplanation(
            key=self.answerer.key(run),
            text=None if generated.explanation is None else generated.explanation.text,
            model=self.answerer.model,
            sku=pair[0],
            language=pair[1],
            verdict=run.verdict.kind.value,
            generated_at_ms=now_ms(),
            method=self.method,
            tries=generated.tries,
            sampling=generated.sampling or "none passed: " + ", ".join(generated.outcomes),
        )

    def _count(self, generated: Generated) -> None:
        metrics = self.answerer.metrics
        outcome = "kept" if generated.explanation is not None else "failed"
        metrics.generated.labels(self.method, outcome).inc()
        metrics.generation_time.observe(generated.seconds)
        self.stats.completion_tokens += generated.completion_tokens
        if generated.explanation is not None:
            self.stats.kept += 1
            self.stats.tries[generated.tries] += 1
            metrics.tries.observe(generated.tries)
        else:
            self.stats.failed += 1

    def _publish(self, progress: Callable[[GeneratorStats], None] | None) -> None:
        self.answerer.metrics.stored.set(len(self.explanations))
        self.answerer.metrics.covered.set(self.stats.coverage)
        if progress is not None:
            progress(self.stats)


async def _join(jobs: asyncio.Queue[Pair], deadline: float | None) -> None:
    """Wait for the queued jobs to finish, or for the deadline."""
    if deadline is None:
        await jobs.join()
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(jobs.join(), max(0.0, deadline - time.monotonic()))
