"""Proofs that must not verify: a flipped bit, a wrong size, a cut or padded path, a bad hash."""

from __future__ import annotations

import pytest
from rfc9162_reference import mth, path, path_shape, proof

from worthit.audit.errors import VerificationError
from worthit.audit.merkle import EMPTY_ROOT, leaf_hash
from worthit.audit.proofs import verify_consistency, verify_inclusion

LEAVES = [f"leaf {i}".encode() for i in range(21)]
INCLUSION_CASES = [
    (0, 1),
    (0, 2),
    (1, 2),
    (2, 3),
    (0, 8),
    (5, 8),
    (7, 8),
    (6, 7),
    (12, 13),
    (9, 21),
    (20, 21),
]
CONSISTENCY_CASES = [(1, 2), (1, 8), (2, 8), (3, 7), (4, 8), (5, 13), (7, 8), (8, 21), (13, 21)]


def flips(value: bytes) -> list[bytes]:
    out = []
    for byte in range(len(value)):
        for bit in range(8):
            changed = bytearray(value)
            changed[byte] ^= 1 << bit
            out.append(bytes(changed))
    return out


def inclusion(index: int, size: int) -> tuple[bytes, list[bytes], bytes]:
    return leaf_hash(LEAVES[index]), path(index, LEAVES[:size]), mth(LEAVES[:size])


def rejects_inclusion(leaf: bytes, index: int, size: int, hashes: list[bytes], root: bytes) -> bool:
    try:
        verify_inclusion(leaf, index, size, hashes, root)
    except VerificationError:
        return True
    return False


def rejects_consistency(m: int, n: int, first: bytes, second: bytes, hashes: list[bytes]) -> bool:
    try:
        verify_consistency(m, n, first, second, hashes)
    except VerificationError:
        return True
    return False


@pytest.mark.parametrize(("index", "size"), INCLUSION_CASES)
def test_every_single_bit_flip_of_an_inclusion_proof_is_rejected(index: int, size: int) -> None:
    leaf, hashes, root = inclusion(index, size)
    verify_inclusion(leaf, index, size, hashes, root)
    for position, value in enumerate(hashes):
        for flipped in flips(value):
            changed = [*hashes[:position], flipped, *hashes[position + 1 :]]
            assert rejects_inclusion(leaf, index, size, changed, root)
    assert all(rejects_inclusion(f, index, size, hashes, root) for f in flips(leaf))
    assert all(rejects_inclusion(leaf, index, size, hashes, f) for f in flips(root))


@pytest.mark.parametrize(("m", "n"), CONSISTENCY_CASES)
def test_every_single_bit_flip_of_a_consistency_proof_is_rejected(m: int, n: int) -> None:
    first, second, hashes = mth(LEAVES[:m]), mth(LEAVES[:n]), proof(m, LEAVES[:n])
    verify_consistency(m, n, first, second, hashes)
    for position, value in enumerate(hashes):
        for flipped in flips(value):
            changed = [*hashes[:position], flipped, *hashes[position + 1 :]]
            assert rejects_consistency(m, n, first, second, changed)
    assert all(rejects_consistency(m, n, f, second, hashes) for f in flips(first))
    assert all(rejects_consistency(m, n, first, f, hashes) for f in flips(second))


def test_a_wrong_tree_size_is_rejected_unless_the_path_has_the_same_shape() -> None:
    """RFC 9162's check binds the root to the path's shape; only a signed checkpoint binds
    the size. So a wrong size passes exactly when its path turns the same way at each step."""
    rejected = accepted = 0
    for size in range(1, len(LEAVES) + 1):
        for index in range(size):
            leaf, hashes, root = inclusion(index, size)
            for wrong in range(0, len(LEAVES) + 3):
                if wrong == size:
                    continue
                same_shape = index < wrong and path_shape(index, wrong) == path_shape(index, size)
                assert rejects_inclusion(leaf, index, wrong, hashes, root) != same_shape
                rejected += not same_shape
                accepted += same_shape
    assert rejected > accepted > 0


