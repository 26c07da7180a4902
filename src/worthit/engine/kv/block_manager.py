"""KV blocks, prefix sharing and eviction over llama.cpp's unified KV cache.

llama.cpp tags every KV cell with the set of sequence ids that see it, so sharing a
prefix is ``llama_memory_seq_cp`` (a tag, no copy, no recompute) and a cell is freed
when its last tag is removed. This module mirrors those tags in blocks of
``block_size`` positions, as vLLM and nano-vllm do:

* a full block computed by some sequence gets a hash chained with its parent block's
  hash, and is indexed by it; a new request walks its prompt's chain of hashes and
  copies the longest indexed prefix from any sequence that holds it;
* a block's holders are the sequence ids whose KV includes it (its reference count);
  the blocks with at least one holder are the KV in use, which is what admission and
  preemption count;
* when a request ends, its indexed prefix stays in the KV under its sequence id,
  which becomes a *cached prefix*; cached prefixes are evicted least recently used
  first when KV blocks or sequence ids run out. What background work leaves is filed
  as least recently used and marked, until a request reuses it, so that interactive work can
  evict those alone before it preempts paused background sequences for KV.

With `EngineConfig.kv_streams` each sequence id has a stream of its own and `seq_cp`
between streams is a copy (`LlamaRunner.copy_prefix`); the bookkeeping is the same, a
shared block then standing for one copy in each holder's stream.

Invariant: a sequence that holds block k holds blocks 0..k-1 of the same chain, since
llama.cpp positions of a sequence always run from 0.
"""

from __future__ import annotations

import hashlib
import itertools
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from worthit.engine.kv.host_cache import HostPrefixCache, StoredPrefix
from worthit.text.lru import LRU


class KVMemory(Protocol):
    """The llama.cpp memory operations the block manager needs."""

    def copy_prefix(self, src_seq: int, dst_seq: int, n_tokens: int) -> None:
        """Let dst see src's KV for positions [0, n_tokens)."""

    def truncate(self, seq_id: int, n_tokens: int) -> None:
        """Drop seq_id's KV from position n_tokens on (0 drops it all)."""

    def save(self, seq_id: int) -> bytes:
        """seq_id's KV, serialised (llama_state_seq_get_data)."""

    def restore(self, seq_id: int, data: bytes, share_from: int | None, shared: int) -> bool:
        """Give the empty seq_id the KV that `save` wrote, then let its first `shared`
        positions be the cells share_from holds (the in-KV part of the prefix, which
        other sequences see already). False when llama.cpp could not place it; seq_id
        then holds nothing."""


def block_hash(parent: int | None, tokens: Sequence[int]) -> int:
    """Content hash of a block, chained with its parent's so equal blocks at different
    places in different prompts never match."""
    digest = hashlib.blake2b(digest_size=8)
    digest.update((parent or 0).to_bytes(8, "little"))
    digest.update(array("i", tokens).tobytes())
    return int.from_bytes(digest.digest(), "little")


@dataclass(eq=False)
class Block:
    index: int
    """Covers positions [index * block_size, (index + 1) * block_size)."""
    hash: int | None = None
    tokens: tuple[int, ...] = ()
    holders: set[int] = field(default_factory=set)


