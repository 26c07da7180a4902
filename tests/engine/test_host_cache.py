"""The host-RAM tier of the prefix cache: evicted prefixes come back as a copy."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_block_manager import compute

from worthit.engine.kv.block_manager import BlockManager
from worthit.engine.kv.host_cache import HostPrefixCache
from worthit.engine.scheduler import Chunk

from engine_fakes import FakeRunner

B = 4


def serve(kv: FakeRunner, bm: BlockManager, prompt: list[int], recent: bool = True) -> int:
    """One request's prompt through the KV, left as a cached prefix; its cached tokens."""
    got = bm.admit(prompt)
    assert got is not None
    seq, cached = got
    assert [kv.tokens[c] for c in kv.kv.get(seq, [])] == prompt[:cached]
    compute(kv, bm, seq, prompt, cached)
    bm.release(seq, keep_tokens=len(prompt), recent=recent)
    return cached


def manager(
    kv: FakeRunner, num_blocks: int = 6, host_bytes: int = 1 << 20, resident: int | None = None
) -> BlockManager:
    return BlockManager(
        num_blocks, B, num_seq_ids=4, kv=kv, host=HostPrefixCache(host_bytes),
        resident_blocks=resident,
    )  # fmt: skip


def test_an_evicted_prefix_comes_back_from_host_ram_not_recomputed():
    kv = FakeRunner()
    bm = manager(kv)
    first, second = [1] * 12 + [5], [2] * 12 + [5]
    serve(kv, bm, first)
    serve(kv, bm, second)  # evicts `first` for room: 3 + 3 blocks of 6
    assert len(bm.host) == 1
    assert bm.cached_prefix_len(first) == 12  # the estimate sees the stored copy
    assert serve(kv, bm, first) == 12
    assert kv.restores == 1 and bm.host.restored == 1
    bm.check()
    # Indexed again: a third request shares the restored cells, no second restore.
    _, cached = bm.admit([*first[:12], 7, 7])  # type: ignore[misc]
    assert cached == 12 and kv.restores == 1
    bm.check()


def test_the_part_still_in_the_kv_is_shared_not_restored_twice():
    kv = FakeRunner(n_ctx=9 * B)
    bm = manager(kv, num_blocks=9)
    preamble = [9] * 8
    first = [*preamble, *[1] * 8, 5]
    serve(kv, bm, first)
    serve(kv, bm, [*preamble, *[2] * 8, 5])  # shares the preamble with `first`
    serve(kv, bm, [3] * 16 + [5])  # evicts `first`; the preamble stays with the second
    assert len(bm.host) == 1 and bm.cached_prefix_len(first) == 16
    seq, cached = bm.admit(first)  # type: ignore[misc]
    assert cached == 16 and kv.restores == 1
    holder = next(s for s, cells in kv.kv.items() if s != seq and cells[:8] == kv.kv[seq][:8])
    assert holder != seq  # the preamble's cells are the ones another sequence holds
    bm.check()


def test_past_the_resident_blocks_a_finished_prompt_leaves_the_kv_for_host_ram():
    """Attention visits every cell up to the highest in use, so idle prefixes go to host
    RAM once the blocks in use pass resident_blocks, least recently used first, and come
    back from there."""
    kv = FakeRunner(n_ctx=12 * B)
    bm = manager(kv, num_blocks=12, resident=4)
    first, second = [1] * 12 + [5], [2] * 12 + [5]
    serve(kv, bm, first)
    assert len(bm.host) == 0 and bm.used_blocks == 3  # within the limit: stays in the KV
    serve(kv, bm, second)
    assert len(bm.host) == 1 and bm.used_blocks == 3  # `first` went, the newest stayed
    assert serve(kv, bm, first) == 12 and kv.restores == 1
    assert bm.used_blocks == 3 and bm.cached_prefix_len(second) == 12  # and now `second`
    bm.check()


def test_a_prefix_a_running_request_shares_is_not_moved_out():
    """Moving out a prefix whose cells a running request holds would free nothing."""
    kv = FakeRunner(n_ctx=12 * B)
    bm = manager(kv, num_blocks=12, resident=3)
    prompt = [1] * 12 + [5]
    serve(kv, bm, prompt)  # 3 blocks: within the limit
    _, cached = bm.admit([*prompt[:12], 7, 7])  # type: ignore[misc]
    assert cached == 12  # shares the cached prefix's 3 blocks
    serve(kv, bm, [3] * 4 + [5])  # one block more: over the limit
    assert bm.used_blocks == 3 and bm.host.stored == 1  # the new one went, not `prompt`
    assert bm.cached_prefixes == 1 and bm.match(prompt)
    bm.check()


def test_without_a_host_tier_prefixes_stay_in_the_kv():
    kv = FakeRunner(n_ctx=12 * B)
    bm = manager(kv, num_blocks=12, host_bytes=0, resident=1)
    serve(kv, bm, [1] * 12 + [5])
    assert bm.used_blocks == 3 and bm.cached_prefixes == 1


def test_what_background_work_left_is_not_copied_out():
    kv = FakeRunner()
    bm = manager(kv)
    serve(kv, bm, [1] * 12 + [5], recent=False)
    serve(kv, bm, [2] * 12 + [5])
    assert len(bm.host) == 0


