"""Checking inclusion and consistency proofs, step for step as RFC 9162 §2.1.3.2 and §2.1.4.2.

These run where nothing is trusted (a shopper's browser, an auditor's laptop): anything
that does not prove what it claims, a hash that is not 32 bytes included, is a
`VerificationError` naming the reason.

A proof binds the root to the tree's shape, not to the size written beside it: two sizes
whose paths for a leaf turn the same way (index 0 in trees of 5 to 8 leaves) give the
same root from the same proof. The size is bound by the signed checkpoint it comes from.
"""

from __future__ import annotations

from collections.abc import Sequence

from worthit.audit.errors import VerificationError
from worthit.audit.merkle import EMPTY_ROOT, HASH_SIZE, node_hash


def verify_inclusion(
    leaf_hash: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> None:
    """Returns if `proof` shows the leaf with `leaf_hash` at `index` in the tree `root`."""
    _check_hashes(leaf_hash=leaf_hash, root=root, proof=proof)
    if not 0 <= index < size:
        raise VerificationError(f"leaf index {index} is not below tree size {size}")
    fn, sn = index, size - 1
    r = leaf_hash
    for p in proof:
        if sn == 0:
            raise VerificationError("the proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError("the proof is shorter than the path to the root")
    if r != root:
        raise VerificationError("the proof leads to a different root")


def verify_consistency(
    first: int, second: int, first_root: bytes, second_root: bytes, proof: Sequence[bytes]
) -> None:
    """Returns if `proof` shows the tree `first_root` is a prefix of the tree `second_root`."""
    if not 0 <= first <= second:
        raise VerificationError(f"size {first} cannot be a prefix of size {second}")
    if first == second > 0 and not proof:
        if first_root != second_root:
            raise VerificationError("two trees of one size have different roots")
        return  # the roots are compared, never hashed: as transparency-dev/merkle does
    _check_hashes(first_root=first_root, second_root=second_root, proof=proof)
    if first == 0 or first == second:
        if proof:
            raise VerificationError("the proof between these sizes must be empty")
        if first == 0 and first_root != EMPTY_ROOT:
            raise VerificationError("the root of the empty tree must be SHA-256 of nothing")
        if first == second and first_root != second_root:
            raise VerificationError("two trees of one size have different roots")
        return
    if not proof:
        raise VerificationError("the proof is empty")
    path = list(proof)
    if first & (first - 1) == 0:
        path.insert(0, first_root)
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise VerificationError("the proof is longer than the path to the root")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            if not fn & 1:
                while fn and not fn & 1:
                    fn >>= 1
                    sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise VerificationError("the proof is shorter than the path to the root")
    if fr != first_root:
        raise VerificationError("the proof does not lead to the first root")
    if sr != second_root:
        raise VerificationError("the proof does not lead to the second root")


def _check_hashes(*, proof: Sequence[bytes], **named: bytes) -> None:
    for name, value in named.items():
        if not isinstance(value, bytes) or len(value) != HASH_SIZE:
            raise VerificationError(f"{name} is not a {HASH_SIZE}-byte hash")
    for i, value in enumerate(proof):
        if not isinstance(value, bytes) or len(value) != HASH_SIZE:
            raise VerificationError(f"proof hash {i} is not a {HASH_SIZE}-byte hash")
