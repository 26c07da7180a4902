"""A fake model runner that behaves like llama.cpp's unified KV cache.

Each sequence id maps to a list of cell ids; ``copy_prefix`` shares cells (as
llama_memory_seq_cp tags them), ``truncate`` drops them, and ``step`` checks that every
chunk continues its sequence at the right position, as llama_decode does. The "model"
is a deterministic function of the whole token history of a sequence, so outputs
depend on the prefix exactly as a real model's would.
"""

from __future__ import annotations

import hashlib
import itertools
import threading
import time
from array import array
from collections.abc import Mapping, Sequence

from worthit.engine.scheduler import Chunk
from worthit.engine.sequence import SamplingParams

EOG = 0
ALPHABET = "abcdefgh ."


class FakeRunner:
    model_id = "fake-model"
    chat_template: str | None = None
    bos_text = ""
    eos_text = "<eos>"

    def __init__(
        self,
        n_ctx: int = 4096,
        eog_every: int | None = None,
        step_delay_s: tuple[float, float] | None = None,
    ) -> None:
        self.n_ctx = n_ctx
        self.step_delay_s = step_delay_s
        """(overhead, per token) seconds each step sleeps, to act like a real model."""
        self.kv: dict[int, list[int]] = {}
        self.tokens: dict[int, int] = {}
        """cell id -> token at that cell."""
        self._cell_ids = itertools.count(1)
        self.eog_every = eog_every
        self.steps: list[list[tuple[int, int, int, bool]]] = []
        """Per step: (seq_id, start, n_tokens, sample) of each chunk."""
        self.step_requests: list[list[str]] = []
        """Per step: the request id of each chunk."""
        self.threads = 0
        """What set_threads last set (0: never called)."""
        self.step_threads: list[int] = []
        """Per step: the thread count it ran with."""
        self.thread_changes = 0
        self.samplers_alive = 0
        self.closed = False
        self.restores = 0
        """Prefixes restored from host RAM."""
        self.refuse_restores = False
        """Make restore fail, as llama.cpp does when it finds no cells."""

    # text: one token per character, token = code point + 1 (0 is EOG)
    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        return [ord(c) + 1 for c in text]

    def piece(self, token: int) -> bytes:
        return chr(token - 1).encode("utf-8") if token > 0 else b""

    def is_eog(self, token: int) -> bool:
        return token == EOG

    def new_sampler(self, params: SamplingParams, default_seed: int) -> object:
        self.samplers_alive += 1
        return object()

    def free_sampler(self, sampler: object) -> None:
        self.samplers_alive -= 1

    def copy_prefix(self, src_seq: int, dst_seq: int, n_tokens: int) -> None:
        assert not self.kv.get(dst_seq), f"copy into non-empty sequence {dst_seq}"
        src = self.kv.get(src_seq, [])
        assert len(src) >= n_tokens, "copy of positions the source does not hold"
        self.kv[dst_seq] = src[:n_tokens]

    def truncate(self, seq_id: int, n_tokens: int) -> None:
        cells = self.kv.get(seq_id, [])
        del cells[n_tokens:]
        if not cells:
            self.kv.pop(seq_id, None)

    def save(self, seq_id: int) -> bytes:
        return array("i", [self.tokens[cell] for cell in self.kv.get(seq_id, [])]).tobytes()

    def restore(self, seq_id: int, data: bytes, share_from: int | None, shared: int) -> bool:
        assert not self.kv.get(seq_id), f"restore into non-empty sequence {seq_id}"
        if self.refuse_restores:
            return False
        self.restores += 1
        cells = []
        for token in array("i", data):
            cell = next(self._cell_ids)
            self.tokens[cell] = token
            cells.append(cell)
        if share_from is not None and shared:
            source = self.kv[share_from][:shared]
            assert [self.tokens[c] for c in source] == [self.tokens[c] for c in cells[:shared]]
            cells[:shared] = source
        self.kv[seq_id] = cells
        assert self.used_cells() <= self.n_ctx, "KV overflow"
        return True

    def set_threads(self, n_threads: int) -> None:
        if n_threads != self.threads:
            self.thread_changes += 1
        self.threads = n_threads

    def used_cells(self) -> int:
        return len({cell for cells in self.kv.values() for cell in cells})

    def step(self, chunks: Sequence[Chunk], samplers: Mapping[int, object]) -> dict[int, int]:
        out: dict[int, int] = {}
        self.steps.append([(c.seq_id, c.start, len(c.tokens), c.sample) for c in chunks])
        self.step_requests.append([c.seq.request_id if c.seq else "" for c in chunks])
        self.step_threads.append(self.threads)
        seen: set[int] = set()
        for chunk in chunks:
            assert chunk.seq_id not in seen, "sequence twice in one batch"
            seen.add(chunk.seq_id)
            cells = self.kv.setdefault(chunk.seq_id, [])
            assert chunk.start == len(cells), (
                f"seq {chunk.seq_id}: chunk starts at {chunk.start}, KV holds {len(cells)}"
            )
            for token in chunk.tokens:
                cell = next(self._cell_ids)
                self.tokens[cell] = token
                cells.append(cell)
            if chunk.sample:
                assert chunk.seq_id in samplers, f"seq {chunk.seq_id}: sampled without a sampler"
                out[chunk.seq_id] = self._next(cells)
        assert self.used_cells() <= self.n_ctx, "KV overflow"
        if self.step_delay_s is not None:
            overhead, per_token = self.step_delay_s
            time.sleep(overhead + per_token * sum(len(c.tokens) for c in chunks))
        return out

    def _next(self, cells: list[int]) -> int:
        history = [self.tokens[c] for c in cells]
        digest = hashlib.blake2b(repr(history).encode(), digest_size=4).digest()
        value = int.from_bytes(digest, "little")
        if self.eog_every and value % self.eog_every == 0:
            return EOG
        return ord(ALPHABET[value % len(ALPHABET)]) + 1

    def close(self) -> None:
        self.closed = True


