from worthit.engine.kv.block_manager import BlockManager, block_hash
from worthit.engine.scheduler import Chunk

from engine_fakes import FakeRunner

B = 4


def compute(kv: FakeRunner, bm: BlockManager, seq_id: int, tokens: list[int], start: int):
    """Reserve, 'decode' and commit tokens[start:] for seq_id."""
    assert bm.reserve(seq_id, len(tokens))
    chunk = Chunk(seq=None, seq_id=seq_id, start=start, tokens=tokens[start:], sample=False)  # type: ignore[arg-type]
    kv.step([chunk], {})
    bm.commit(seq_id, tokens, len(tokens))


def test_hash_is_chained_with_parent():
    assert block_hash(None, [1, 2, 3, 4]) != block_hash(7, [1, 2, 3, 4])


def test_released_prompt_is_reused_and_counted():
    kv = FakeRunner()
    bm = BlockManager(num_blocks=16, block_size=B, num_seq_ids=4, kv=kv)
    prompt = list(range(10, 21))  # 11 tokens: 2 full blocks + 3
    seq_a, cached = bm.admit(prompt)  # type: ignore[misc]
    assert cached == 0
    compute(kv, bm, seq_a, prompt, 0)
    bm.release(seq_a, keep_tokens=len(prompt))
    assert bm.cached_prefixes == 1 and bm.used_blocks == 2
    other = [*prompt[:8], 99, 98, 97]
    seq_b, cached = bm.admit(other)  # type: ignore[misc]
    assert cached == 8
    assert kv.kv[seq_b] == kv.kv[seq_a][:8]  # shared cells, not copies
    assert bm.hit_tokens == 8 and bm.queried_tokens == 22
    compute(kv, bm, seq_b, other, 8)
    assert bm.used_blocks == 3  # two shared + one private
    bm.check()


def test_whole_prompt_cached_still_leaves_last_token_to_compute():
    kv = FakeRunner()
    bm = BlockManager(num_blocks=16, block_size=B, num_seq_ids=4, kv=kv)
    prompt = list(range(8))
    seq, _ = bm.admit(prompt)  # type: ignore[misc]
    compute(kv, bm, seq, prompt, 0)
    bm.release(seq, keep_tokens=8)
    _, cached = bm.admit(prompt)  # type: ignore[misc]
    assert cached == 4


def test_lru_cached_prefix_evicted_when_blocks_run_out():
    kv = FakeRunner()
    bm = BlockManager(num_blocks=5, block_size=B, num_seq_ids=4, kv=kv)
    first, second = [1] * 8 + [5], [2] * 8 + [5]
    for prompt in (first, second):
        seq, _ = bm.admit(prompt)  # type: ignore[misc]
        compute(kv, bm, seq, prompt, 0)
        bm.release(seq, keep_tokens=len(prompt))
    assert bm.used_blocks == 4 and bm.cached_prefixes == 2
    assert bm.cached_prefix_len(first) == 8
    seq, _ = bm.admit([3] * 5)  # type: ignore[misc]
    assert bm.reserve(seq, 5)  # needs 2 blocks: evicts `first` (least recently used)
    assert bm.cached_prefix_len(first) == 0
    assert bm.cached_prefix_len(second) == 8
    bm.check()


def test_reserve_fails_when_running_sequences_hold_everything():
    kv = FakeRunner()
    bm = BlockManager(num_blocks=2, block_size=B, num_seq_ids=4, kv=kv)
    seq, _ = bm.admit([1] * 8)  # type: ignore[misc]
    assert bm.reserve(seq, 8)
    other, _ = bm.admit([2] * 3)  # type: ignore[misc]
    assert not bm.reserve(other, 3)


def test_prefix_of_a_longer_cached_prefix_is_dropped():
    kv = FakeRunner()
    bm = BlockManager(num_blocks=16, block_size=B, num_seq_ids=4, kv=kv)
    short = [1, 2, 3, 4, 5]
    seq, _ = bm.admit(short)  # type: ignore[misc]
    compute(kv, bm, seq, short, 0)
    bm.release(seq, keep_tokens=5)
    longer = [1, 2, 3, 4, 6, 7, 8, 9, 10]
    seq2, cached = bm.admit(longer)  # type: ignore[misc]
    assert cached == 4
    compute(kv, bm, seq2, longer, 4)
    bm.release(seq2, keep_tokens=9)
    assert bm.cached_prefixes == 1  # the 1-block prefix is inside the 2-block one
    assert seq not in kv.kv
    bm.check()


def test_clear_cache_leaves_no_kv():
    kv = FakeRunner()
    bm = BlockManager(num_blocks=16, block_size=B, num_seq_ids=4, kv=kv)
    for base in (1, 2, 3):
        prompt = [base] * 9
        seq, _ = bm.admit(prompt)  # type: ignore[misc]
        compute(kv, bm, seq, prompt, 0)
        bm.release(seq, keep_tokens=9)
    bm.clear_cache()
    assert kv.kv == {} and bm.used_blocks == 0
    bm.check()


def test_sharing_only_a_common_preamble_does_not_keep_a_prompt_fresh():
    """Prompts of different products share their instructions: a request reading those
    from `first` has not used `first`, which goes first when room runs out."""
    kv = FakeRunner()
    bm = BlockManager(num_blocks=7, block_size=B, num_seq_ids=6, kv=kv)
    preamble = [9] * 4
    first, second = [*preamble, *[1] * 4, 5], [*preamble, *[2] * 4, 5]
    for prompt in (first, second):
        seq, cached = bm.admit(prompt)  # type: ignore[misc]
        compute(kv, bm, seq, prompt, cached)
        bm.release(seq, keep_tokens=len(prompt))
    seq, cached = bm.admit([*preamble, 3])  # type: ignore[misc]
    assert cached == 4
    bm.release(seq)
    seq, _ = bm.admit([7] * 17)  # type: ignore[misc]
    assert bm.reserve(seq, 17)  # 5 blocks of 7, 3 held: evicts one prompt's own block
    assert bm.cached_prefix_len(first) == 4  # `first` went: only the preamble is left
    assert bm.cached_prefix_len(second) == 8
    bm.check()
