"""The engine: one thread owns the llama.cpp context, asyncio callers stream from it.

``submit`` runs in the caller's event loop: it builds the prompt, decides admission at
once (a refusal is an exception the caller acts on, not a late failure) and hands the
request to the engine thread through its inbox. The engine thread takes in what the
inbox holds, then steps:

    schedule (scheduler.py) -> run (runner.py: one llama_decode) -> postprocess
    (scheduler.py) -> deliver (streams.py: one call_soon_threadsafe per caller loop)

llama_decode releases the GIL, so the event loops keep serving HTTP while the model
computes. When there is nothing to do the thread sleeps until woken, and after a quiet
``IDLE_PROBE_S`` re-measures a stale step-time model (timing/step_calibration.py). Background
requests fill the steps no interactive request needs, on ``background_threads`` threads, so
the HTTP thread keeps a core.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, SimpleQueue

from worthit.engine.admission import Admission
from worthit.engine.chat import ChatMessage, ChatTemplate, PromptBuilder
from worthit.engine.config import EngineConfig
from worthit.engine.detokenizer import Detokenizer
from worthit.engine.errors import AdmissionRefusedError, EngineClosedError
from worthit.engine.kv.block_manager import BlockManager
from worthit.engine.kv.host_cache import HostPrefixCache
from worthit.engine.metrics import EngineMetrics
from worthit.engine.request_record import RequestRecord, deltas, note_step
from worthit.engine.runner import LlamaRunner, Runner
from worthit.engine.scheduler import Scheduler, StepPlan, Update
from worthit.engine.sequence import (
    ANONYMOUS,
    DeadlinePolicy,
    FinishReason,
    Priority,
    SamplingParams,
    internal_sequence,
)
from worthit.engine.sequence import Sequence as Seq
from worthit.engine.status import EngineStatus
from worthit.engine.streams import Completion, RequestStream, send
from worthit.engine.timing.budget import PublishedBudget, StepBudget
from worthit.engine.timing.latency import StepTimeModel
from worthit.engine.timing.lengths import CompletionLengths
from worthit.engine.timing.step_calibration import (
    BACKGROUND_PROBE_EVERY_S,
    IDLE_PROBE_S,
    Calibration,
)
from worthit.engine.warming import PrefixWarmer

__all__ = ["Engine"]

log = logging.getLogger(__name__)

STALLED_WAIT_S = 0.005
"""How long a step that could run nothing (KV full) waits for an abort to arrive."""


@dataclass
class _Submit:
    record: RequestRecord


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
        self.config = config = config or EngineConfig()
        self.runner = runner
        self.metrics = metrics or EngineMetrics()
        self.model_id = runner.model_id
        self.chat_template = ChatTemplate(runner.chat_template, runner.bos_text, runner.eos_text)
        self.prompts = PromptBuilder(runner.tokenize, self.chat_template, config.sequence_cells)
        self.blocks = BlockManager(
            config.num_blocks, config.block_size, config.num_seq_ids, runner,
            HostPrefixCache(config.host_cache_bytes), config.resident_blocks,
        )  # fmt: skip
        self.step_model = StepTimeModel()
        self.background_step_model = (
            self.step_model if config.background_threads == config.n_threads else StepTimeModel()
        )
        """Times steps on background_threads: another thread count is another speed."""
        published = PublishedBudget(StepBudget(config.tpot_target_s))
        self.scheduler = Scheduler(
            config, self.blocks, self.step_model, runner.is_eog, published,
            background_model=self.background_step_model,
        )  # fmt: skip
        self._inbox: SimpleQueue[_Submit | _Abort | _Call] = SimpleQueue()
        self._wake = threading.Event()
        self.admission = Admission(config, self.step_model, published, self.metrics)
        self.warmer = PrefixWarmer(config, published, self._inbox.qsize, self._queue_warming)
        self.calibration = Calibration(
            config, runner, self.step_model, self.blocks, self.background_step_model
        )
        self.lengths = CompletionLengths(config.expected_length_quantile)
        """Recent interactive answers' lengths: what the complete policy prices."""
        self._requests: dict[str, RequestRecord] = {}
        """Every request the engine thread has taken in and not yet finished."""
        self._interactive_seen = time.monotonic()
        """When the engine thread last had interactive work (the re-probe waits for a gap)."""
        self._closing = False
        self._thread: threading.Thread | None = None
        self._tokenizing = 0
        self._tokenized = threading.Condition()
        """Prompts being tokenised outside the engine thread: close() waits for them
        before it frees the model they read."""

    @classmethod
    def from_gguf(
        cls,
        model_path: str | Path,
        config: EngineConfig | None = None,
        lora_path: str | Path | None = None,
    ) -> Engine:
        """Load a GGUF (and a LoRA adapter for it) and start the engine thread."""
        config = config or EngineConfig()
        engine = cls(LlamaRunner(model_path, config, lora_path), config)
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
            self.calibration.calibrate()
        self._thread = threading.Thread(target=self._loop, name="worthit-engine", daemon=True)
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
            self.calibration.calibrate()
        self._thread = threading.current_thread()

    def run_here(self) -> None:
        """Drive the engine on the claimed thread until ``stop()`` (blocking)."""
        if self._thread is not threading.current_thread():
            raise RuntimeError("call claim_current_thread() on this thread first")
        self._loop()

    def stop(self) -> None:
        """Ask the engine loop to finish: every unfinished request ends with "abort"."""
        self._closing = True
        self._wake.set()

    def close(self) -> None:
        """Finish every request with "abort", stop the thread, free the model."""
        self.stop()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        with self._tokenized:
            self._tokenized.wait_for(lambda: self._tokenizing == 0)
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
        tenant: str | None = None,
    ) -> RequestStream:
        """Queue a request; call from a running event loop.

        Give either a raw ``prompt`` (text or token ids) or chat ``messages`` (rendered
        with the GGUF's template, then ``answer_prefix`` appended as the start of the
        assistant's answer). ``deadline_s`` is relative to now; without it the config's
        default deadline applies, and ``deadline_policy`` says what it promises.
        ``Priority.BACKGROUND`` is work nobody waits for: no deadline (giving one is a
        ValueError), its own queue, tokens only when no interactive request needs the engine.
        ``tenant`` is who asked (an API key's tenant): inside a class the engine shares
        itself fairly between tenants; None is the anonymous tenant, one like any other.
        Raises AdmissionRefusedError when the deadline cannot be met or the queue is
        full, PromptTooLongError when the prompt cannot fit.

        The prompt is tokenised here, on the caller's loop, which serves nothing else
        meanwhile: 18 ms for 64 KiB of text, 0.3 s for a 64 KiB conversation that must
        drop old turns to fit (docs/engine.md); ``submit_async`` does it on a thread.
        """
        started = self._check(priority, deadline_s)
        params = params or SamplingParams()
        tokens, dropped = self._tokens(prompt, messages, params.max_tokens, answer_prefix)
        return self._queue(
            tokens, dropped, started, params, priority, deadline_s, request_id,
            deadline_policy, tenant,
        )  # fmt: skip

    async def submit_async(
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
        tenant: str | None = None,
    ) -> RequestStream:
        """``submit``, with the prompt rendered and tokenised on a worker thread, so a
        long prompt does not stall the loop's other requests meanwhile. Safe beside the
        engine thread's decode and beside other tokenisations: llama_tokenize only reads
        the vocabulary (and ctypes releases the GIL for it), the prompt builder keeps no
        state, and close() waits for it before freeing the model. The deadline counts
        from this call, so time spent tokenising is time the request has used; admission
        and the handoff to the engine thread then run on the loop, as in ``submit``."""
        started = self._check(priority, deadline_s)
        params = params or SamplingParams()
        build = (prompt, messages, params.max_tokens, answer_prefix)
        if messages is None and not isinstance(prompt, str):  # token ids: nothing to tokenise
            tokens, dropped = self._tokens(*build)
        else:
            tokens, dropped = await asyncio.to_thread(self._tokens, *build)
        if self._closing:
            raise EngineClosedError("engine is closed")
        return self._queue(
            tokens, dropped, started, params, priority, deadline_s, request_id,
            deadline_policy, tenant,
        )  # fmt: skip

    def _tokens(
        self,
        prompt: str | Sequence[int] | None,
        messages: Sequence[ChatMessage] | None,
        max_tokens: int,
        answer_prefix: str,
    ) -> tuple[list[int], int]:
        """The prompt's tokens, from any thread, never after close() freed the model."""
        with self._tokenized:
            if self._closing:
                raise EngineClosedError("engine is closed")
            self._tokenizing += 1
        try:
            return self.prompts.tokens(prompt, messages, max_tokens, answer_prefix)
        finally:
            with self._tokenized:
                self._tokenizing -= 1
                self._tokenized.notify_all()

    def _check(self, priority: Priority, deadline_s: float | None) -> float:
        """Refuse what needs no prompt to refuse; the request's start time."""
        if self._closing:
            raise EngineClosedError("engine is closed")
        if priority.is_background and deadline_s is not None:
            raise ValueError("background requests carry no deadline")
        return time.monotonic()

    def _queue(
        self,
        tokens: list[int],
        dropped: int,
        started: float,
        params: SamplingParams,
        priority: Priority,
        deadline_s: float | None,
        request_id: str | None,
        deadline_policy: DeadlinePolicy,
        tenant: str | None,
    ) -> RequestStream:
        """Admission and the handoff to the engine thread, on the caller's loop. Admission
        prices the deadline from now, after tokenising, not from the start."""
        loop = asyncio.get_running_loop()
        request_id = request_id or uuid.uuid4().hex
        if deadline_s is None and not priority.is_background:
            deadline_s = self.config.default_deadline_s
        seq = Seq(
            request_id=request_id,
            prompt_tokens=tokens,
            params=params,
            priority=priority,
            deadline=None if deadline_s is None else started + deadline_s,
            arrival=started,
            detokenizer=Detokenizer(self.runner.piece, params.stop),
            required_tokens=deadline_policy.required_tokens(
                params.max_tokens, self.config.min_output_tokens, self.lengths.expected()
            ),
            cached_hint=self.blocks.cached_prefix_len(tokens),
            tenant=ANONYMOUS if tenant is None else tenant,
        )
        try:
            self.admission.admit(seq, time.monotonic())
        except AdmissionRefusedError as refused:
            if refused.reason == "deadline":
                self.warmer.after_refusal(tokens, seq.cached_hint)
            raise
        stream = RequestStream(request_id, self.abort)
        sampler = self.runner.new_sampler(params, self.config.seed)
        self._send(_Submit(RequestRecord(seq, sampler, stream, loop, dropped)))
        return stream

    async def generate(
        self,
        prompt: str | Sequence[int] | None = None,
        *,
        messages: Sequence[ChatMessage] | None = None,
        params: SamplingParams | None = None,
        priority: Priority = Priority.MEDIUM,
        deadline_s: float | None = None,
        tenant: str | None = None,
    ) -> Completion:
        stream = self.submit(
            prompt, messages=messages, params=params, priority=priority,
            deadline_s=deadline_s, tenant=tenant,
        )  # fmt: skip
        return await stream.collect()

    def abort(self, request_id: str) -> None:
        """Stop a request wherever it is; its stream ends with finish_reason "abort"."""
        self._send(_Abort(request_id))

    def warm(self, messages: Sequence[ChatMessage], answer_prefix: str = "") -> bool:
        """Prefill a prompt's full blocks into the prefix cache at low priority, ahead of
        the requests expected to start with it.
        False when it is cached already, being warmed, or the queue is busy."""
        if self._closing:
            return False
        tokens, _ = self.prompts.tokens(None, messages, 1, answer_prefix)
        return self.warmer.warm(tokens, self.blocks.cached_prefix_len(tokens))

    async def clear_prefix_cache(self) -> None:
        """Evict every cached prefix (running requests keep their KV)."""
        await asyncio.wrap_future(self.call_in_engine_thread(self.blocks.clear_cache))

    def call_in_engine_thread(self, fn: Callable[[], object]) -> Future[object]:
        """Run fn between two steps, where it may touch the scheduler, the block
        manager or the llama.cpp context without racing the engine thread."""
        future: Future[object] = Future()
        self._send(_Call(fn, future))
        return future

    def status(self) -> EngineStatus:
        """The engine's load, from any thread. Each number is read once from state the
        engine thread owns, so two of them may come from either side of a step."""
        model = self.scheduler.model
        return EngineStatus(
            model_id=self.model_id,
            running=len(self.scheduler.running),
            waiting=len(self.scheduler.waiting),
            background_running=len(self.scheduler.background_running),
            background_waiting=len(self.scheduler.background_waiting),
            kv_usage=self.blocks.usage,
            cached_prefixes=self.blocks.cached_prefixes,
            batch_window=self.scheduler.window.size,
            preemptions=self.scheduler.preemptions,
            prefix_queried_tokens=self.blocks.queried_tokens,
            prefix_hit_tokens=self.blocks.hit_tokens,
            host_cache_bytes=self.blocks.host.bytes_used,
            host_cache_restores=self.blocks.host.restored,
            tenants=self.scheduler.fairness.tenants,
            step_model_s=(model.overhead_s, model.per_token_s, model.per_sample_s),
        )

    def _queue_warming(self, request_id: str, tokens: list[int]) -> None:
        seq = internal_sequence(request_id, tokens, Detokenizer(self.runner.piece))
        sampler = self.runner.new_sampler(seq.params, self.config.seed)
        self._send(_Submit(RequestRecord(seq, sampler)))

    def _send(self, item: _Submit | _Abort | _Call) -> None:
        self._inbox.put(item)
        self._wake.set()

    # -- the engine thread ---------------------------------------------------------------

    def _loop(self) -> None:
        try:
            while not self._closing:
                self._take_inbox()
                if not self.scheduler.has_work():
                    self._idle()
                    continue
                self._probe_between_background_steps()
                if not self._step():
                    self._wait(STALLED_WAIT_S)
        except Exception:
            log.exception("engine thread failed; failing every request")
            self._closing = True  # submit() refuses from now on
            self._take_inbox()
            self._fail_all(FinishReason.ERROR)
            raise
        self._take_inbox()
        self._fail_all(FinishReason.ABORT)

    def _step(self) -> bool:
        """One step; False when it had nothing to run and nothing to deliver."""
        plan = self.scheduler.schedule(time.monotonic())
        sampled, step_s = self._run(plan)
        updates = self.scheduler.postprocess(plan, sampled, step_s, time.monotonic())
        self._deliver(updates)
        return bool(plan.chunks or updates)

    def _run(self, plan: StepPlan) -> tuple[dict[int, int], float]:
        """One llama_decode over the plan; the sampled tokens and the step's seconds."""
        if not plan.chunks:
            return {}, 0.0
        records = self._requests
        samplers = {c.seq_id: records[c.seq.request_id].sampler for c in plan.chunks if c.sample}
        config = self.config
        self.runner.set_threads(config.background_threads if plan.background else config.n_threads)
        started = time.monotonic()
        t0 = time.perf_counter()
        sampled = self.runner.step(plan.chunks, samplers)
        step_s = time.perf_counter() - t0
        self.metrics.step_time.observe(step_s)
        note_step(records, plan, step_s, started, time.monotonic())
        return sampled, step_s

    def _deliver(self, updates: list[Update]) -> None:
        """Hand the updates to their callers, forget the requests that finished, and
        show the new load in the metrics. A finished answer's length is recorded before
        its caller hears of the end, so the caller's next request is priced with it."""
        out = deltas(updates, self._requests, self.metrics, time.monotonic())
        for seq in (u.seq for u in updates if u.seq.is_finished):
            record = self._requests.pop(seq.request_id, None)
            if record is not None:
                self.runner.free_sampler(record.sampler)
                self.warmer.finished(seq.request_id)
                if record.stream is not None and not seq.is_background:
                    assert seq.finish_reason is not None
                    self.lengths.observe(len(seq.output_tokens), seq.finish_reason)
        send(out)
        self.metrics.record_load(self.status())

    def _take_inbox(self) -> None:
        while True:
            try:
                item = self._inbox.get_nowait()
            except Empty:
                return
            if isinstance(item, _Submit):
                record = item.record
                if record.stream is not None:  # the engine's own warming was never admitted
                    self.admission.picked_up(record.seq)
                self._requests[record.seq.request_id] = record
                self.scheduler.add(record.seq)
            elif isinstance(item, _Call):
                try:
                    item.future.set_result(item.fn())
                except Exception as exc:
                    item.future.set_exception(exc)
            elif not self.scheduler.abort(item.request_id):
                log.debug("abort of unknown or finished request %s", item.request_id)

    def _idle(self) -> None:
        if self.warmer.warm_deferred(self.blocks.cached_prefix_len):
            return
        if not self._wake.wait(IDLE_PROBE_S):
            self.calibration.reprobe_if_stale(self._arrived)
            self.calibration.recalibrate_if_refused(self.admission.refused_for_time, self._arrived)
        self._wake.clear()
        self._interactive_seen = time.monotonic()

    def _probe_between_background_steps(self) -> None:
        """Background work keeps the engine from idling: re-measure a stale step-time
        model once interactive work has been quiet for BACKGROUND_PROBE_EVERY_S. Not every
        IDLE_PROBE_S, as an idle engine does: where background steps share the interactive
        model (the same thread count, as in `explain --warm`), every large step leaves it
        stale, and a probe (two one-token steps) after each half-second step took 8 % of
        the engine's time."""
        now = time.monotonic()
        if self.scheduler.has_interactive_work():
            self._interactive_seen = now
        elif now - self._interactive_seen >= BACKGROUND_PROBE_EVERY_S:
            self.calibration.reprobe_if_stale(self._arrived)
            self._interactive_seen = now

    def _arrived(self) -> bool:
        """Whether anything reached the inbox since the loop last emptied it: a timing
        probe stops for it. Not the wake event, which stays set through a spell of
        background work and would stop every probe between background steps."""
        return not self._inbox.empty()

    def _wait(self, seconds: float) -> None:
        """Sleep until woken (a request, an abort, a call) or for seconds."""
        self._wake.wait(seconds)
        self._wake.clear()

    def _fail_all(self, reason: FinishReason) -> None:
        for seq in self.scheduler.sequences():
            self.scheduler.abort(seq.request_id)
            seq.finish_reason = reason
        self._deliver(self.scheduler.take_ended())