def reference_output(prompt: Sequence[int], n: int, eog_every: int | None = None) -> list[int]:
    """What FakeRunner generates greedily for prompt, computed without any engine."""
    runner = FakeRunner(eog_every=eog_every)
    cells = list(prompt)
    out: list[int] = []
    for _ in range(n):
        digest = hashlib.blake2b(repr(cells).encode(), digest_size=4).digest()
        value = int.from_bytes(digest, "little")
        if runner.eog_every and value % runner.eog_every == 0:
            break
        token = ord(ALPHABET[value % len(ALPHABET)]) + 1
        out.append(token)
        cells.append(token)
    return out


class ScriptedRunner(FakeRunner):
    """Generates a fixed text after any prompt (to steer sentence ends), then EOG; or,
    with ``scripts``, the text of the first key the prompt contains."""

    def __init__(
        self, script: str = "", n_ctx: int = 4096, scripts: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(n_ctx=n_ctx)
        self.script = [ord(c) + 1 for c in script]
        self.scripts = {key: [ord(c) + 1 for c in text] for key, text in (scripts or {}).items()}
        self.prompt_len: dict[int, int] = {}
        self.script_of: dict[int, list[int]] = {}
        self._owner: dict[int, object] = {}

    def step(self, chunks: Sequence[Chunk], samplers: Mapping[int, object]) -> dict[int, int]:
        for chunk in chunks:
            if self._owner.get(chunk.seq_id) is not chunk.seq:
                self._owner[chunk.seq_id] = chunk.seq
                self.prompt_len[chunk.seq_id] = len(chunk.seq.prompt_tokens)
                prompt = "".join(chr(t - 1) for t in chunk.seq.prompt_tokens)
                keys = [key for key in self.scripts if key in prompt]
                self.script_of[chunk.seq_id] = self.scripts[keys[0]] if keys else self.script
        return super().step(chunks, samplers)

    def _next(self, cells: list[int]) -> int:
        seq_id = next(s for s, c in self.kv.items() if c is cells)
        i = len(cells) - self.prompt_len[seq_id]
        script = self.script_of[seq_id]
        return script[i] if i < len(script) else EOG


PROBES = ("calibration", "probe")
"""Request ids of the engine's own timed steps (timing/step_calibration.py)."""


class GatedRunner(FakeRunner):
    """Holds every step after the first one that samples a request's token until
    ``release()``, so a test can act between two steps without racing the worker thread.
    The calibration's and the idle engine's probe steps sample too, and are let through."""

    def __init__(self, n_ctx: int = 4096, armed: bool = True) -> None:
        super().__init__(n_ctx=n_ctx)
        self.armed = armed
        self.sampled = False
        self.gate = threading.Event()

    def arm(self) -> None:
        """Hold the steps after the next one that samples."""
        self.sampled = False
        self.armed = True

    def release(self) -> None:
        self.gate.set()

    def step(self, chunks: Sequence[Chunk], samplers: Mapping[int, object]) -> dict[int, int]:
        if self.armed and self.sampled:
            assert self.gate.wait(10), "test never released the runner"
        out = super().step(chunks, samplers)
        probe = all(c.seq is not None and c.seq.request_id in PROBES for c in chunks)
        self.sampled = self.sampled or (bool(out) and not probe)
        return out
