"""Which tokens go into the next llama_decode call, and what happens after it.

Policy (vLLM v1 / Sarathi-Serve, plus deadlines):

1. Waiting requests whose deadline passed, or can no longer be met, are finished as
   "expired" before any of their tokens is computed.
2. Decode first: every running sequence with one pending token gets its token, in
   (class, slack) order, so running streams never stall behind a long prompt.
3. The rest of the step's token budget goes to prefill chunks. The budget is what the
   fitted step-time model says fits in the TPOT target (at least ``min_prefill_chunk``),
   shared between classes with pending prefill by weights 5/2/1, inside a class evenly
   between tenants, and inside a tenant by least slack to the deadline.
4. Waiting requests join the running set while it is smaller than the adaptive batch
   window and the predicted step time still keeps every running deadline (the step
   budget: the TPOT target, lowered to the tightest ``time left / tokens owed``); each
   joins with its longest cached prefix already in its KV. A request that cannot join
   in time expires without being computed: overload defers or sheds, it does not make
   every answer late. Classes join in order; inside a class, tenants by their virtual
   token counters (fairness.py), and a tenant at ``max_sequences_per_tenant`` running
   requests waits while another tenant of the class waits.
5. When KV blocks run out, cached prefixes are evicted first (LRU); then the running
   sequence of the lowest class (most slack) is preempted, its KV kept as a cached
   prefix so that its recompute later is mostly a cache hit.
6. Background requests (``Priority.BACKGROUND``) get tokens only in steps with no
   interactive request waiting or running; then they decode, join and prefill in arrival order,
   within what the background step-time model says fits in ``max_background_step_s``
   (and ``min_background_step_tokens`` at least). Otherwise they are paused with their KV,
   and the first preempted when interactive work needs KV blocks or sequence ids.

Each plan carries its ``StepBudget``, which the scheduler also publishes (and again once
the step's results are in) for admission, which estimates from it in the callers' threads.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from worthit.engine.config import EngineConfig
from worthit.engine.fairness import FairShare
from worthit.engine.kv.block_manager import BlockManager
from worthit.engine.sequence import FinishReason, Priority, Sequence, Status
from worthit.engine.timing.budget import Estimator, PublishedBudget, StepBudget
from worthit.engine.timing.latency import BatchWindow, StepTimeModel
from worthit.text.sentences import ends_sentence


@dataclass
class Chunk:
    seq: Sequence
    seq_id: int
    start: int
    tokens: list[int]
    sample: bool
    """True when the chunk reaches the sequence's last token: its logits give the next."""


@dataclass
class StepPlan:
    budget: StepBudget
    """The budget the step was planned with, and the queue it leaves."""
    chunks: list[Chunk] = field(default_factory=list)
    n_decode: int = 0
    background: bool = False
    """Background work only: run with background_threads, timed into its own model."""

    @property
    def num_tokens(self) -> int:
        return sum(len(c.tokens) for c in self.chunks)


@dataclass
class Update:
    """What one sequence produced in a step (or why it ended outside a step)."""

    seq: Sequence
    text: str = ""
    token_ids: list[int] = field(default_factory=list)


