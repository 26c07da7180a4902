"""One request's state as the scheduler sees it.

A plain class, mutated only by the engine thread: the scheduler decides, the runner
computes, and this object remembers where the request stands between steps: its
tokens, what it asked for, and where it is in the KV cache. What the engine keeps for
delivering and measuring a request (its sampler, its caller, its timestamps) is in
``request_record.py``.
"""

from __future__ import annotations

import enum
import math
import time
from dataclasses import dataclass, field

from worthit.engine.detokenizer import Detokenizer


class Priority(enum.IntEnum):
    """Request classes; a lower value is served first.

    ``BACKGROUND`` is work nobody waits for (explanations generated ahead of the
    shoppers who will ask): no deadline, its own queue, and tokens only in steps with
    no other class's work, which are kept short (docs/engine.md, "The background
    class"). It is the last class rather than a flag beside the class because every
    rule that orders requests (queue order, preemption victims, the metrics label)
    already reads the class, and each of them puts it last.
    """

    HIGH = 0
    MEDIUM = 1
    LOW = 2
    BACKGROUND = 3

    @property
    def prefill_weight(self) -> int:
        """Share of each step's prefill budget (5/2/1), so low traffic still moves;
        background never shares a step with the others."""
        return (5, 2, 1, 0)[self.value]

    @property
    def is_background(self) -> bool:
        return self is Priority.BACKGROUND


ANONYMOUS = ""
"""The tenant of requests that name none (the demo, keys off): one tenant like any other."""


class Status(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


class FinishReason(enum.StrEnum):
    STOP = "stop"
    """An end-of-generation token or a stop string."""
    LENGTH = "length"
    """max_tokens or the context size."""
    DEADLINE = "deadline"
    """The deadline would not fit another sentence: stopped at a sentence end."""
    EXPIRED = "expired"
    """The deadline passed (or became unreachable) before prefill: never computed."""
    ABORT = "abort"
    ERROR = "error"


class DeadlinePolicy(enum.StrEnum):
    """What a deadline promises the caller.

    ``sentence``: admit when one short sentence fits, stream, and stop at the last
    sentence end that fits (the explanation flow: a shorter answer is still an answer).
    ``complete``: admit only when the answer's expected length is expected to fit, and
    hold the batch so running answers keep that promise (an API client that asked for
    N tokens by a deadline). The expected length is what recent answers needed
    (timing/lengths.py), at most ``max_tokens``: pricing all of ``max_tokens`` refused answers
    that end near 29 tokens of 48. One that runs longer stops at a sentence end with
    "deadline" when the next sentence would not fit.
    """

    SENTENCE = "sentence"
    COMPLETE = "complete"

    def required_tokens(
        self, max_tokens: int, min_output_tokens: int, expected_tokens: int | None = None
    ) -> int:
        """Output tokens the deadline must leave room for under this policy.
        expected_tokens is None until recent answers say how long one runs: then
        ``complete`` prices all of max_tokens. Never less than one sentence."""
        sentence = min(max_tokens, min_output_tokens)
        if self is DeadlinePolicy.SENTENCE:
            return sentence
        if expected_tokens is None:
            return max_tokens
        return min(max_tokens, max(sentence, expected_tokens))


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens. temperature 0 means greedy (argmax), the oracle's mode."""

    max_tokens: int = 128
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        if self.temperature < 0:
            raise ValueError("temperature must be >= 0")
        if not 0 < self.top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if self.top_k < 0:
            raise ValueError("top_k must be >= 0")


@dataclass(eq=False)
class Sequence:
    request_id: str
    prompt_tokens: list[int]
    params: SamplingParams
    priority: Priority
    deadline: float | None
    """Absolute monotonic time, or None."""
    arrival: float
    """Monotonic time of submission: first come, first served among equals."""
    detokenizer: Detokenizer
    required_tokens: int = 1
    """Output tokens the deadline must leave room for (see DeadlinePolicy)."""
    cached_hint: int = 0
    """Prefix-cache hit expected at submission, for the queue's time estimates."""
    tenant: str = ANONYMOUS
    """Who asked: requests of one class are shared fairly between tenants (scheduler)."""
    output_tokens: list[int] = field(default_factory=list)
    status: Status = Status.WAITING
    seq_id: int | None = None
    """llama.cpp sequence id while the request holds KV."""
    num_computed: int = 0
    """Tokens of prompt+output whose KV is in the cache."""
    cached_tokens: int = 0
    """Prompt tokens taken from the prefix cache at the first admission."""
    preemptions: int = 0
    sentence_mark: int = 0
    """Output tokens up to the last sentence end: where the next sentence starts."""
    finish_reason: FinishReason | None = None

    def tokens_owed(self) -> int:
        """Output tokens still needed before the deadline promise is kept."""
        return max(0, self.required_tokens - len(self.output_tokens))

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_tokens) + len(self.output_tokens)

    def token_at(self, i: int) -> int:
        n = len(self.prompt_tokens)
        return self.prompt_tokens[i] if i < n else self.output_tokens[i - n]

    def tokens(self, start: int, end: int) -> list[int]:
        n = len(self.prompt_tokens)
        if end <= n:
            return self.prompt_tokens[start:end]
        if start >= n:
            return self.output_tokens[start - n : end - n]
        return self.prompt_tokens[start:] + self.output_tokens[: end - n]

    @property
    def pending(self) -> int:
        """Tokens not yet in the KV cache: 1 while decoding, more while prefilling."""
        return self.num_tokens - self.num_computed

    @property
    def is_finished(self) -> bool:
        return self.status is Status.FINISHED

    def slack(self, now: float) -> float:
        """Seconds to the deadline; infinite without one, so such requests go last."""
        return math.inf if self.deadline is None else self.deadline - now

    def sort_key(self, now: float) -> tuple[int, float, float]:
        return (self.priority.value, self.slack(now), self.arrival)

    @property
    def is_background(self) -> bool:
        return self.priority is Priority.BACKGROUND


def internal_sequence(request_id: str, tokens: list[int], detokenizer: Detokenizer) -> Sequence:
    """A one-token, low-priority, deadline-free sequence: the engine's own work (prefix
    warming, calibration), never a caller's."""
    return Sequence(
        request_id=request_id,
        prompt_tokens=tokens,
        params=SamplingParams(max_tokens=1),
        priority=Priority.LOW,
        deadline=None,
        arrival=time.monotonic(),
        detokenizer=detokenizer,
    )