def test_a_restore_llama_refuses_falls_back_to_a_prefill_and_is_forgotten():
    kv = FakeRunner()
    bm = manager(kv)
    first = [1] * 12 + [5]
    serve(kv, bm, first)
    serve(kv, bm, [2] * 12 + [5])
    kv.refuse_restores = True
    assert serve(kv, bm, first) == 0
    assert len(bm.host) == 1  # `second`, evicted for this one; `first`'s copy is gone
    assert bm.cached_prefix_len([1] * 12 + [6]) == 12  # in the KV again, recomputed
    bm.check()


def test_a_disabled_tier_stores_nothing():
    kv = FakeRunner()
    bm = manager(kv, host_bytes=0)
    first = [1] * 12 + [5]
    serve(kv, bm, first)
    serve(kv, bm, [2] * 12 + [5])
    assert len(bm.host) == 0 and serve(kv, bm, first) == 0


def test_clearing_the_cache_clears_host_ram_too():
    kv = FakeRunner()
    bm = manager(kv)
    first = [1] * 12 + [5]
    serve(kv, bm, first)
    serve(kv, bm, [2] * 12 + [5])
    bm.clear_cache()
    assert bm.cached_prefix_len(first) == 0 and bm.host.bytes_used == 0


def test_the_byte_budget_forgets_the_least_recently_used():
    host = HostPrefixCache(capacity_bytes=10)
    host.put([1], [1], b"abcd")
    host.put([2], [2], b"efgh")
    assert host.longest([1], [1, 0], use=True) is not None  # `1` is now the most recent
    host.put([3], [3], b"ijkl")
    assert not host.holds(2) and host.holds(1) and host.holds(3) and host.bytes_used == 8
    host.put([4], [4], b"x" * 11)  # larger than the whole budget: not stored
    assert not host.holds(4) and host.bytes_used == 8


def test_a_stored_prefix_matches_only_its_own_tokens():
    host = HostPrefixCache(capacity_bytes=100)
    host.put([5, 7], [1, 2, 3, 4], b"kv")
    match = host.longest([5, 7], [1, 2, 3, 4, 9], use=False)
    assert match is not None and match.blocks == 2
    assert host.longest([5, 7], [1, 0, 3, 4, 9], use=False) is None  # same hashes, other tokens
    shorter = host.longest([5, 7], [1, 2, 3, 0, 9], use=False)
    assert shorter is not None and shorter.blocks == 1


def test_a_longer_stored_prefix_serves_the_part_a_prompt_shares():
    """A cached prefix ends with its answer; the next question shares only the part
    before it."""
    host = HostPrefixCache(capacity_bytes=100)
    host.put([5, 7, 8], [1, 2, 3, 4, 5, 6], b"kv")
    match = host.longest([5, 6], [1, 2, 0, 0, 9], use=False)
    assert match is not None and match.blocks == 1 and match.entry.chain == (5, 7, 8)


def test_storing_a_prefix_drops_the_stored_one_it_extends():
    host = HostPrefixCache(capacity_bytes=100)
    host.put([5, 7], [1, 2, 3, 4], b"ab")
    host.put([5, 7, 8], [1, 2, 3, 4, 5, 6], b"abc")
    assert len(host) == 1 and host.bytes_used == 3


def test_a_prompt_finds_the_prefix_it_shares_with_an_answer_that_was_evicted():
    kv = FakeRunner()
    bm = manager(kv)
    prompt = [1] * 12 + [5]
    got = bm.admit(prompt)
    assert got is not None
    seq, _ = got
    answered = [*prompt, 6, 6, 6]  # the prompt and its answer stay cached: 4 blocks
    compute(kv, bm, seq, answered, 0)
    bm.release(seq, keep_tokens=len(answered))
    serve(kv, bm, [2] * 8 + [5])  # 3 blocks: evicts the answered prompt
    assert len(bm.host) == 1
    again = [*prompt[:12], 7]
    assert serve(kv, bm, again) == 12 and kv.restores == 1
    bm.check()


def test_a_negative_budget_is_refused():
    with pytest.raises(ValueError, match="capacity_bytes"):
        HostPrefixCache(-1)


prompts = st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=20), min_size=1, max_size=25)


@settings(max_examples=150, deadline=None)
@given(
    prompts, st.integers(4, 10), st.integers(0, 400), st.booleans(), st.none() | st.integers(0, 6)
)
def test_a_request_sees_exactly_its_prompt_whatever_tier_it_came_from(
    sequence, num_blocks, host_bytes, refuse, resident
):
    """Whatever was evicted, stored, forgotten or refused, a request admitted with
    `cached` tokens holds exactly its prompt's first `cached` tokens, the bookkeeping
    agrees with itself, and the KV never overflows (FakeRunner asserts that)."""
    kv = FakeRunner(n_ctx=num_blocks * B)
    bm = manager(kv, num_blocks=num_blocks, host_bytes=host_bytes, resident=resident)
    for i, prompt in enumerate(sequence):
        kv.refuse_restores = refuse and i % 3 == 0
        if len(prompt) > num_blocks * B:
            continue
        got = bm.admit(prompt)
        assert got is not None
        seq, cached = got
        assert cached <= len(prompt) - 1 or cached == 0
        assert [kv.tokens[c] for c in kv.kv.get(seq, [])] == prompt[:cached]
        if not bm.reserve(seq, len(prompt)):
            bm.release(seq)
            continue
        chunk = Chunk(seq=None, seq_id=seq, start=cached, tokens=prompt[cached:], sample=False)  # type: ignore[arg-type]
        kv.step([chunk], {})
        bm.commit(seq, prompt, len(prompt))
        bm.release(seq, keep_tokens=len(prompt), recent=i % 4 != 0)
        bm.check()
        assert bm.host.bytes_used <= host_bytes
