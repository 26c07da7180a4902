"""The engine: one thread owns the llama.cpp context, asyncio callers stream from it.

``submit`` runs in the caller's event loop: it builds the prompt, decides admission
at once (a refusal is an exception the caller acts on, not a late failure), and hands
the request to the engine thread through a queue. The engine thread loops
schedule -> llama_decode -> postprocess and pushes each step's deltas back into the
callers' loops with one ``call_soon_threadsafe`` per loop per step. llama_decode
releases the GIL, so the event loop keeps serving HTTP while the model computes.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections import OrderedDict, defaultdict
from collections.abc import AsyncIterator, Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, SimpleQueue

from worthit.engine.block_manager import BlockManager
from worthit.engine.chat import ChatMessage, ChatTemplate, fit_messages, validate_messages
from worthit.engine.config import EngineConfig
from worthit.engine.detokenizer import Detokenizer, last_sentence_end
from worthit.engine.errors import AdmissionRefusedError, EngineClosedError, PromptTooLongError
from worthit.engine.latency import StepTimeModel
from worthit.engine.metrics import EngineMetrics
from worthit.engine.runner import LlamaRunner, Runner
from worthit.engine.scheduler import Chunk, Scheduler, Update
from worthit.engine.sequence import (
    DeadlinePolicy,
    FinishReason,
    Priority,
    SamplingParams,
    Timings,
)
from worthit.engine.sequence import (
    Sequence as Seq,
)

log = logging.getLogger(__name__)

IDLE_PROBE_S = 0.25
"""Idle seconds after which a stale step-time model is re-measured (see
_probe_if_stale): short, because refused traffic leaves only short idle gaps."""
PROBE_TOKENS = 64
REFUSALS_REMEMBERED = 4096


@dataclass(frozen=True)
class Delta:
    """New text of one request; the last one carries finish_reason."""

    request_id: str
    text: str
    token_ids: tuple[int, ...]
    finish_reason: FinishReason | None = None


@dataclass(frozen=True)
class Completion:
    """The whole answer and its accounting, available once the stream ends."""

    request_id: str
    text: str
    """For finish_reason "deadline", cut at the last sentence end ("" if none ended)."""
    token_ids: tuple[int, ...]
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    truncated_messages: int
    """Old turns dropped to fit the context (0 when the conversation fit)."""
    preemptions: int
    queue_s: float | None
    ttft_s: float | None
    prefill_s: float
    e2e_s: float


class RequestStream(AsyncIterator[Delta]):
    """Async iterator of one request's deltas. Breaking out of the loop does not stop
    the request: call ``abort()`` (the server does when a client disconnects)."""

    def __init__(self, request_id: str, engine: Engine) -> None:
        self.request_id = request_id
        self.completion: Completion | None = None
        self._engine = engine
        self._queue: asyncio.Queue[Delta] = asyncio.Queue()
        self._done = False

    def __aiter__(self) -> RequestStream:
        return self

    async def __anext__(self) -> Delta:
        if self._done:
            raise StopAsyncIteration
        delta = await self._queue.get()
        if delta.finish_reason is not None:
            self._done = True
        return delta

    def abort(self) -> None:
        if not self._done:
            self._engine.abort(self.request_id)

    async def collect(self) -> Completion:
        async for _ in self:
            pass
        assert self.completion is not None
        return self.completion

    def _push(self, delta: Delta) -> None:
        self._queue.put_nowait(delta)


@dataclass
class _Submit:
    seq: Seq
    stream: RequestStream | None
    """None for the engine's own prefix-warming requests."""
    loop: asyncio.AbstractEventLoop | None


@dataclass
class _Abort:
    request_id: str


@dataclass
class _Call:
    fn: Callable[[], object]
    future: Future[object]


