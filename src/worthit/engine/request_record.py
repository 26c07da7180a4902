"""The engine's record of each request, beside the scheduler's ``Sequence``.

The scheduler needs only what a request asked for and where it stands in the KV cache
(sequence.py). The engine needs more: the sampler chain its tokens are drawn with, the
stream and event loop to deliver to, and the timestamps behind the latency metrics and
the ``Completion``. Those live here, in a record the engine keys by request id, and are
filled in from each step's plan and updates.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

from worthit.engine.metrics import EngineMetrics
from worthit.engine.scheduler import StepPlan, Update
from worthit.engine.sequence import FinishReason, Sequence
from worthit.engine.streams import Completion, Delta, Outbox, RequestStream
from worthit.text.sentences import last_sentence_end


@dataclass(eq=False)
class RequestRecord:
    seq: Sequence
    sampler: object
    """Runner-owned sampling state (a llama.cpp sampler chain)."""
    stream: RequestStream | None = None
    """None for the engine's own prefix-warming requests."""
    loop: asyncio.AbstractEventLoop | None = None
    truncated_messages: int = 0
    scheduled_at: float | None = None
    """When a step first computed any of its tokens (monotonic seconds)."""
    first_token_at: float | None = None
    emitted_at: float | None = None
    """When its last token was handed to the caller, for inter-token latency."""
    prefill_s: float = 0.0
    """Step time spent on its prompt, pro rata of its tokens in each step."""

    def completion(self, now: float) -> Completion:
        seq = self.seq
        reason = seq.finish_reason
        assert reason is not None
        text = seq.detokenizer.text
        if reason is FinishReason.DEADLINE:
            text = text[: last_sentence_end(text)]  # "" when no sentence was finished
        return Completion(
            request_id=seq.request_id,
            text=text,
            token_ids=tuple(seq.output_tokens),
            finish_reason=reason,
            prompt_tokens=len(seq.prompt_tokens),
            completion_tokens=len(seq.output_tokens),
            cached_tokens=seq.cached_tokens,
            truncated_messages=self.truncated_messages,
            preemptions=seq.preemptions,
            queue_s=None if self.scheduled_at is None else self.scheduled_at - seq.arrival,
            ttft_s=None if self.first_token_at is None else self.first_token_at - seq.arrival,
            prefill_s=self.prefill_s,
            e2e_s=now - seq.arrival,
        )


def note_step(
    records: Mapping[str, RequestRecord],
    plan: StepPlan,
    step_s: float,
    started: float,
    ended: float,
) -> None:
    """For each request in a step that ran: when it was first computed, when it first
    sampled, and its share of the step as prefill time."""
    for i, chunk in enumerate(plan.chunks):
        record = records[chunk.seq.request_id]
        if record.scheduled_at is None:
            record.scheduled_at = started
        if i >= plan.n_decode:
            record.prefill_s += step_s * len(chunk.tokens) / plan.num_tokens
        if chunk.sample and record.first_token_at is None:
            record.first_token_at = ended


def deltas(
    updates: list[Update],
    records: Mapping[str, RequestRecord],
    metrics: EngineMetrics,
    now: float,
) -> Outbox:
    """The deltas of one step's updates, per caller loop. A finished request's stream
    gets its completion before its last delta is sent; latencies are observed here,
    where the caller is handed its tokens."""
    outbox: defaultdict[asyncio.AbstractEventLoop, list[tuple[RequestStream, Delta]]]
    outbox = defaultdict(list)
    for update in updates:
        record = records.get(update.seq.request_id)
        if record is None or record.stream is None or record.loop is None:
            continue
        seq = update.seq
        priority = seq.priority.name.lower()
        if update.token_ids:
            if len(seq.output_tokens) == len(update.token_ids):
                metrics.ttft.labels(priority).observe(now - seq.arrival)
            elif record.emitted_at is not None:
                metrics.inter_token.observe(now - record.emitted_at)
            record.emitted_at = now
        if seq.finish_reason is not None:
            record.stream.completion = done = record.completion(now)
            metrics.observe_finished(priority, done)
        delta = Delta(seq.request_id, update.text, tuple(update.token_ids), seq.finish_reason)
        outbox[record.loop].append((record.stream, delta))
    return outbox
