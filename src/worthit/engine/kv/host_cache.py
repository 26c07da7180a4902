"""A second tier of the prefix cache: the KV of evicted prefixes, kept in host RAM.

The KV cells hold only a few dozen prompts (4,096 cells against 150-250-token product
prompts); a prompt evicted from them costs its whole prefill again when its product
is asked about next, about 300 ms on a 2-core host. Copied out of llama.cpp at
eviction (``llama_state_seq_get_data``, ~28 KB a token for SmolLM2-135M) and back in at
reuse (``llama_state_seq_set_data``), the same prefix costs a memory copy of a few MB,
a millisecond or two. llama-server keeps such a tier (``--cache-ram``); this one is
bounded by bytes, least recently used first to go.

A stored prefix is found by any of its blocks' chained hashes (block_manager.py): a
request ends with its answer in the cached prefix, and the next question about the
same product shares only the part before the question. Its tokens are kept, and a
match must equal them. The engine thread writes; other threads only read (estimates
at submission), which dict reads allow.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass

from worthit.text.lru import LRU


@dataclass(frozen=True)
class StoredPrefix:
    chain: tuple[int, ...]
    """The chained hash of each of its blocks."""
    tokens: tuple[int, ...]
    data: bytes
    """llama.cpp's serialised KV of one sequence holding exactly these tokens."""


@dataclass(frozen=True)
class Match:
    blocks: int
    """Blocks of the request's prompt the stored prefix covers."""
    entry: StoredPrefix
    """What to restore (possibly longer: the restored sequence is cut to `blocks`)."""


class HostPrefixCache:
    """Stored prefixes within `capacity_bytes`; 0 disables the tier."""

    def __init__(self, capacity_bytes: int) -> None:
        if capacity_bytes < 0:
            raise ValueError("capacity_bytes must not be negative")
        self.capacity_bytes = capacity_bytes
        self._entries: LRU[int, StoredPrefix] = LRU(sys.maxsize)
        """By the hash of the last block."""
        self._index: dict[int, int] = {}
        """Block hash -> key of the latest entry that holds the block."""
        self.bytes_used = 0
        self.stored = 0
        """Prefixes written in since start."""
        self.restored = 0
        """Prefixes handed back to the KV since start."""

    @property
    def enabled(self) -> bool:
        return self.capacity_bytes > 0

    def __len__(self) -> int:
        return len(self._entries)

    def holds(self, block: int) -> bool:
        """Whether some stored prefix covers the block with this chained hash."""
        return block in self._index

    def longest(self, chain: Sequence[int], tokens: Sequence[int], *, use: bool) -> Match | None:
        """The stored prefix covering most of `tokens`, whose block hashes are `chain`.
        use=True counts it a use (the engine thread restoring it); False leaves the
        order alone, for estimates from any thread."""
        if not self._entries:
            return None
        for n in range(len(chain), 0, -1):
            key = self._index.get(chain[n - 1])
            entry = None if key is None else self._entries.peek(key)
            if entry is None or len(entry.chain) < n or entry.chain[n - 1] != chain[n - 1]:
                continue
            size = len(entry.tokens) // len(entry.chain)
            if entry.tokens[: n * size] != tuple(tokens[: n * size]):
                continue
            if use:
                self._entries.get(entry.chain[-1])
            return Match(n, entry)
        return None

    def put(self, chain: Sequence[int], tokens: Sequence[int], data: bytes) -> None:
        """Store a prefix, dropping a stored one it extends and then the least recently
        used beyond the byte budget. One larger than the whole budget is not stored."""
        if not self.enabled or not chain or len(data) > self.capacity_bytes:
            return
        for block in chain:
            key = self._index.get(block)
            shorter = None if key is None else self._entries.peek(key)
            if shorter is not None and shorter.chain[-1] == block:
                self._drop(key)  # type: ignore[arg-type]
        entry = StoredPrefix(tuple(chain), tuple(tokens), data)
        self._entries.put(entry.chain[-1], entry)
        for block in entry.chain:
            self._index[block] = entry.chain[-1]
        self.bytes_used += len(data)
        self.stored += 1
        while self.bytes_used > self.capacity_bytes:
            self._drop(next(iter(self._entries)))

    def discard(self, entry: StoredPrefix) -> None:
        """Forget a prefix that failed to restore, so it is not tried again."""
        if self._entries.peek(entry.chain[-1]) is entry:
            self._drop(entry.chain[-1])

    def clear(self) -> None:
        self._entries.clear()
        self._index.clear()
        self.bytes_used = 0

    def _drop(self, key: int) -> None:
        gone = self._entries.pop(key)
        if gone is None:
            return
        self.bytes_used -= len(gone.data)
        for block in gone.chain:
            if self._index.get(block) == key:
                del self._index[block]
