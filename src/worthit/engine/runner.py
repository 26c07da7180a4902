"""The llama.cpp context, driven through llama-cpp-python's low-level C bindings.

The runner executes what the scheduler decided and nothing else: one ``llama_decode``
per step over a batch that mixes decode tokens and prefill chunks of many sequences,
then one sample per sequence that asked for logits, on the thread count the engine
sets for the step (fewer for background work). It also implements the KV memory
operations the block manager needs (sharing, truncating, and copying a sequence's KV
out to host RAM and back). Only the engine thread calls ``step`` and
the memory operations; tokenisation and sampler creation are safe from any thread.
"""

from __future__ import annotations

import ctypes
import logging
import secrets
import threading
from collections.abc import Mapping
from collections.abc import Sequence as Seq
from pathlib import Path
from typing import Any, Protocol

import llama_cpp.llama_cpp as llama

from worthit.engine.config import EngineConfig
from worthit.engine.errors import EngineError, ModelLoadError
from worthit.engine.scheduler import Chunk
from worthit.engine.sequence import SamplingParams

_backend_lock = threading.Lock()
_backend_ready = False

_token_arrays: dict[int, type[ctypes.Array[Any]]] = {}
"""ctypes array types for token buffers, one per power-of-two capacity. ctypes keeps a
`llama_token * n` type only while something holds it, and a type is a reference cycle:
a buffer per prompt length left a type (seven objects) per live request on the
server's event loop for the cyclic collector to free."""


def _token_buffer(size: int) -> ctypes.Array[Any]:
    """A zeroed buffer of at least `size` llama tokens."""
    capacity = max(64, 1 << (size - 1).bit_length())
    array = _token_arrays.get(capacity)
    if array is None:
        array = _token_arrays.setdefault(capacity, llama.llama_token * capacity)
    return array()


def init_backend() -> None:
    """llama_backend_init is process-wide; do it once, and quiet llama.cpp's logging,
    which llama-cpp-python routes through this Python logger."""
    global _backend_ready
    with _backend_lock:
        if not _backend_ready:
            llama.llama_backend_init()
            logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)
            _backend_ready = True


class Runner(Protocol):
    """What the engine needs from a model runner; tests pass a fake."""

    model_id: str
    chat_template: str | None
    bos_text: str
    eos_text: str

    def tokenize(self, text: str, add_special: bool = True) -> list[int]: ...
    def piece(self, token: int) -> bytes: ...
    def is_eog(self, token: int) -> bool: ...
    def new_sampler(self, params: SamplingParams, default_seed: int) -> object: ...
    def free_sampler(self, sampler: object) -> None: ...
    def copy_prefix(self, src_seq: int, dst_seq: int, n_tokens: int) -> None: ...
    def truncate(self, seq_id: int, n_tokens: int) -> None: ...
    def save(self, seq_id: int) -> bytes: ...
    def restore(self, seq_id: int, data: bytes, share_from: int | None, shared: int) -> bool: ...
    def set_threads(self, n_threads: int) -> None: ...
    def step(self, chunks: Seq[Chunk], samplers: Mapping[int, object]) -> dict[int, int]: ...
    def close(self) -> None: ...


class DecodeError(EngineError):
    """llama_decode failed; the engine fails the step's requests."""