class BlockManager:
    def __init__(
        self,
        num_blocks: int,
        block_size: int,
        num_seq_ids: int,
        kv: KVMemory,
        host: HostPrefixCache | None = None,
        resident_blocks: int | None = None,
    ):
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.num_seq_ids = num_seq_ids
        self._kv = kv
        self.host = host if host is not None else HostPrefixCache(0)
        """Where a cached prefix that interactive work left goes when it is evicted, and
        where admit finds it again (host_cache.py)."""
        self.resident_blocks = resident_blocks
        """Blocks in use beyond which a request's end moves cached prefixes to host RAM
        (None: they stay until their room is needed). llama.cpp's attention visits every
        cell up to the highest one in use, so an idle prefix in the cells makes every
        decode step dearer; from host RAM it comes back in a copy of a millisecond or two."""
        self.tables: dict[int, list[Block]] = {}
        self._free_ids: list[int] = list(range(num_seq_ids - 1, -1, -1))
        self._cached: LRU[int, bool] = LRU(num_seq_ids)
        """Cached prefixes: seq_id -> left by background work and not reused since. Each
        holds a sequence id, so it never outgrows its capacity and forgets nothing by
        itself: a prefix goes only through `release`, which gives back its KV."""
        self._by_hash: dict[int, Block] = {}
        self.used_blocks = 0
        self.queried_tokens = 0
        self.hit_tokens = 0

    # -- queries ---------------------------------------------------------------

    @property
    def free_blocks(self) -> int:
        return self.num_blocks - self.used_blocks

    @property
    def usage(self) -> float:
        return self.used_blocks / self.num_blocks

    @property
    def cached_prefixes(self) -> int:
        return len(self._cached)

    def match(self, tokens: Sequence[int], chain: Sequence[int] | None = None) -> list[Block]:
        """Longest indexed prefix of tokens, leaving at least the last token to compute
        (its logits are needed to sample the first output token). chain: tokens' block
        hashes (`_chain`), when the caller has them already."""
        size = self.block_size
        found: list[Block] = []
        for i, h in enumerate(self._chain(tokens) if chain is None else chain):
            block = self._by_hash.get(h)
            if block is None or block.tokens != tuple(tokens[i * size : (i + 1) * size]):
                break
            if not block.holders:
                break
            found.append(block)
        return found

    def is_free(self, seq_id: int) -> bool:
        """Whether seq_id holds nothing (no request, no cached prefix)."""
        return seq_id in self._free_ids

    def cached_prefix_len(self, tokens: Sequence[int]) -> int:
        """Tokens a request would take from the cache, either tier; read-only, for
        estimates (a restore from host RAM costs a copy, not a prefill)."""
        chain = self._chain(tokens)
        in_kv = len(self.match(tokens, chain))
        stored = self.host.longest(chain, tokens, use=False)
        return max(in_kv, stored.blocks if stored else 0) * self.block_size

    def _chain(self, tokens: Sequence[int]) -> list[int]:
        """The chained hashes of tokens' full blocks, leaving the last token out, as
        match walks them."""
        size = self.block_size
        chain: list[int] = []
        parent: int | None = None
        for i in range((len(tokens) - 1) // size):
            parent = block_hash(parent, tokens[i * size : (i + 1) * size])
            chain.append(parent)
        return chain

    # -- lifetime --------------------------------------------------------------

    def admit(self, tokens: Sequence[int]) -> tuple[int, int] | None:
        """Give a request a sequence id with its longest cached prefix already in its
        KV. Returns (seq_id, cached_tokens), or None when every id is busy."""
        seq_id = self._take_id()
        if seq_id is None:
            return None
        self.queried_tokens += len(tokens)
        chain = self._chain(tokens)
        stored = self.host.longest(chain, tokens, use=True)
        blocks = self.match(tokens, chain)
        source = self._source_of(blocks[-1]) if blocks else None
        # The stored copy lands whole before it is cut to length and its shared part
        # is dropped for the cells source holds: it needs room for all of it, and
        # source must stay.
        if (
            stored is not None
            and stored.blocks > len(blocks)
            and self._make_room(len(stored.entry.chain), spare=source)
        ):
            table = self._restore(
                seq_id, tokens, chain[: stored.blocks], stored.entry, blocks, source
            )
        else:
            table = list(blocks)
            if blocks:
                assert source is not None
                self._kv.copy_prefix(source, seq_id, len(blocks) * self.block_size)
        for block in table[: len(blocks)]:
            self._hold(block, seq_id)
        # A use of the whole cached prefix; one that shares only a preamble common to
        # many prompts would otherwise keep whichever prompt it was read from fresh.
        if (
            source is not None
            and source in self._cached
            and len(self.tables[source]) == len(blocks)
        ):
            self._cached.put(source, False)
        self.hit_tokens += len(table) * self.block_size
        self.tables[seq_id] = table
        return seq_id, len(table) * self.block_size

    def _restore(
        self,
        seq_id: int,
        tokens: Sequence[int],
        chain: list[int],
        entry: StoredPrefix,
        blocks: list[Block],
        source: int | None,
    ) -> list[Block]:
        """seq_id's table after restoring entry from host RAM, cut to the blocks whose
        hashes are chain, its first len(blocks) shared with source: the blocks, then new
        ones, held and indexed. Just the blocks, copied as usual, when llama.cpp refuses
        the restore."""
        size = self.block_size
        shared = len(blocks) * size
        if not self._kv.restore(seq_id, entry.data, source, shared):
            self.host.discard(entry)
            if source is not None:
                self._kv.copy_prefix(source, seq_id, shared)
            return list(blocks)
        if len(entry.chain) > len(chain):
            self._kv.truncate(seq_id, len(chain) * size)
        self.host.restored += 1
        table = list(blocks)
        for i in range(len(blocks), len(chain)):
            block = Block(index=i, hash=chain[i], tokens=tuple(tokens[i * size : (i + 1) * size]))
            self._hold(block, seq_id)
            if i == 0 or self._is_indexed(table[i - 1]):
                self._by_hash.setdefault(block.hash, block)  # type: ignore[arg-type]
            table.append(block)
        return table

    def reserve(self, seq_id: int, n_tokens: int, evict_interactive: bool = True) -> bool:
        """Grow seq_id's blocks to cover n_tokens positions, evicting cached prefixes if
        needed (with evict_interactive False, only those background work left). False when the
        KV cannot hold them (the caller preempts or waits)."""
        table = self.tables[seq_id]
        need = -(-n_tokens // self.block_size) - len(table)
        if need <= 0:
            return True
        if not self._make_room(need, evict_interactive):
            return False
        for _ in range(need):
            block = Block(index=len(table))
            self._hold(block, seq_id)
            table.append(block)
        return True

    def commit(self, seq_id: int, tokens: Sequence[int], n_computed: int) -> None:
        """Index the blocks whose KV is now complete, so later requests share them."""
        table = self.tables[seq_id]
        size = self.block_size
        for i in range(min(n_computed // size, len(table))):
            block = table[i]
            if block.hash is not None:
                continue
            parent = table[i - 1] if i else None
            block.tokens = tuple(tokens[i * size : (i + 1) * size])
            block.hash = block_hash(parent.hash if parent else None, block.tokens)
            # Index a block only on top of an indexed parent: a chain found by hashes
            # is then one physical lineage, which is what seq_cp from its last block's
            # holder copies. (A duplicate computed concurrently stays private.)
            if parent is None or self._is_indexed(parent):
                self._by_hash.setdefault(block.hash, block)

    def release(self, seq_id: int, keep_tokens: int = 0, recent: bool = True) -> None:
        """End seq_id's hold. With keep_tokens, its indexed full blocks among the first
        keep_tokens stay cached, unless another sequence already holds them all: in the
        KV, or in host RAM once the blocks in use exceed `resident_blocks`. recent=False
        files the prefix as the least recently used, first to go (background work's: it
        must not push out what interactive requests left)."""
        self._release(seq_id, keep_tokens, recent)
        self._trim()

    def _release(self, seq_id: int, keep_tokens: int = 0, recent: bool = True) -> None:
        table = self.tables[seq_id]
        keep = 0
        limit = min(keep_tokens // self.block_size, len(table))
        while keep < limit and self._is_indexed(table[keep]):
            keep += 1
        if keep and len(table[keep - 1].holders) > 1:
            keep = 0
        self._kv.truncate(seq_id, keep * self.block_size)
        for block in table[keep:]:
            self._unhold(block, seq_id)
        if keep == 0:
            del self.tables[seq_id]
            self._cached.pop(seq_id)
            self._free_ids.append(seq_id)
            return
        del table[keep:]
        self._cached.put(seq_id, not recent, recent=recent)
        for block in table[:-1]:
            for other in list(block.holders):
                if other in self._cached and self.tables[other][-1] is block:
                    self._release(other)

    def clear_cache(self) -> None:
        """Evict every cached prefix (running requests keep their KV), in host RAM too."""
        while self._cached:
            self._release(next(iter(self._cached)))
        self.host.clear()

    # -- internals -------------------------------------------------------------

    def _is_indexed(self, block: Block) -> bool:
        return block.hash is not None and self._by_hash.get(block.hash) is block

    def _source_of(self, block: Block) -> int:
        cached = [s for s in block.holders if s in self._cached]
        return cached[0] if cached else next(iter(block.holders))

    def _take_id(self) -> int | None:
        if not self._free_ids and self._cached:
            self._evict(next(iter(self._cached)))
        return self._free_ids.pop() if self._free_ids else None

    def _make_room(
        self, need: int, evict_interactive: bool = True, spare: int | None = None
    ) -> bool:
        while self.free_blocks < need:
            victim = next(
                (s for s, bg in self._cached.items() if (bg or evict_interactive) and s != spare),
                None,
            )
            if victim is None:
                break
            self._evict(victim)
        return self.free_blocks >= need

    def _evict(self, seq_id: int) -> None:
        """Release a cached prefix for room, first copying its KV to host RAM unless
        background work left it (each of its prompts is mostly asked once) or it is
        there already."""
        table = self.tables[seq_id]
        key = table[-1].hash
        interactive = not self._cached.peek(seq_id)
        if self.host.enabled and interactive and key is not None and not self.host.holds(key):
            tokens = [token for block in table for token in block.tokens]
            chain = [block.hash for block in table if block.hash is not None]
            self.host.put(chain, tokens, self._kv.save(seq_id))
        self._release(seq_id)

    def _trim(self) -> None:
        """Evict cached prefixes, least recently used first, while the blocks in use
        exceed `resident_blocks`; only with the host tier on, which keeps what
        interactive work left. A prefix whose last block another sequence holds is
        skipped: it frees no cell (a holder of a block holds its parents)."""
        limit = self.resident_blocks
        if limit is None or not self.host.enabled:
            return
        while self.used_blocks > limit:
            victim = next(
                (s for s in self._cached if len(self.tables[s][-1].holders) == 1), None
            )
            if victim is None:
                return
            self._evict(victim)

    def _hold(self, block: Block, seq_id: int) -> None:
        if not block.holders:
            self.used_blocks += 1
        block.holders.add(seq_id)

    def _unhold(self, block: Block, seq_id: int) -> None:
        block.holders.discard(seq_id)
        if not block.holders:
            self.used_blocks -= 1
            if block.hash is not None and self._by_hash.get(block.hash) is block:
                del self._by_hash[block.hash]

    def check(self) -> None:
        """Assert the bookkeeping is self-consistent (tests call this)."""
        holders: dict[int, set[int]] = {}
        blocks: dict[int, Block] = {}
        for seq_id, table in self.tables.items():
            for i, block in enumerate(table):
                assert block.index == i, "block at the wrong position"
                holders.setdefault(id(block), set()).add(seq_id)
                blocks[id(block)] = block
        for key, block in blocks.items():
            assert block.holders == holders[key], "holders out of sync"
        for table in self.tables.values():
            for parent, child in itertools.pairwise(table):
                assert parent.holders >= child.holders, "holder of a block lacks its parent"
                if self._is_indexed(child):
                    assert self._is_indexed(parent), "indexed block on a private parent"
        assert self.used_blocks == len(blocks), "used block count out of sync"
        for block in self._by_hash.values():
            assert block.holders, "indexed block without holder"
        ids = set(self._free_ids) | set(self.tables)
        assert len(ids) == self.num_seq_ids == len(self._free_ids) + len(self.tables)
        assert set(self._cached) <= set(self.tables)
