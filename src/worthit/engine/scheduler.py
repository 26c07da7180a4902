"""Which tokens go into the next llama_decode call, and what happens after it.

Policy (vLLM v1 / Sarathi-Serve, plus deadlines):

1. Waiting requests whose deadline passed, or can no longer be met, are finished as
   "expired" before any of their tokens is computed.
2. Decode first: every running sequence with one pending token gets its token, in
   (class, slack) order, so running streams never stall behind a long prompt.
3. The rest of the step's token budget goes to prefill chunks. The budget is what the
   fitted step-time model says fits in the TPOT target (at least ``min_prefill_chunk``),
   shared between classes with pending prefill by weights 5/2/1, and inside a class by
   least slack to the deadline.
4. Waiting requests join the running set while it is smaller than the adaptive batch
   window and the predicted step time still keeps every running deadline (the step
   budget: the TPOT target, lowered to the tightest ``time left / tokens owed``); each
   joins with its longest cached prefix already in its KV. A request that cannot join
   in time expires without being computed: overload defers or sheds, it does not make
   every answer late.
5. When KV blocks run out, cached prefixes are evicted first (LRU); then the running
   sequence of the lowest class (most slack) is preempted, its KV kept as a cached
   prefix so that its recompute later is mostly a cache hit.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from worthit.engine.block_manager import BlockManager
from worthit.engine.config import EngineConfig
from worthit.engine.latency import BatchWindow, StepTimeModel
from worthit.engine.sequence import FinishReason, Priority, Sequence, Status


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
    chunks: list[Chunk] = field(default_factory=list)
    n_decode: int = 0

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
    ) -> None:
        self.config = config
        self.blocks = blocks
        self.model = model
        self.is_eog = is_eog
        self.window = BatchWindow(
            model, config.tpot_target_s, config.min_sequences, config.max_sequences
        )
        self.waiting: list[Sequence] = []
        self.running: list[Sequence] = []
        self.preemptions = 0
        self._ended: list[Update] = []
        self.deadline_budget_s = math.inf
        self.tpot_budget_s = config.tpot_target_s
        """This step's time budget: the TPOT target, lowered by the running deadlines
        (_deadline_budget); the batch window and the prefill share obey it."""
        self.queued_prefill: list[int] = [0, 0, 0]
        """Prefill tokens pending per class, published for admission estimates."""

    # -- requests in and out -----------------------------------------------------

    def add(self, seq: Sequence) -> None:
        seq.status = Status.WAITING
        self.waiting.append(seq)

    def abort(self, request_id: str) -> bool:
        for seq in (*self.running, *self.waiting):
            if seq.request_id == request_id:
                self._finish(seq, FinishReason.ABORT)
                self._ended.append(Update(seq))
                return True
        return False

    def has_work(self) -> bool:
        return bool(self.waiting or self.running or self._ended)

    def take_ended(self) -> list[Update]:
        """Sequences finished outside a step (expired, aborted, refused on KV)."""
        ended, self._ended = self._ended, []
        return ended

    # -- estimates ---------------------------------------------------------------

    def prefill_per_step(self, n_decode: int | None = None) -> int:
        """Prefill tokens a step may carry. With nobody decoding there is no stream to
        protect and prompts go in large chunks, but no step may outlast max_step_s: a
        request arriving meanwhile waits for the step to end."""
        if n_decode is None:  # only decoding sequences have a stream to protect
            n_decode = sum(1 for s in self.running if s.pending == 1)
        n_running = n_decode
        if n_running == 0:
            fit_idle = self.model.tokens_within(self.config.max_step_s)
            return min(self.config.max_batch_tokens, max(self.config.min_prefill_chunk, fit_idle))
        fit = self.model.tokens_within(self.tpot_budget_s) - n_running
        return max(
            self.config.min_prefill_chunk, min(fit, self.config.max_batch_tokens - n_running)
        )

    def estimate_first_token_s(
        self, uncached_tokens: int, priority: Priority, already_queued: int = 0
    ) -> float:
        """Seconds until a request's first token, from the queue ahead of it (same or
        higher class, less its own already_queued tokens) and the fitted step cost."""
        ahead = max(0, sum(self.queued_prefill[: priority.value + 1]) - already_queued)
        work = ahead + max(uncached_tokens, 1)
        per_step = self.prefill_per_step()
        steps = math.ceil(work / per_step)
        step_tokens = min(self.config.max_batch_tokens, len(self.running) + min(work, per_step))
        return steps * self.model.predict(step_tokens)

    def can_meet(
        self, seq: Sequence, uncached_tokens: int, now: float, queued: bool = False
    ) -> tuple[bool, float]:
        """Whether seq can stream its first sentence before its deadline; the estimate
        in seconds. queued: seq is already counted in the published queue."""
        own = seq.pending if queued else 0
        first = self.estimate_first_token_s(uncached_tokens, seq.priority, own)
        total = first + seq.required_tokens * self.model.tpot_s(len(self.running))
        return (seq.deadline is None or now + total <= seq.deadline), total

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

    def _can_join(self, seq: Sequence, now: float) -> bool:
        """Whether seq may start decoding beside the running set without making any of
        them (or itself) miss its deadline at the predicted step time. The first one
        always may: alone it runs as fast as the engine can."""
        if not self.running:
            return True
        budget = min(self.deadline_budget_s, self._own_budget(seq, now))
        return self.model.tpot_s(len(self.running)) <= budget

    def _own_budget(self, seq: Sequence, now: float) -> float:
        """The step time seq can afford once its uncached prompt tail is prefilled."""
        owed = seq.tokens_owed()
        if seq.deadline is None or owed <= 0:
            return math.inf
        uncached = max(1, seq.pending - seq.cached_hint)
        prefill = self.estimate_first_token_s(uncached, seq.priority, seq.pending)
        return self.config.deadline_margin * (seq.deadline - now - prefill) / owed

    # -- one step ----------------------------------------------------------------

    def schedule(self, now: float) -> StepPlan:
        self._expire(now)
        plan = StepPlan()
        scheduled: set[int] = set()
        self.deadline_budget_s = self._deadline_budget(now)
        self.tpot_budget_s = min(self.config.tpot_target_s, self.deadline_budget_s)
        self.window.update(self.tpot_budget_s)

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

        self._admit(now)
        budget = min(
            self.prefill_per_step(plan.n_decode), self.config.max_batch_tokens - plan.n_decode
        )
        for seq, grant in self._share(budget, now, scheduled):
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
            if seq.timings.scheduled is None:
                seq.timings.scheduled = now
        self._publish()
        return plan

    def postprocess(
        self, plan: StepPlan, sampled: dict[int, int], step_s: float, now: float
    ) -> list[Update]:
        n_prefill = plan.num_tokens - plan.n_decode
        self.model.observe(plan.num_tokens, step_s, decode_only=n_prefill == 0)
        updates: list[Update] = []
        for i, chunk in enumerate(plan.chunks):
            seq = chunk.seq
            if seq.status is not Status.RUNNING or seq.seq_id != chunk.seq_id:
                continue
            seq.num_computed = chunk.start + len(chunk.tokens)
            if i >= plan.n_decode:
                seq.timings.prefill_s += step_s * len(chunk.tokens) / plan.num_tokens
            self.blocks.commit(chunk.seq_id, seq.tokens(0, seq.num_computed), seq.num_computed)
            if chunk.sample:
                updates.append(self._accept(seq, sampled[chunk.seq_id], now))
        self._publish()
        return updates

    # -- internals -------------------------------------------------------------------

    def _accept(self, seq: Sequence, token: int, now: float) -> Update:
        update = Update(seq)
        if seq.timings.first_token is None:
            seq.timings.first_token = now
        seq.timings.last_token = now
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
            or seq.num_tokens >= seq.max_total_tokens
        ):
            reason = FinishReason.LENGTH
        elif seq.deadline is not None:
            reason = self._deadline_stop(seq, now)
        if reason is not None:
            update.text += seq.detokenizer.flush()
            self._finish(seq, reason)
        return update

    def _fit(self, seq_id: int) -> int:
        """Positions seq_id could cover with its blocks plus every free block."""
        return (len(self.blocks.tables[seq_id]) + self.blocks.free_blocks) * self.blocks.block_size

    def _deadline_stop(self, seq: Sequence, now: float) -> FinishReason | None:
        assert seq.deadline is not None
        remaining = seq.deadline - now
        tpot = self._next_steps_s()
        left = seq.params.max_tokens - len(seq.output_tokens)
        if seq.detokenizer.at_sentence_end():
            sentence = len(seq.output_tokens) - seq.sentence_mark
            seq.sentence_mark = len(seq.output_tokens)
            self.model.observe_sentence(sentence)
            if remaining < min(self.model.sentence_tokens, left) * tpot:
                return FinishReason.DEADLINE
        elif remaining < tpot:
            return FinishReason.DEADLINE
        return None

    def _next_steps_s(self) -> float:
        """Expected duration of the coming steps: every running sequence decoding, plus
        the prefill chunk the steps carry while a running prompt is pending (at least
        min_prefill_chunk). (Not an EWMA of past steps: after a run of large
        prefix-warming chunks that would read ~250 ms a token.)"""
        prefill = sum(s.pending for s in self.running if s.pending > 1)
        chunk = min(prefill, self.prefill_per_step()) if prefill else 0
        return self.model.predict(len(self.running) + chunk)

    def _expire(self, now: float) -> None:
        for seq in list(self.waiting):
            if seq.deadline is None:
                continue
            if seq.num_computed == 0 and not seq.output_tokens:
                ok, _ = self.can_meet(
                    seq, len(seq.prompt_tokens) - seq.cached_hint, now, queued=True
                )
                if not ok:
                    self._finish(seq, FinishReason.EXPIRED)
                    self._ended.append(Update(seq))
            elif now >= seq.deadline:
                self._finish(seq, FinishReason.DEADLINE)
                self._ended.append(Update(seq, text=seq.detokenizer.flush()))
        for seq in list(self.running):
            if seq.deadline is not None and now >= seq.deadline and seq.pending > 1:
                self._finish(seq, FinishReason.DEADLINE)
                self._ended.append(Update(seq, text=seq.detokenizer.flush()))

    def _admit(self, now: float) -> None:
        room = self.window.size - len(self.running)
        if room <= 0 or not self.waiting:
            return
        self.waiting.sort(key=lambda s: s.sort_key(now))
        for seq in list(self.waiting):
            if room <= 0:
                return
            if not self._can_join(seq, now):
                continue  # a later one, with more slack or a shorter answer, may fit
            got = self.blocks.admit(seq.tokens(0, seq.num_tokens))
            if got is None:
                return
            self.waiting.remove(seq)
            seq.seq_id, seq.num_computed = got
            if seq.preemptions == 0 and seq.timings.scheduled is None:
                seq.cached_tokens = seq.num_computed
            seq.status = Status.RUNNING
            self.running.append(seq)
            room -= 1
            # the next joiner is checked against this one's deadline too
            self.deadline_budget_s = min(self.deadline_budget_s, self._own_budget(seq, now))

    def _share(self, budget: int, now: float, scheduled: set[int]) -> list[tuple[Sequence, int]]:
        """Split the prefill budget: weights 5/2/1 between classes with demand, unused
        share handed on in class order, then least slack first inside a class. (A request
        just admitted with all but its last prompt token cached has one pending token
        and is served here, in the same step.)"""
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
            remaining = grant[p]
            for seq in by_class[p]:
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
        not yet planned goes, which may be seq itself (then False).
        """
        assert seq.seq_id is not None
        while not self.blocks.reserve(seq.seq_id, n_tokens):
            planned = {id(c.seq) for c in plan.chunks}
            if strict:
                victims = [s for s in self.running if s.priority > seq.priority]
            else:
                victims = [s for s in self.running if id(s) not in planned and s is not seq]
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

    def _preempt(self, seq: Sequence) -> None:
        assert seq.seq_id is not None
        self.blocks.release(seq.seq_id, keep_tokens=seq.num_computed)
        self.running.remove(seq)
        seq.seq_id = None
        seq.num_computed = 0
        seq.status = Status.WAITING
        seq.preemptions += 1
        self.preemptions += 1
        self.waiting.append(seq)

    def _finish(self, seq: Sequence, reason: FinishReason) -> None:
        if seq.status is Status.RUNNING:
            assert seq.seq_id is not None
            self.blocks.release(seq.seq_id, keep_tokens=seq.num_computed)
            self.running.remove(seq)
        elif seq.status is Status.WAITING:
            self.waiting.remove(seq)
        seq.seq_id = None
        seq.status = Status.FINISHED
        seq.finish_reason = reason

    def _publish(self) -> None:
        queued = [0, 0, 0]
        for seq in (*self.waiting, *self.running):
            if seq.pending > 1 or seq.status is Status.WAITING:
                queued[seq.priority.value] += seq.pending
        self.queued_prefill = queued