class LlamaRunner:
    def __init__(
        self, model_path: str | Path, config: EngineConfig, lora_path: str | Path | None = None
    ) -> None:
        """`lora_path`: a LoRA adapter in GGUF (llama.cpp's convert_lora_to_gguf.py), applied
        at full scale to every request; it must have been trained on this very base model."""
        path = Path(model_path)
        if not path.is_file():
            raise ModelLoadError(f"model file not found: {path}")
        lora = None if lora_path is None else Path(lora_path)
        if lora is not None and not lora.is_file():
            raise ModelLoadError(f"LoRA adapter not found: {lora}")
        init_backend()
        model_params = llama.llama_model_default_params()
        model_params.use_extra_bufts = config.extra_buffer_types
        self._model = llama.llama_model_load_from_file(str(path).encode(), model_params)
        if not self._model:
            raise ModelLoadError(f"llama.cpp could not load {path}")
        self._vocab = llama.llama_model_get_vocab(self._model)

        params = llama.llama_context_default_params()
        params.n_ctx = config.context_size
        params.n_batch = config.max_batch_tokens
        params.n_ubatch = config.max_batch_tokens
        params.n_seq_max = config.num_seq_ids
        params.kv_unified = not config.kv_streams
        params.n_threads = config.n_threads
        params.n_threads_batch = config.n_threads
        params.flash_attn_type = (
            llama.LLAMA_FLASH_ATTN_TYPE_ENABLED
            if config.flash_attn
            else llama.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        params.no_perf = True
        self._threads = config.n_threads
        self._ctx = llama.llama_init_from_model(self._model, params)
        if not self._ctx:
            llama.llama_model_free(self._model)
            raise ModelLoadError("llama.cpp could not create a context")
        self._adapter = None
        if lora is not None:
            self._adapter = llama.llama_adapter_lora_init(self._model, str(lora).encode())
            adapters = (llama.llama_adapter_lora_p_ctypes * 1)(self._adapter)
            scales = (ctypes.c_float * 1)(1.0)
            if not self._adapter or llama.llama_set_adapters_lora(self._ctx, adapters, 1, scales):
                self.close_native()
                raise ModelLoadError(f"llama.cpp could not apply the LoRA adapter {lora}")
        self.lora_path = lora
        self._mem = llama.llama_get_memory(self._ctx)
        self._batch = llama.llama_batch_init(config.max_batch_tokens, 0, 1)
        self._batch_size = config.max_batch_tokens
        self.n_ctx = llama.llama_n_ctx(self._ctx)
        self._streams = config.kv_streams
        cells = llama.llama_n_ctx_seq(self._ctx)
        if cells < config.sequence_cells:
            self.close_native()
            raise ModelLoadError(
                f"llama.cpp gave a sequence {cells} KV cells, not {config.sequence_cells}"
            )
        self._pieces: dict[int, bytes] = {}
        self._eog: dict[int, bool] = {}
        self.model_path = path
        self.model_id = path.name if lora is None else f"{path.name}+{lora.name}"
        """What /v1/models lists: with an adapter, a peer's text is not taken for the bare
        model's (the explanation store keys on it for a remote engine)."""
        self.chat_template = self._meta("tokenizer.chat_template")
        self.model_name = self._meta("general.name") or self.model_id
        self.bos_text = self._token_text(llama.llama_vocab_bos(self._vocab))
        self.eos_text = self._token_text(llama.llama_vocab_eos(self._vocab))
        self._closed = False

    # -- text -------------------------------------------------------------------

    def tokenize(self, text: str, add_special: bool = True) -> list[int]:
        """Tokens of text; special tokens written in it (chat markup) are parsed."""
        data = text.encode("utf-8")
        buf = _token_buffer(len(data) + 8)
        n = llama.llama_tokenize(self._vocab, data, len(data), buf, len(buf), add_special, True)
        if n < 0:
            buf = _token_buffer(-n)
            n = llama.llama_tokenize(self._vocab, data, len(data), buf, len(buf), add_special, True)
        return list(buf[:n])

    def piece(self, token: int) -> bytes:
        """Bytes of one token (special tokens render empty); may be part of a character."""
        cached = self._pieces.get(token)
        if cached is None:
            buf = ctypes.create_string_buffer(64)
            n = llama.llama_token_to_piece(self._vocab, token, buf, 64, 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = llama.llama_token_to_piece(self._vocab, token, buf, -n, 0, False)
            cached = buf.raw[:n]
            self._pieces[token] = cached
        return cached

    def is_eog(self, token: int) -> bool:
        eog = self._eog.get(token)
        if eog is None:
            eog = bool(llama.llama_vocab_is_eog(self._vocab, token))
            self._eog[token] = eog
        return eog

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        text: bytes | None = llama.llama_vocab_get_text(self._vocab, token)
        return (text or b"").decode("utf-8", errors="replace")

    def _meta(self, key: str) -> str | None:
        size = 1 << 16
        buf = ctypes.create_string_buffer(size)
        n = llama.llama_model_meta_val_str(self._model, key.encode(), buf, size)
        if n < 0:
            return None
        return buf.value.decode("utf-8", errors="replace")

    # -- sampling ----------------------------------------------------------------

    def new_sampler(self, params: SamplingParams, default_seed: int) -> object:
        """A llama.cpp sampler chain per request: top-k, top-p, temperature, then a
        seeded draw; greedy when temperature is 0."""
        chain = llama.llama_sampler_chain_init(llama.llama_sampler_chain_default_params())
        if params.temperature == 0:
            llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_greedy())
            return chain
        if params.top_k > 0:
            llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_top_k(params.top_k))
        if params.top_p < 1.0:
            llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_top_p(params.top_p, 1))
        llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_temp(params.temperature))
        seed = params.seed if params.seed is not None else default_seed
        if not seed:
            seed = secrets.randbits(32) or 1
        llama.llama_sampler_chain_add(chain, llama.llama_sampler_init_dist(seed & 0xFFFFFFFF))
        return chain

    def free_sampler(self, sampler: object) -> None:
        llama.llama_sampler_free(sampler)

    # -- KV memory (BlockManager's KVMemory) --------------------------------------------

    def copy_prefix(self, src_seq: int, dst_seq: int, n_tokens: int) -> None:
        """In one pool, a tag on the cells; between streams llama.cpp copies only whole
        streams (at the next decode), so the copy is cut back to the prefix."""
        if not self._streams:
            llama.llama_memory_seq_cp(self._mem, src_seq, dst_seq, 0, n_tokens)
            return
        llama.llama_memory_seq_cp(self._mem, src_seq, dst_seq, -1, -1)
        self.truncate(dst_seq, n_tokens)

    def truncate(self, seq_id: int, n_tokens: int) -> None:
        if not llama.llama_memory_seq_rm(self._mem, seq_id, n_tokens, -1):
            raise DecodeError(f"llama.cpp refused to truncate sequence {seq_id}")

    def save(self, seq_id: int) -> bytes:
        size = llama.llama_state_seq_get_size(self._ctx, seq_id)
        buf = (ctypes.c_uint8 * size)()
        written = llama.llama_state_seq_get_data(self._ctx, buf, size, seq_id)
        return bytes(memoryview(buf)[:written])

    def restore(self, seq_id: int, data: bytes, share_from: int | None, shared: int) -> bool:
        """In one pool the restored copy of the shared positions is dropped for a tag on
        share_from's cells, so a block stays one set of cells; streams copy anyway."""
        buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        if not llama.llama_state_seq_set_data(self._ctx, buf, len(data), seq_id):
            llama.llama_memory_seq_rm(self._mem, seq_id, -1, -1)
            return False
        if share_from is not None and shared and not self._streams:
            llama.llama_memory_seq_rm(self._mem, seq_id, 0, shared)
            llama.llama_memory_seq_cp(self._mem, share_from, seq_id, 0, shared)
        return True

    def seq_pos_max(self, seq_id: int) -> int:
        """Last position in seq_id's KV, -1 when it holds none (tests use this)."""
        return int(llama.llama_memory_seq_pos_max(self._mem, seq_id))

    # -- compute -------------------------------------------------------------------

    def set_threads(self, n_threads: int) -> None:
        """Threads for the next steps (decode and batch alike). Called before every step,
        so it reaches llama.cpp only when the count changes."""
        if n_threads != self._threads:
            llama.llama_set_n_threads(self._ctx, n_threads, n_threads)
            self._threads = n_threads

    def step(self, chunks: Seq[Chunk], samplers: Mapping[int, object]) -> dict[int, int]:
        """One llama_decode over every chunk; a sampled token per chunk that asked,
        drawn with the sampler the engine keeps for its sequence id."""
        batch: Any = self._batch
        i = 0
        outputs: list[tuple[int, int, object]] = []
        if self._streams:
            # Across streams llama.cpp puts sequences in one ubatch only while their ids
            # run on by one in batch order; any other order splits the step into more
            # ubatches, each reading every weight again.
            chunks = sorted(chunks, key=lambda chunk: chunk.seq_id)
        for chunk in chunks:
            seq_id = chunk.seq_id
            pos = chunk.start
            for token in chunk.tokens:
                batch.token[i] = token
                batch.pos[i] = pos
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = seq_id
                batch.logits[i] = 0
                i += 1
                pos += 1
            if chunk.sample:
                batch.logits[i - 1] = 1
                outputs.append((seq_id, i - 1, samplers[seq_id]))
        if i == 0:
            return {}
        if i > self._batch_size:
            raise DecodeError(f"batch of {i} tokens exceeds {self._batch_size}")
        batch.n_tokens = i
        rc = llama.llama_decode(self._ctx, batch)
        if rc != 0:
            raise DecodeError(f"llama_decode returned {rc}")
        return {
            seq_id: int(llama.llama_sampler_sample(sampler, self._ctx, index))
            for seq_id, index, sampler in outputs
        }

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        llama.llama_batch_free(self._batch)
        self.close_native()

    def close_native(self) -> None:
        """The context, then the adapter, then the model: each holds on to the next."""
        llama.llama_free(self._ctx)
        if self._adapter:
            llama.llama_adapter_lora_free(self._adapter)
        llama.llama_model_free(self._model)