class Scheduler:
    def __init__(
        self,
        config: EngineConfig,
        blocks: BlockManager,
        model: StepTimeModel,
        is_eog: Callable[[int], bool],
        published: PublishedBudget | None = None,
        background_model: StepTimeModel | None = None,
    ) -> None:
        self.config = config
        self.blocks = blocks
        self.model = model
        self.background_model = background_model or model
        """Times background steps: they run on background_threads, maybe fewer."""
        self.is_eog = is_eog
        self.estimator = Estimator(config, model)
        self.published = published or PublishedBudget(StepBudget(config.tpot_target_s))
        """Where the last budget goes, for the threads that must not read the lists."""
        self.window = BatchWindow(
            model, config.tpot_target_s, config.min_sequences, config.max_sequences
        )
        self.max_total_tokens = config.sequence_cells
        """A sequence's context limit: generation ends with "length" at it."""
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        """Interactive requests; background ones are in the two lists below."""
        self.background_waiting: list[Sequence] = []
        self.background_running: list[Sequence] = []
        """Background requests holding KV: generating, or paused while interactive work runs."""
        self.preemptions = 0
        self.fairness = FairShare(config.tenant_prompt_weight, config.tenant_output_weight)
        """Per class and tenant, the service received: who joins next (fairness.py)."""
        self._ended: list[Update] = []

    # -- requests in and out -----------------------------------------------------

    def add(self, seq: Sequence) -> None:
        seq.status = Status.WAITING
        self._queues(seq)[1].append(seq)
        if not seq.is_background:
            self.fairness.arrived(seq)

    def abort(self, request_id: str) -> bool:
        for seq in self.sequences():
            if seq.request_id == request_id:
                self._finish(seq, FinishReason.ABORT)
                self._ended.append(Update(seq))
                return True
        return False

    def has_work(self) -> bool:
        background = self.background_running or self.background_waiting
        return bool(self.has_interactive_work() or self._ended or background)

    def has_interactive_work(self) -> bool:
        """Whether an interactive request waits or runs: then background work gets no tokens."""
        return bool(self.waiting or self.running)

    def sequences(self) -> tuple[Sequence, ...]:
        """Every unfinished sequence, interactive and background."""
        interactive = (*self.running, *self.waiting)
        return (*interactive, *self.background_running, *self.background_waiting)

    def take_ended(self) -> list[Update]:
        """Sequences finished outside a step (expired, aborted, refused on KV)."""
        ended, self._ended = self._ended, []
        return ended

    # -- one step ----------------------------------------------------------------

    def schedule(self, now: float) -> StepPlan:
        previous = self.published.read()
        self._expire(now, previous)
        if not self.has_interactive_work():
            return self._schedule_background(now, previous)
        deadline_s = self._deadline_budget(now)
        budget = replace(
            previous, tpot_s=min(self.config.tpot_target_s, deadline_s), deadline_s=deadline_s
        )
        self.window.update(budget.tpot_s)
        plan = StepPlan(budget)
        scheduled: set[int] = set()

        for seq in sorted(
            (s for s in self.running if s.pending == 1), key=lambda s: s.sort_key(now)
        ):
            if seq.status is not Status.RUNNING:
                continue  # preempted to make room for a more urgent one
            if not self._reserve(seq, seq.num_tokens, now, plan, strict=False):
                continue
            assert seq.seq_id is not None
            last = seq.num_tokens - 1
            plan.chunks.append(Chunk(seq, seq.seq_id, last, [seq.token_at(last)], True))
            scheduled.add(id(seq))
        plan.n_decode = len(plan.chunks)

        budget = self._admit(now, budget)
        prefill = min(
            self.estimator.prefill_per_step(budget.tpot_s, plan.n_decode),
            self.config.max_batch_tokens - plan.n_decode,
        )
        for seq, grant in self._share(prefill, now, scheduled):
            if seq.status is not Status.RUNNING or id(seq) in scheduled:
                continue
            assert seq.seq_id is not None
            start = seq.num_computed
            end = start + grant
            if not self._reserve(seq, end, now, plan, strict=True):
                end = min(end, self._fit(seq.seq_id))
                if end <= start or not self.blocks.reserve(seq.seq_id, end):
                    continue
            plan.chunks.append(
                Chunk(seq, seq.seq_id, start, seq.tokens(start, end), end == seq.num_tokens)
            )
            scheduled.add(id(seq))
        plan.budget = self._publish(budget, now)
        return plan

    def postprocess(
        self, plan: StepPlan, sampled: dict[int, int], step_s: float, now: float
    ) -> list[Update]:
        """Take in what the step computed and sampled. Returns the updates of the
        sequences that ended outside the step (take_ended), then one per sample."""
        updates = self.take_ended()
        if plan.chunks:
            n_prefill = plan.num_tokens - plan.n_decode
            model = self.background_model if plan.background else self.model
            rows = sum(1 for chunk in plan.chunks if chunk.sample)
            model.observe(plan.num_tokens, step_s, rows, decode_only=n_prefill == 0)
        for chunk in plan.chunks:
            seq = chunk.seq
            if seq.status is not Status.RUNNING or seq.seq_id != chunk.seq_id:
                continue
            seq.num_computed = chunk.start + len(chunk.tokens)
            self.blocks.commit(chunk.seq_id, seq.tokens(0, seq.num_computed), seq.num_computed)
            if chunk.sample:
                updates.append(self._accept(seq, sampled[chunk.seq_id], plan.budget, now))
        self._publish(plan.budget, now)
        return updates

    def _schedule_background(self, now: float, previous: StepBudget) -> StepPlan:
        """A step of background work alone, as long as the background step-time model
        says fits in max_background_step_s but at least min_background_step_tokens (an
        interactive request arriving meanwhile waits for it): decode first, then join and
        prefill in arrival order with what is left. At most as many hold KV as one such
        step can decode together."""
        config = self.config
        budget = replace(previous, tpot_s=config.tpot_target_s, deadline_s=math.inf)
        plan = StepPlan(budget, background=True)
        fit = self.background_model.tokens_within(config.max_background_step_s)
        room = min(config.max_batch_tokens, max(config.min_background_step_tokens, fit))
        for seq in [s for s in self.background_running if s.pending == 1]:
            if plan.num_tokens >= room:
                break
            if seq.status is Status.RUNNING and self._reserve(
                seq, seq.num_tokens, now, plan, strict=False
            ):
                assert seq.seq_id is not None
                last = seq.num_tokens - 1
                plan.chunks.append(Chunk(seq, seq.seq_id, last, [seq.token_at(last)], True))
        plan.n_decode = len(plan.chunks)
        self.background_waiting.sort(key=lambda s: s.arrival)
        while self.background_waiting and len(self.background_running) < min(
            room, config.max_sequences
        ):
            if not self._join(self.background_waiting[0]):
                break
        planned = {id(c.seq) for c in plan.chunks}
        for seq in list(self.background_running):
            left = room - plan.num_tokens
            if left <= 0:
                break
            if seq.status is not Status.RUNNING or id(seq) in planned or not seq.pending:
                continue
            start = seq.num_computed
            end = start + min(seq.pending, left)
            if self._reserve(seq, end, now, plan, strict=False):
                assert seq.seq_id is not None
                tokens = seq.tokens(start, end)
                plan.chunks.append(Chunk(seq, seq.seq_id, start, tokens, end == seq.num_tokens))
        plan.budget = self._publish(budget, now)
        return plan

    # -- budgets -------------------------------------------------------------------

    def _deadline_budget(self, now: float) -> float:
        """The step time every running deadline can still afford: the tightest ``time
        left / tokens owed`` of a running request (with the config's margin), so a
        request promised N tokens by its deadline is not slowed past it by the ones
        that join after it. Infinite when no running request is owed anything."""
        budget = math.inf
        for seq in self.running:
            owed = seq.tokens_owed()
            if seq.deadline is not None and owed > 0:
                budget = min(budget, self.config.deadline_margin * (seq.deadline - now) / owed)
        return budget

    def _can_join(self, seq: Sequence, now: float, budget: StepBudget) -> bool:
        """Whether seq may start decoding beside the running set without making any of
        them (or itself) miss its deadline at the predicted step time. The first one
        always may: alone it runs as fast as the engine can."""
        if not self.running:
            return True
        affordable = min(budget.deadline_s, self._own_budget(seq, now, budget))
        return self.model.tpot_s(len(self.running)) <= affordable

    def _own_budget(self, seq: Sequence, now: float, budget: StepBudget) -> float:
        """The step time seq can afford once its uncached prompt tail is prefilled."""
        owed = seq.tokens_owed()
        if seq.deadline is None or owed <= 0:
            return math.inf
        uncached = max(1, seq.pending - seq.cached_hint)
        prefill = self.estimator.first_token_s(
            self._recount(budget), uncached, seq.priority, seq.pending
        )
        return self.config.deadline_margin * (seq.deadline - now - prefill) / owed

    def _recount(self, budget: StepBudget) -> StepBudget:
        """budget with the running and waiting sets as they are now."""
        return replace(
            budget,
            running=len(self.running),
            decoding=sum(1 for s in self.running if s.pending == 1),
            waiting=len(self.waiting),
            background_running=len(self.background_running),
            background_waiting=len(self.background_waiting),
        )

    def _leaving_after(self, now: float) -> tuple[int, ...]:
        """The most steps each decoding running sequence can still take: to its
        max_tokens, and with a deadline no more than fit before it at the present step
        time. Ascending; sequences still prefilling are left out (they stay)."""
        step_s = max(self.model.predict(len(self.running)), 1e-6)
        steps = []
        for seq in self.running:
            if seq.pending > 1:
                continue
            left = seq.params.max_tokens - len(seq.output_tokens)
            if seq.deadline is not None:
                left = min(left, math.ceil(max(0.0, seq.deadline - now) / step_s))
            steps.append(max(0, left))
        return tuple(sorted(steps))

    def _publish(self, budget: StepBudget, now: float) -> StepBudget:
        """budget with the queue as it stands now, published for admission."""
        queued = [0, 0, 0]
        for seq in (*self.waiting, *self.running):
            if seq.pending > 1 or seq.status is Status.WAITING:
                queued[seq.priority.value] += seq.pending
        published = replace(
            self._recount(budget),
            queued_prefill=(queued[0], queued[1], queued[2]),
            leaving_after=self._leaving_after(now),
        )
        self.published.publish(published)
        return published

    # -- internals -------------------------------------------------------------------

    def _accept(self, seq: Sequence, token: int, budget: StepBudget, now: float) -> Update:
        update = Update(seq)
        if not seq.is_background:
            self.fairness.charge_output(seq)
        if self.is_eog(token):
            self._finish(seq, FinishReason.STOP)
            update.text = seq.detokenizer.flush()
            return update
        seq.output_tokens.append(token)
        update.token_ids.append(token)
        update.text = seq.detokenizer.add(token)
        reason: FinishReason | None = None
        if seq.detokenizer.stopped:
            reason = FinishReason.STOP
        elif (
            len(seq.output_tokens) >= seq.params.max_tokens
            or seq.num_tokens >= self.max_total_tokens
        ):
            reason = FinishReason.LENGTH
        elif seq.deadline is not None:
            reason = self._deadline_stop(seq, budget, now)
        if reason is not None:
            update.text += seq.detokenizer.flush()
            self._finish(seq, reason)
        return update

    def _fit(self, seq_id: int) -> int:
        """Positions seq_id could cover with its blocks plus every free block."""
        return (len(self.blocks.tables[seq_id]) + self.blocks.free_blocks) * self.blocks.block_size

    def _deadline_stop(self, seq: Sequence, budget: StepBudget, now: float) -> FinishReason | None:
        """Stop at a sentence end when the next sentence would not fit, or anywhere
        when not even one more step fits (Completion.text is then cut)."""
        assert seq.deadline is not None
        remaining = seq.deadline - now
        left = seq.params.max_tokens - len(seq.output_tokens)
        if ends_sentence(seq.detokenizer.text):
            sentence = len(seq.output_tokens) - seq.sentence_mark
            seq.sentence_mark = len(seq.output_tokens)
            self.model.observe_sentence(sentence)
            steps = math.ceil(min(self.model.sentence_tokens, left))
            if remaining < self._next_steps_s(budget, steps):
                return FinishReason.DEADLINE
        elif remaining < self._next_steps_s(budget, 1):
            return FinishReason.DEADLINE
        return None

    def _next_steps_s(self, budget: StepBudget, steps: int) -> float:
        """Expected duration of the next `steps` steps: every running sequence decoding,
        the first of them also carrying the prompt tokens still pending, a chunk a step
        (at least min_prefill_chunk) until they are in. Only those steps are dearer: a
        sentence priced as if every step carried a chunk was cut with time to spare.
        (Not an EWMA of past steps: after a run of large prefix-warming chunks that
        would read ~250 ms a token.)"""
        decode = self.model.predict(len(self.running))
        prefill = sum(s.pending for s in self.running if s.pending > 1)
        if not prefill:
            return steps * decode
        decoding = sum(1 for s in self.running if s.pending == 1)
        chunk = self.estimator.prefill_per_step(budget.tpot_s, decoding)
        full, rest = divmod(prefill, chunk)
        with_chunk = [chunk] * min(full, steps) + ([rest] if rest and full < steps else [])
        chunked = sum(
            self.model.predict(decoding + tokens, sampled=decoding + 1) for tokens in with_chunk
        )
        return chunked + (steps - len(with_chunk)) * decode

    def _expire(self, now: float, budget: StepBudget) -> None:
        """Finish the waiting requests that can no longer make their deadline, by the
        estimate admission refuses with, from the same published budget."""
        for seq in list(self.waiting):
            if seq.deadline is None:
                continue
            if seq.num_computed == 0 and not seq.output_tokens:
                uncached = len(seq.prompt_tokens) - seq.cached_hint
                needed = self.estimator.needed_s(
                    budget, seq.required_tokens, uncached, seq.priority, seq.pending
                )
                if now + needed > seq.deadline:
                    self._finish(seq, FinishReason.EXPIRED)
                    self._ended.append(Update(seq))
            elif now >= seq.deadline:
                self._finish(seq, FinishReason.DEADLINE)
                self._ended.append(Update(seq, text=seq.detokenizer.flush()))
        for seq in list(self.running):
            if seq.deadline is not None and now >= seq.deadline and seq.pending > 1:
                self._finish(seq, FinishReason.DEADLINE)
                self._ended.append(Update(seq, text=seq.detokenizer.flush()))

    def _admit(self, now: float, budget: StepBudget) -> StepBudget:
        """Let waiting requests join the running set, a class at a time, each class's
        tenants in turn by their service counters (``_next_tenant``), each tenant's own
        requests by least slack, then arrival. Returns budget with its deadline share
        lowered by each joiner's own, which the next joiner is checked against."""
        room = self.window.size - len(self.running)
        if room <= 0 or not self.waiting:
            return budget
        self.waiting.sort(key=lambda s: s.sort_key(now))
        by_class: dict[Priority, dict[str, deque[Sequence]]] = {}
        for seq in self.waiting:
            by_class.setdefault(seq.priority, {}).setdefault(seq.tenant, deque()).append(seq)
        holding = Counter(s.tenant for s in self.running)
        cap = self.config.tenant_sequences
        for priority in sorted(by_class):
            queues = by_class[priority]
            while room > 0 and queues:
                tenant = self._next_tenant(priority, queues, holding, cap, now)
                seq = queues[tenant].popleft()
                if not queues[tenant]:
                    del queues[tenant]
                if not self._can_join(seq, now, budget):
                    continue  # a later one, with more slack or a shorter answer, may fit
                while self.background_running and (
                    len(self.running) + len(self.background_running) >= self.config.max_sequences
                ):
                    self._preempt(max(self.background_running, key=lambda s: s.sort_key(now)))
                level = self.fairness.counter(priority, tenant)
                if not self._join(seq):
                    return budget
                for passed in [t for t in queues if t != tenant and holding[t] >= cap]:
                    self.fairness.lift(priority, passed, level)
                room -= 1
                holding[tenant] += 1
                own = self._own_budget(seq, now, budget)
                budget = replace(budget, deadline_s=min(budget.deadline_s, own))
        return budget

    def _next_tenant(
        self,
        priority: Priority,
        queues: dict[str, deque[Sequence]],
        holding: Counter[str],
        cap: int,
        now: float,
    ) -> str:
        """The tenant with the lowest service counter, among those holding fewer than
        max_sequences_per_tenant running requests when another tenant waits too (all of
        them when each is at the cap: a free slot is never left empty while someone can
        use it). Ties go to the request with the least slack, then the oldest, which
        keeps one tenant's order what it was before tenants."""
        candidates = list(queues)
        if len(candidates) > 1:
            candidates = [t for t in candidates if holding[t] < cap] or candidates

        def key(tenant: str) -> tuple[float, float, float]:
            head = queues[tenant][0]
            return (self.fairness.counter(priority, tenant), head.slack(now), head.arrival)

        return min(candidates, key=key)

    def _share(self, budget: int, now: float, scheduled: set[int]) -> list[tuple[Sequence, int]]:
        """Split the prefill budget: weights 5/2/1 between classes with demand, unused
        share handed on in class order, then evenly between a class's tenants
        (``_share_class``). (A request just admitted with all but its last prompt token
        cached has one pending token and is served here, in the same step.)"""
        by_class: dict[Priority, list[Sequence]] = {}
        pending = (s for s in self.running if s.pending > 0 and id(s) not in scheduled)
        for seq in sorted(pending, key=lambda s: s.sort_key(now)):
            by_class.setdefault(seq.priority, []).append(seq)
        if not by_class or budget <= 0:
            return []
        demand = {p: sum(s.pending for s in seqs) for p, seqs in by_class.items()}
        weights = sum(p.prefill_weight for p in by_class)
        grant = {p: min(demand[p], budget * p.prefill_weight // weights) for p in by_class}
        left = budget - sum(grant.values())
        for p in sorted(by_class):
            extra = min(left, demand[p] - grant[p])
            grant[p] += extra
            left -= extra
        out: list[tuple[Sequence, int]] = []
        for p in sorted(by_class):
            out += self._share_class(p, grant[p], by_class[p])
        return out

    def _share_class(
        self, priority: Priority, grant: int, seqs: list[Sequence]
    ) -> list[tuple[Sequence, int]]:
        """A class's prefill grant split evenly between its tenants with prompt pending
        (what one needs less of goes to the others), least served tenant first, each
        tenant's share to its requests by least slack. Even, not by counters: prompts
        are charged when they join, so a tenant whose many prompts joined before another
        tenant's one would otherwise hold the whole budget until they were all in."""
        by_tenant: dict[str, list[Sequence]] = {}
        for seq in seqs:
            by_tenant.setdefault(seq.tenant, []).append(seq)
        demand = {t: sum(s.pending for s in queue) for t, queue in by_tenant.items()}
        share: dict[str, int] = {}
        left = grant
        for i, tenant in enumerate(sorted(demand, key=demand.__getitem__)):
            share[tenant] = min(demand[tenant], left // (len(demand) - i))
            left -= share[tenant]
        out: list[tuple[Sequence, int]] = []
        for tenant in sorted(by_tenant, key=lambda t: self.fairness.counter(priority, t)):
            remaining = share[tenant]
            for seq in by_tenant[tenant]:
                if remaining <= 0:
                    break
                n = min(seq.pending, remaining)
                out.append((seq, n))
                remaining -= n
        return out

    def _reserve(
        self, seq: Sequence, n_tokens: int, now: float, plan: StepPlan, strict: bool
    ) -> bool:
        """KV blocks for seq up to n_tokens, preempting if needed.

        strict (prefill): only strictly lower classes are preempted, even if already
        in this step's plan (their chunk is withdrawn), so a high-priority prompt never
        waits behind low-priority KV. Not strict (decode): the lowest running sequence
        not yet planned goes, which may be seq itself (then False). Background sequences
        are the lowest class, so interactive work preempts them first, and before it evicts a
        cached prefix that interactive work left: while they hold KV, an interactive request evicts
        only the cached prefixes background work left.
        """
        assert seq.seq_id is not None
        while not self.blocks.reserve(
            seq.seq_id, n_tokens, evict_interactive=seq.is_background or not self.background_running
        ):
            planned = {id(c.seq) for c in plan.chunks}
            holders = (*self.running, *self.background_running)
            if strict:
                victims = [s for s in holders if s.priority > seq.priority]
            else:
                victims = [s for s in holders if id(s) not in planned and s is not seq]
                victims.append(seq)
            if not victims:
                return False
            victim = max(victims, key=lambda s: s.sort_key(now))
            if id(victim) in planned:
                index = next(i for i, c in enumerate(plan.chunks) if c.seq is victim)
                del plan.chunks[index]
                if index < plan.n_decode:
                    plan.n_decode -= 1
            self._preempt(victim)
            if victim is seq:
                return False
        return True

    def _join(self, seq: Sequence) -> bool:
        """Move seq from waiting to running with a sequence id and its cached prefix in
        its KV; False when every sequence id is busy."""
        got = self.blocks.admit(seq.tokens(0, seq.num_tokens))
        if got is None:
            return False
        running, waiting = self._queues(seq)
        waiting.remove(seq)
        seq.seq_id, seq.num_computed = got
        if seq.preemptions == 0:
            seq.cached_tokens = seq.num_computed
            if not seq.is_background:  # a recompute after preemption is not charged again
                self.fairness.charge_prompt(seq, len(seq.prompt_tokens) - seq.num_computed)
        seq.status = Status.RUNNING
        running.append(seq)
        return True

    def _queues(self, seq: Sequence) -> tuple[list[Sequence], list[Sequence]]:
        """The (running, waiting) lists of seq's kind: interactive or background."""
        if seq.is_background:
            return self.background_running, self.background_waiting
        return self.running, self.waiting

    def _release(self, seq: Sequence) -> None:
        """Give up seq's sequence id, its computed prefix kept as a cached prefix (a
        background one's first in line for eviction)."""
        assert seq.seq_id is not None
        self.blocks.release(seq.seq_id, keep_tokens=seq.num_computed, recent=not seq.is_background)
        self._queues(seq)[0].remove(seq)

    def _preempt(self, seq: Sequence) -> None:
        self._release(seq)
        seq.seq_id = None
        seq.num_computed = 0
        seq.status = Status.WAITING
        seq.preemptions += 1
        self.preemptions += 1
        self._queues(seq)[1].append(seq)

    def _finish(self, seq: Sequence, reason: FinishReason) -> None:
        if not seq.is_finished and not seq.is_background:
            self.fairness.left(seq)
        if seq.status is Status.RUNNING:
            self._release(seq)
        elif seq.status is Status.WAITING:
            self._queues(seq)[1].remove(seq)
        seq.seq_id = None
        seq.status = Status.FINISHED
        seq.finish_reason = reason