class Engine:
    def __init__(
        self,
        runner: Runner,
        config: EngineConfig | None = None,
        metrics: EngineMetrics | None = None,
    ) -> None:
        self.config = config or EngineConfig()
        self.runner = runner
        self.metrics = metrics or EngineMetrics()
        self.model_id = runner.model_id
        self.chat_template = ChatTemplate(runner.chat_template, runner.bos_text, runner.eos_text)
        self.blocks = BlockManager(
            self.config.num_blocks, self.config.block_size, self.config.num_seq_ids, runner
        )
        self.step_model = StepTimeModel()
        self.scheduler = Scheduler(self.config, self.blocks, self.step_model, runner.is_eog)
        self._inbox: SimpleQueue[_Submit | _Abort | _Call] = SimpleQueue()
        self._wake = threading.Event()
        self._streams: dict[str, tuple[RequestStream, asyncio.AbstractEventLoop]] = {}
        self._backlog = [0, 0, 0]
        self._backlog_lock = threading.Lock()
        self._closing = False
        self._thread: threading.Thread | None = None
        self._counted = (0, 0, 0)
        self._warming: set[int | None] = set()
        self._refused: OrderedDict[int, int] = OrderedDict()
        """Refusal counts of recent prompt prefixes (bounded), for warm_after_refusals."""

    @classmethod
    def from_gguf(cls, model_path: str | Path, config: EngineConfig | None = None) -> Engine:
        """Load a GGUF and start the engine thread."""
        config = config or EngineConfig()
        engine = cls(LlamaRunner(model_path, config), config)
        engine.start()
        return engine

    # -- lifecycle ---------------------------------------------------------------

    def start(self, calibrate: bool = True) -> None:
        """Start the engine thread; first time a few steps so that admission decides
        from this machine's measured speed, not from priors. No-op once started, or
        once ``run_here`` owns the current thread."""
        if self._thread is not None:
            return
        if calibrate:
            self._calibrate()
        self._thread = threading.Thread(target=self._run, name="worthit-engine", daemon=True)
        self._thread.start()

    def claim_current_thread(self, calibrate: bool = True) -> None:
        """Make the calling thread the engine thread; ``run_here`` then drives it.

        Why: llama.cpp's OpenMP build runs a decode step markedly faster when the
        thread calling ``llama_decode`` is the process's initial thread (measured on
        SmolLM2-135M, 2 threads: 8.7 ms vs 12.5-16.5 ms from a worker thread; see
        docs/engine.md), so the server runs the engine on its main thread and uvicorn
        on another."""
        if self._thread is not None:
            raise RuntimeError("engine already started")
        if calibrate:
            self._calibrate()
        self._thread = threading.current_thread()

    def run_here(self) -> None:
        """Drive the engine on the claimed thread until ``stop()`` (blocking)."""
        if self._thread is not threading.current_thread():
            raise RuntimeError("call claim_current_thread() on this thread first")
        self._run()

    def stop(self) -> None:
        """Ask the engine loop to finish: every unfinished request ends with "abort"."""
        self._closing = True
        self._wake.set()

    def _probe_if_stale(self) -> None:
        """While idle after large steps only, time two one-token steps: prefill chunks
        alone cannot separate the overhead from the per-token cost (latency.py), and
        while everything is refused no decode step would ever correct it. ~20 ms."""
        probe_id = self.config.num_seq_ids - 1
        if self.step_model.large_steps_since_small == 0 or not self.blocks.is_free(probe_id):
            return
        if self.blocks.free_blocks == 0:
            return
        token = self.runner.tokenize("The", add_special=False)[:1] or [1]
        self._time_steps("probe", [(0, token), (0, token)])

    def _calibrate(self) -> None:
        text = "The quick brown fox jumps over the lazy dog. " * 16
        tokens = self.runner.tokenize(text, add_special=False)[:PROBE_TOKENS] or [1]
        end = len(tokens)
        self._time_steps(
            "calibration", [(0, tokens), (0, tokens), (end, tokens[:1]), (end, tokens[:1])]
        )

    def _time_steps(self, request_id: str, runs: list[tuple[int, list[int]]]) -> None:
        """Run pairs of steps on the spare last sequence id (unused until the id pool
        runs dry) and teach the step model the second of each pair: the first pays
        one-time costs (allocation, a graph of a new shape)."""
        seq_id = self.config.num_seq_ids - 1
        probe = self._background_seq(request_id, runs[0][1])
        for i, (start, chunk) in enumerate(runs):
            self.runner.truncate(seq_id, start)
            t0 = time.perf_counter()
            self.runner.step([Chunk(probe, seq_id, start, list(chunk), sample=False)])
            if i % 2:
                self.step_model.observe(len(chunk), time.perf_counter() - t0, len(chunk) == 1)
        self.runner.truncate(seq_id, 0)

    def _background_seq(self, request_id: str, tokens: list[int]) -> Seq:
        """A one-token, low-priority, deadline-free sequence: the engine's own work."""
        return Seq(
            request_id=request_id,
            prompt_tokens=tokens,
            params=SamplingParams(max_tokens=1),
            priority=Priority.LOW,
            deadline=None,
            detokenizer=Detokenizer(self.runner.piece),
            timings=Timings(arrival=time.monotonic()),
            max_total_tokens=self.config.num_blocks * self.config.block_size,
        )

    def close(self) -> None:
        """Finish every request with "abort", stop the thread, free the model."""
        self.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self.runner.close()

    def __enter__(self) -> Engine:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests ------------------------------------------------------------------

    def submit(
        self,
        prompt: str | Sequence[int] | None = None,
        *,
        messages: Sequence[ChatMessage] | None = None,
        params: SamplingParams | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
        request_id: str | None = None,
        answer_prefix: str = "",
        deadline_policy: DeadlinePolicy = DeadlinePolicy.SENTENCE,
    ) -> RequestStream:
        """Queue a request; call from a running event loop.

        Give either a raw ``prompt`` (text or token ids) or chat ``messages`` (rendered
        with the GGUF's template, then ``answer_prefix`` appended as the start of the
        assistant's answer). ``deadline_s`` is relative to now; without it the config's
        default deadline applies, and ``deadline_policy`` says what it promises.
        Raises AdmissionRefusedError when the deadline cannot be met or the queue is
        full, PromptTooLongError when the prompt cannot fit.
        """
        if self._closing:
            raise EngineClosedError("engine is closed")
        loop = asyncio.get_running_loop()
        params = params or SamplingParams()
        request_id = request_id or uuid.uuid4().hex
        now = time.monotonic()
        tokens, dropped = self._prompt_tokens(prompt, messages, params, answer_prefix)
        if deadline_s is None:
            deadline_s = self.config.default_deadline_s
        limit = self.config.num_blocks * self.config.block_size
        seq = Seq(
            request_id=request_id,
            prompt_tokens=tokens,
            params=params,
            priority=priority,
            deadline=None if deadline_s is None else now + deadline_s,
            detokenizer=Detokenizer(self.runner.piece, params.stop),
            timings=Timings(arrival=now),
            truncated_messages=dropped,
            max_total_tokens=limit,
            required_tokens=(
                params.max_tokens
                if deadline_policy is DeadlinePolicy.COMPLETE
                else min(params.max_tokens, self.config.min_output_tokens)
            ),
        )
        seq.cached_hint = self.blocks.cached_prefix_len(tokens)
        try:
            self._admission(seq, now)
        except AdmissionRefusedError as refused:
            if refused.reason == "deadline":
                self._warm_prefix(tokens, seq.cached_hint)
            raise
        seq.sampler = self.runner.new_sampler(params, self.config.seed)
        stream = RequestStream(request_id, self)
        with self._backlog_lock:
            self._backlog[priority.value] += len(tokens) - seq.cached_hint
        self._inbox.put(_Submit(seq, stream, loop))
        self._wake.set()
        return stream

    async def generate(
        self,
        prompt: str | Sequence[int] | None = None,
        *,
        messages: Sequence[ChatMessage] | None = None,
        params: SamplingParams | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
    ) -> Completion:
        stream = self.submit(
            prompt, messages=messages, params=params, priority=priority, deadline_s=deadline_s
        )
        return await stream.collect()

    def abort(self, request_id: str) -> None:
        """Stop a request wherever it is; its stream ends with finish_reason "abort"."""
        self._inbox.put(_Abort(request_id))
        self._wake.set()

    async def clear_prefix_cache(self) -> None:
        """Evict every cached prefix (running requests keep their KV)."""
        await asyncio.wrap_future(self.call_in_engine_thread(self.blocks.clear_cache))

    def call_in_engine_thread(self, fn: Callable[[], object]) -> Future[object]:
        """Run fn between two steps, where it may touch the scheduler, the block
        manager or the llama.cpp context without racing the engine thread."""
        future: Future[object] = Future()
        self._inbox.put(_Call(fn, future))
        self._wake.set()
        return future

    def count_prompt_tokens(self, messages: Sequence[ChatMessage], answer_prefix: str = "") -> int:
        return len(self.runner.tokenize(self.chat_template.render(messages) + answer_prefix))

    def _prompt_tokens(
        self,
        prompt: str | Sequence[int] | None,
        messages: Sequence[ChatMessage] | None,
        params: SamplingParams,
        answer_prefix: str = "",
    ) -> tuple[list[int], int]:
        limit = self.config.num_blocks * self.config.block_size
        if (prompt is None) == (messages is None):
            raise ValueError("give exactly one of prompt or messages")
        if messages is not None:
            validate_messages(messages)
            reserve = min(params.max_tokens, limit // 2)
            kept, dropped = fit_messages(
                messages, lambda m: self.count_prompt_tokens(m, answer_prefix), limit - reserve
            )
            text = self.chat_template.render(kept) + answer_prefix
            return self.runner.tokenize(text), dropped
        tokens = self.runner.tokenize(prompt) if isinstance(prompt, str) else list(prompt or ())
        if not tokens:
            raise ValueError("prompt must not be empty")
        if len(tokens) >= limit:
            raise PromptTooLongError(len(tokens), limit - 1)
        return tokens, 0

    def warm(self, messages: Sequence[ChatMessage], answer_prefix: str = "") -> bool:
        """Prefill a prompt's full blocks into the prefix cache at low priority, ahead of
        the questions expected to start with it (the server warms its best sellers).
        False when it is cached already, being warmed, or the queue is busy."""
        if self._closing:
            return False
        tokens, _ = self._prompt_tokens(None, messages, SamplingParams(max_tokens=1), answer_prefix)
        return self._warm_prefix(tokens, self.blocks.cached_prefix_len(tokens), forced=True)

    def _warm_prefix(self, tokens: list[int], cached: int, forced: bool = False) -> bool:
        """After a deadline refusal, prefill the prompt's full blocks at low priority
        and without a deadline, so the next question about the same product finds its
        facts in the prefix cache instead of being refused the same way."""
        size = self.config.block_size
        n = (len(tokens) - 1) // size * size
        key = hash(tuple(tokens[:n]))
        if forced:
            busy = len(self.scheduler.waiting) + self._inbox.qsize() >= self.config.max_sequences
        else:  # refusal-driven warming only fills idle time: it is a guess, not a request
            busy = bool(self.scheduler.running or self.scheduler.waiting or self._inbox.qsize())
        wanted = forced or (
            self.config.warm_prefix_on_refusal
            and self._count_refusal(key) >= self.config.warm_after_refusals
        )
        if not wanted or n <= cached or busy or key in self._warming:
            return False
        self._warming.add(key)
        warm = self._background_seq(f"warm-{uuid.uuid4().hex}", tokens[:n])
        warm.sampler = self.runner.new_sampler(warm.params, self.config.seed)
        warm.warm_key = key
        self._inbox.put(_Submit(warm, None, None))
        self._wake.set()
        return True

    def _count_refusal(self, key: int) -> int:
        count = self._refused.pop(key, 0) + 1
        self._refused[key] = count
        while len(self._refused) > REFUSALS_REMEMBERED:
            self._refused.popitem(last=False)
        return count

    def _admission(self, seq: Seq, now: float) -> None:
        if len(self.scheduler.waiting) + self._inbox.qsize() >= self.config.max_waiting:
            self.metrics.refusals.labels("queue_full").inc()
            raise AdmissionRefusedError(seq.request_id, "queue_full")
        if seq.deadline is None:
            return
        with self._backlog_lock:
            backlog = sum(self._backlog[: seq.priority.value + 1])
        uncached = len(seq.prompt_tokens) - seq.cached_hint
        ok, estimate = self.scheduler.can_meet(seq, uncached + backlog, now)
        if not ok:
            self.metrics.refusals.labels("deadline").inc()
            raise AdmissionRefusedError(seq.request_id, "deadline", estimate, seq.deadline - now)

    # -- the engine thread ---------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._closing:
                self._drain()
                if not self.scheduler.has_work():
                    if not self._wake.wait(IDLE_PROBE_S):
                        self._probe_if_stale()
                    self._wake.clear()
                    continue
                self._step()
        except Exception:
            log.exception("engine thread failed; failing every request")
            self._closing = True  # submit() refuses from now on
            self._drain()
            self._fail_all(FinishReason.ERROR)
            raise
        self._drain()
        self._fail_all(FinishReason.ABORT)

    def _step(self) -> None:
        plan = self.scheduler.schedule(time.monotonic())
        updates = self.scheduler.take_ended()
        if plan.chunks:
            t0 = time.perf_counter()
            sampled = self.runner.step(plan.chunks)
            step_s = time.perf_counter() - t0
            self.metrics.step_time.observe(step_s)
            updates += self.scheduler.postprocess(plan, sampled, step_s, time.monotonic())
        elif not updates:
            self._wake.wait(0.005)  # nothing schedulable now (KV full): let aborts arrive
            self._wake.clear()
        self._deliver(updates)
        self._gauges()

    def _drain(self) -> None:
        while True:
            try:
                item = self._inbox.get_nowait()
            except Empty:
                return
            if isinstance(item, _Submit):
                seq = item.seq
                if item.stream is not None:  # warming requests were never counted
                    with self._backlog_lock:
                        uncached = len(seq.prompt_tokens) - seq.cached_hint
                        self._backlog[seq.priority.value] -= uncached
                if item.stream is not None and item.loop is not None:
                    self._streams[seq.request_id] = (item.stream, item.loop)
                self.scheduler.add(seq)
            elif isinstance(item, _Call):
                try:
                    item.future.set_result(item.fn())
                except Exception as exc:
                    item.future.set_exception(exc)
            elif not self.scheduler.abort(item.request_id):
                log.debug("abort of unknown or finished request %s", item.request_id)

    def _deliver(self, updates: list[Update]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[RequestStream, Delta]]] = defaultdict(
            list
        )
        now = time.monotonic()
        for update in updates:
            seq = update.seq
            if seq.finish_reason is not None:
                if seq.sampler is not None:
                    self.runner.free_sampler(seq.sampler)
                    seq.sampler = None
                self._warming.discard(seq.warm_key)
            entry = self._streams.get(seq.request_id)
            if entry is None:
                continue
            stream, loop = entry
            if update.token_ids and seq.timings.last_token is not None:
                if len(seq.output_tokens) == len(update.token_ids):
                    self.metrics.ttft.labels(seq.priority.name.lower()).observe(
                        now - seq.timings.arrival
                    )
                elif seq.emitted_at is not None:
                    self.metrics.inter_token.observe(now - seq.emitted_at)
                seq.emitted_at = now
            reason = seq.finish_reason
            if reason is not None:
                stream.completion = self._complete(seq, now)
                del self._streams[seq.request_id]
            delta = Delta(seq.request_id, update.text, tuple(update.token_ids), reason)
            by_loop[loop].append((stream, delta))
        for loop, items in by_loop.items():
            try:
                loop.call_soon_threadsafe(_dispatch, items)
            except RuntimeError:
                log.debug("event loop closed; dropping %d deltas", len(items))

    def _complete(self, seq: Seq, now: float) -> Completion:
        reason = seq.finish_reason
        assert reason is not None
        seq.timings.finished = now
        text = seq.detokenizer.text
        if reason is FinishReason.DEADLINE:
            text = text[: last_sentence_end(text)]  # "" when no sentence was finished
        t = seq.timings
        priority = seq.priority.name.lower()
        self.metrics.e2e.labels(priority, reason.value).observe(now - t.arrival)
        self.metrics.finished.labels(reason.value).inc()
        if t.scheduled is not None:
            self.metrics.queue_time.labels(priority).observe(t.scheduled - t.arrival)
            self.metrics.prefill_time.observe(t.prefill_s)
        return Completion(
            request_id=seq.request_id,
            text=text,
            token_ids=tuple(seq.output_tokens),
            finish_reason=reason,
            prompt_tokens=len(seq.prompt_tokens),
            completion_tokens=len(seq.output_tokens),
            cached_tokens=seq.cached_tokens,
            truncated_messages=seq.truncated_messages,
            preemptions=seq.preemptions,
            queue_s=None if t.scheduled is None else t.scheduled - t.arrival,
            ttft_s=None if t.first_token is None else t.first_token - t.arrival,
            prefill_s=t.prefill_s,
            e2e_s=now - t.arrival,
        )

    def _gauges(self) -> None:
        m = self.metrics
        m.kv_usage.set(self.blocks.usage)
        m.running.set(len(self.scheduler.running))
        m.waiting.set(len(self.scheduler.waiting))
        m.batch_window.set(self.scheduler.window.size)
        counts = (self.blocks.queried_tokens, self.blocks.hit_tokens, self.scheduler.preemptions)
        m.prefix_queried.inc(counts[0] - self._counted[0])
        m.prefix_hit.inc(counts[1] - self._counted[1])
        m.preemptions.inc(counts[2] - self._counted[2])
        self._counted = counts

    def _fail_all(self, reason: FinishReason) -> None:
        for seq in (*self.scheduler.running, *self.scheduler.waiting):
            self.scheduler.abort(seq.request_id)
            seq.finish_reason = reason
        self._deliver(self.scheduler.take_ended())


def _dispatch(items: list[tuple[RequestStream, Delta]]) -> None:
    for stream, delta in items:
        stream._push(delta)
