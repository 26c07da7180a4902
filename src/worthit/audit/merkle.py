"""The Merkle tree of RFC 9162 §2.1, and its proofs built from stored subtree hashes.

Every node of an RFC 9162 tree is either a perfect subtree (2^level leaves starting at a
multiple of 2^level: a `Piece`) or lies on the right border of a tree whose size is not
a power of two; a border node's hash is the right fold of the perfect pieces under it.
So a store that keeps the hash of every perfect subtree (level 0 being the leaf hashes)
can answer any root, inclusion proof or consistency proof with O(log n) lookups and
hashing, without rebuilding anything: `inclusion_proof` and `consistency_proof` below
list the ranges RFC 9162 §2.1.3.1 and §2.1.4.1 name, and `fetch` supplies the pieces.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Collection, Mapping, Sequence

HASH_SIZE = 32
LEAF_PREFIX = b"\x00"
NODE_PREFIX = b"\x01"
EMPTY_ROOT = hashlib.sha256(b"").digest()
"""MTH({}) = SHA-256 of the empty string (RFC 9162 §2.1.1)."""

Piece = tuple[int, int]
"""A perfect subtree as (level, index): the 2^level leaves from index·2^level on."""

Fetch = Callable[[Collection[Piece]], Mapping[Piece, bytes]]
"""Looks up the hashes of perfect subtrees, all at once so a store can batch the reads."""


def leaf_hash(leaf: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + leaf).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def split_point(n: int) -> int:
    """k, the largest power of two smaller than n (n ≥ 2), where RFC 9162 splits D[n]."""
    return 1 << ((n - 1).bit_length() - 1)


def pieces(start: int, end: int) -> list[Piece]:
    """The perfect subtrees that tile [start, end), largest first.

    For a node of the tree that is the decomposition of its range by the binary digits of
    its size; the node's hash is `fold` of their hashes.
    """
    out: list[Piece] = []
    while start < end:
        level = (end - start).bit_length() - 1
        if start:
            level = min(level, (start & -start).bit_length() - 1)
        out.append((level, start >> level))
        start += 1 << level
    return out


def fold(hashes: Sequence[bytes]) -> bytes:
    """The hash of a node from its pieces' hashes: each piece is the left child of the rest."""
    result = hashes[-1]
    for left in reversed(hashes[:-1]):
        result = node_hash(left, result)
    return result


def inclusion_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The subtrees whose hashes form PATH(index, D[size]) (RFC 9162 §2.1.3.1), leaf first."""
    if not 0 <= index < size:
        raise ValueError(f"leaf {index} is not in a tree of size {size}")
    path = []
    start, end = 0, size
    while end - start > 1:
        k = split_point(end - start)
        if index < start + k:
            path.append((start + k, end))
            end = start + k
        else:
            path.append((start, start + k))
            start += k
    path.reverse()
    return path


def consistency_ranges(first: int, second: int) -> list[tuple[int, int]]:
    """The subtrees whose hashes form PROOF(first, D[second]) (RFC 9162 §2.1.4.1).

    Empty for first = 0 or first = second, the proofs every verifier accepts unasked.
    """
    if not 0 <= first <= second:
        raise ValueError(f"no consistency proof from size {first} to size {second}")
    if first in (0, second):
        return []
    proof = []
    start, end, m, whole = 0, second, first, True
    while m != end - start:
        k = split_point(end - start)
        if m <= k:
            proof.append((start + k, end))
            end = start + k
        else:
            proof.append((start, start + k))
            start += k
            m -= k
            whole = False
    if not whole:
        proof.append((start, end))
    proof.reverse()
    return proof


def hashes_of(ranges: Sequence[tuple[int, int]], fetch: Fetch) -> list[bytes]:
    """The hash of each range, with one `fetch` of every piece they need."""
    tiled = [pieces(start, end) for start, end in ranges]
    found = fetch({piece for tiles in tiled for piece in tiles})
    return [fold([found[piece] for piece in tiles]) for tiles in tiled]


def root(size: int, fetch: Fetch) -> bytes:
    """MTH(D[size])."""
    if size == 0:
        return EMPTY_ROOT
    return hashes_of([(0, size)], fetch)[0]


def inclusion_proof(index: int, size: int, fetch: Fetch) -> list[bytes]:
    return hashes_of(inclusion_ranges(index, size), fetch)


def consistency_proof(first: int, second: int, fetch: Fetch) -> list[bytes]:
    return hashes_of(consistency_ranges(first, second), fetch)
