"""Engine settings.

Every knob that trades latency against throughput lives here, so a benchmark run can
state exactly what it measured.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EngineConfig:
    """Settings of one engine (one llama.cpp context).

    The defaults suit SmolLM2-135M on a 2-core CPU; the benchmark sweeps them.
    """

    context_size: int = 4096
    """KV cells in all: one pool shared by every sequence id, or split evenly among them
    (`kv_streams`)."""

    kv_streams: bool = False
    """One KV stream per sequence id (llama.cpp's `kv_unified = false`) instead of one
    pool. In a pool, flash attention visits every cell up to the highest one in use for
    each token of a step, so every sequence in flight makes every other one's tokens
    dearer; in streams a token visits its own sequence's cells alone. The price: each
    sequence id holds `context_size / num_seq_ids` cells whether it uses them or not, and
    a cached prefix is shared by copying its whole stream and cutting the copy, not by a
    tag. Suits a run that writes many explanations at once and caches little
    (`explain --warm`); `serve` keeps the pool, whose prefix cache holds hundreds of
    prompts in the same memory."""

    max_sequences: int = 16
    """Upper bound of sequences holding KV for a running request at once."""

    min_sequences: int = 1
    """Lower bound the adaptive batch window never goes under."""

    max_cached_prefixes: int = 48
    """llama.cpp sequence ids reserved to keep finished prompts' KV as prefix cache."""

    host_cache_bytes: int = 1 << 30
    """Host RAM for the KV of evicted cached prefixes (kv/host_cache.py): a prompt evicted
    from the KV cells comes back as a copy of a few MB instead of a prefill of a few
    hundred ms. 1 GiB holds about 45,000 tokens of SmolLM2-135M's KV (~23 KB a token),
    some 200 product prompts; 0 turns the tier off. (llama-server's ``--cache-ram``
    defaults to 8 GiB.)"""

    resident_cells: int = 512
    """KV cells in use beyond which cached prefixes leave the pool for the host tier when a
    request ends (least recently used first; with `host_cache_bytes` 0, or with
    `kv_streams`, they stay until their room is needed). In a pool, llama.cpp's attention
    visits every cell up to the highest one in use, so idle prefixes filling the cells made
    every step dearer (docs/engine.md, "Resident cells"); the copy back costs 1-2 ms once
    per request."""

    max_batch_tokens: int = 512
    """Hard cap of tokens in one llama_decode call (decode tokens + prefill chunks)."""

    min_prefill_chunk: int = 32
    """Prefill tokens granted per step even when the TPOT target leaves none, so a
    waiting request always makes progress."""

    block_size: int = 8
    """Tokens per KV block: the unit of prefix hashing and of KV accounting. Only full
    blocks are reused, so a warm prompt recomputes up to block_size - 1 shared tokens;
    the KV itself lives in llama.cpp's cells, so small blocks cost only bookkeeping
    (measured warm TTFT, bench/engine.py single stream: 119 ms at 16, 86-99 ms at 8 or 4)."""

    tpot_target_s: float = 0.040
    """Time-per-output-token the adaptive batch window holds the step time under."""

    max_step_s: float = 0.1
    """Longest prefill-only step (nobody decoding): bounds how long a newly arrived
    request waits for the engine thread to look at it."""

    min_output_tokens: int = 12
    """Tokens a request must be able to produce before its deadline to be admitted:
    about one short sentence, the least explanation worth streaming."""

    deadline_margin: float = 0.9
    """Share of a request's remaining time the step budget may plan with; the rest
    absorbs step times above the fitted prediction."""

    default_deadline_s: float | None = None
    """Deadline applied to requests that bring none (the server-wide latency
    objective); None means requests without a deadline are never refused for time."""

    warm_prefix_on_refusal: bool = True
    """After refusing a request for its deadline, prefill its prompt's full blocks at
    low priority, so the next question about the same product hits the prefix cache."""

    warm_after_refusals: int = 1
    """Refusals of the same prompt prefix before it is warmed (into idle time only). It was
    2 while idle prefixes lived in the KV cells: warming the long tail then evicted the best
    sellers' prompts from them within seconds. Since `resident_cells` moves idle prefixes to
    the host tier anyway, a warmed prefix displaces nothing in the cells; on the 2-core
    Zen 3 EPYC, four sweeps of bench/engine.py: 45 against 40 requests in time at 1 a
    second (ahead of llama-server in each draw), 45 against 40 at 2, 64 against 71 at 4,
    76 against 79 at 8 (docs/benchmarks.md)."""

    max_sequences_per_tenant: int | None = None
    """Running interactive requests one tenant may hold while another tenant's request of the
    same class waits; None means half of max_sequences (at least 1). Work-conserving:
    a tenant alone may fill every slot, since a slot left empty helps nobody, but once
    another tenant waits, the capped tenant's next requests wait behind it. Half, so
    two contending tenants split the batch and a tenant that arrives while another
    holds the batch finds a slot as soon as the other drops under its half. Running
    requests are never preempted for it (see docs/engine.md, "Fair share between
    tenants")."""

    tenant_prompt_weight: float = 1.0
    """Service a tenant is charged per prompt token computed for it (the prefix cache's
    tokens are free): w_p of the virtual token counter."""

    tenant_output_weight: float = 2.0
    """Service charged per generated token: w_q, twice w_p as in the VTC paper (and as
    API prices rate output against input): a prompt token is one row of a batched
    prefill, a generated token holds a sequence slot for a whole step."""

    max_waiting: int = 256
    """Queue length beyond which new requests are refused instead of queued."""

    max_background_waiting: int = 64
    """Background requests waiting (not holding KV) beyond which new ones are refused
    with "queue_full". Their own limit: background never counts against max_waiting
    of interactive requests."""

    max_background_step_s: float = 0.03
    """Longest step that carries background work, by the background step-time model: a
    interactive request that arrives meanwhile waits at most about this long for the engine
    thread (a background step is never shared with interactive work)."""

    min_background_step_tokens: int = 16
    """Tokens a background step may carry whatever max_background_step_s says. A step's
    fixed cost is paid once per step whatever it carries: on one thread of a 2.1-GHz Xeon
    it is most of 30 ms, so that limit alone leaves one token a step, one explanation in
    flight and the store growing by a few explanations a minute under traffic."""

    expected_length_quantile: float = 0.9
    """Quantile of recent answers' lengths that the ``complete`` deadline policy prices
    (at most max_tokens); a request that runs longer stops at a sentence end."""

    n_threads: int = 2
    """llama.cpp threads for every step that carries interactive work."""

    background_threads: int = 1
    """llama.cpp threads for steps that carry only background work: on a 2-core machine
    the HTTP thread keeps a core while the engine generates ahead of demand."""

    flash_attn: bool = True
    """llama.cpp's CPU flash-attention kernel skips KV cells masked out for a token, so
    with a unified KV full of other sequences' prompts a step attends only to its own
    sequence: measured on SmolLM2-135M, 2 threads, 3,664 of 4,096 cells in use by other
    sequences, one decode step took 19.4 ms without it and 8.5 ms with it (7.8 / 7.2 ms
    on an empty cache); a 64-token prefill 428 vs 196 ms (docs/engine.md)."""

    extra_buffer_types: bool = True
    """llama.cpp's extra weight buffers (repack, AMX), llama.cpp's default, so kernels
    match llama-cpp-python's. Turn off when llama.cpp was built with AMX for a VM that
    advertises AMX without enabling it (llama_decode then dies with SIGILL)."""

    seed: int = 0
    """Seed for requests that ask for sampling without a seed of their own (0 = random)."""

    def __post_init__(self) -> None:
        if self.context_size < self.block_size * 2:
            raise ValueError("context_size must hold at least two blocks")
        if self.kv_streams and self.context_size % self.num_seq_ids:
            raise ValueError("with kv_streams, context_size must split evenly among sequence ids")
        if self.sequence_cells < self.block_size * 2:
            raise ValueError("a sequence must be able to hold at least two blocks")
        if not 1 <= self.min_sequences <= self.max_sequences:
            raise ValueError("need 1 <= min_sequences <= max_sequences")
        if self.max_sequences + self.max_cached_prefixes > 256:
            raise ValueError("llama.cpp allows at most 256 sequence ids")
        if self.host_cache_bytes < 0:
            raise ValueError("host_cache_bytes must not be negative")
        if self.resident_cells < 0:
            raise ValueError("resident_cells must not be negative")
        if self.max_batch_tokens < self.max_sequences + 1:
            raise ValueError("max_batch_tokens must exceed max_sequences")
        if self.min_prefill_chunk < 1 or self.block_size < 1:
            raise ValueError("min_prefill_chunk and block_size must be positive")
        if self.tpot_target_s <= 0:
            raise ValueError("tpot_target_s must be positive")
        if not 0 < self.deadline_margin <= 1:
            raise ValueError("deadline_margin must be in (0, 1]")
        if self.n_threads < 1 or self.background_threads < 1:
            raise ValueError("n_threads and background_threads must be positive")
        if self.min_background_step_tokens < 1:
            raise ValueError("min_background_step_tokens must be positive")
        if self.max_background_step_s <= 0 or self.max_background_waiting < 0:
            raise ValueError("max_background_step_s must be positive, its queue not negative")
        if not 0 < self.expected_length_quantile < 1:
            raise ValueError("expected_length_quantile must be in (0, 1)")
        if self.max_sequences_per_tenant is not None and self.max_sequences_per_tenant < 1:
            raise ValueError("max_sequences_per_tenant must be at least 1")
        if self.tenant_prompt_weight < 0 or self.tenant_output_weight < 0:
            raise ValueError("tenant weights must not be negative")

    @property
    def resident_blocks(self) -> int | None:
        """`resident_cells` in blocks, None where it does not apply (`kv_streams`, or no
        host tier to keep the prefixes it moves out)."""
        if self.kv_streams or not self.host_cache_bytes:
            return None
        return self.resident_cells // self.block_size

    @property
    def num_blocks(self) -> int:
        return self.context_size // self.block_size

    @property
    def sequence_cells(self) -> int:
        """KV cells one sequence can fill: its stream's share, or the whole pool."""
        if self.kv_streams:
            return self.context_size // self.num_seq_ids
        return self.context_size

    @property
    def num_seq_ids(self) -> int:
        return self.max_sequences + self.max_cached_prefixes

    @property
    def tenant_sequences(self) -> int:
        """max_sequences_per_tenant with its default applied."""
        if self.max_sequences_per_tenant is not None:
            return self.max_sequences_per_tenant
        return max(1, self.max_sequences // 2)