def test_a_wrong_size_in_a_consistency_proof_is_rejected() -> None:
    for m, n in CONSISTENCY_CASES:
        first, second, hashes = mth(LEAVES[:m]), mth(LEAVES[:n]), proof(m, LEAVES[:n])
        for wrong_m in (0, n, n + 1):
            assert rejects_consistency(wrong_m, n, first, second, hashes), (m, n, wrong_m)
        for wrong_m in range(1, n):
            if wrong_m != m and proof(wrong_m, LEAVES[:n]) != hashes:
                assert rejects_consistency(wrong_m, n, first, second, hashes), (m, n, wrong_m)
        for wrong_n in range(m + 1, len(LEAVES) + 1):
            if len(proof(m, LEAVES[:wrong_n])) != len(hashes):
                assert rejects_consistency(m, wrong_n, first, second, hashes), (m, n, wrong_n)


@pytest.mark.parametrize(("index", "size"), INCLUSION_CASES)
def test_truncated_or_extended_inclusion_proofs_are_rejected(index: int, size: int) -> None:
    leaf, hashes, root = inclusion(index, size)
    extra = leaf_hash(b"extra")
    for changed in (hashes[:-1], hashes[1:], [*hashes, extra], [extra, *hashes], hashes * 2):
        if changed != hashes:
            assert rejects_inclusion(leaf, index, size, changed, root)


@pytest.mark.parametrize(("m", "n"), CONSISTENCY_CASES)
def test_truncated_or_extended_consistency_proofs_are_rejected(m: int, n: int) -> None:
    first, second, hashes = mth(LEAVES[:m]), mth(LEAVES[:n]), proof(m, LEAVES[:n])
    extra = leaf_hash(b"extra")
    for changed in ([], hashes[:-1], hashes[1:], [*hashes, extra], [extra, *hashes]):
        assert rejects_consistency(m, n, first, second, changed)


@pytest.mark.parametrize("length", [0, 1, 31, 33, 64])
def test_hashes_that_are_not_32_bytes_are_rejected(length: int) -> None:
    leaf, hashes, root = inclusion(5, 8)
    bad = b"\x07" * length
    assert rejects_inclusion(bad, 5, 8, hashes, root)
    assert rejects_inclusion(leaf, 5, 8, hashes, bad)
    assert rejects_inclusion(leaf, 5, 8, [hashes[0], bad, hashes[2]], root)
    first, second, consistency = mth(LEAVES[:3]), mth(LEAVES[:8]), proof(3, LEAVES[:8])
    assert rejects_consistency(3, 8, bad, second, consistency)
    assert rejects_consistency(3, 8, first, bad, consistency)
    assert rejects_consistency(3, 8, first, second, [bad, *consistency[1:]])


def test_indexes_and_sizes_outside_the_tree_are_rejected() -> None:
    leaf, hashes, root = inclusion(0, 1)
    assert rejects_inclusion(leaf, 1, 1, hashes, root)
    assert rejects_inclusion(leaf, -1, 1, hashes, root)
    assert rejects_inclusion(leaf, 0, 0, hashes, EMPTY_ROOT)
    first, second = mth(LEAVES[:3]), mth(LEAVES[:8])
    assert rejects_consistency(8, 3, second, first, proof(3, LEAVES[:8]))


def test_trivial_consistency_needs_an_empty_proof_and_the_right_roots() -> None:
    root = mth(LEAVES[:5])
    verify_consistency(5, 5, root, root, [])
    verify_consistency(0, 5, EMPTY_ROOT, root, [])
    verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert rejects_consistency(5, 5, root, mth(LEAVES[:4]), [])
    assert rejects_consistency(5, 5, root, root, [root])
    assert rejects_consistency(0, 5, EMPTY_ROOT, root, [root])
    assert rejects_consistency(0, 5, root, root, [])
