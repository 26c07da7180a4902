"""RFC 9162 §2.1 written out as its recursive definitions, for tests to compare against.

Deliberately naive (it rebuilds every subtree on every call): it shares nothing with
worthit.audit but SHA-256, so an error in the log's iterative code cannot hide here too.
"""

from __future__ import annotations

import hashlib


def mth(leaves: list[bytes]) -> bytes:
    n = len(leaves)
    if n == 0:
        return hashlib.sha256(b"").digest()
    if n == 1:
        return hashlib.sha256(b"\x00" + leaves[0]).digest()
    k = largest_power_of_two_below(n)
    return hashlib.sha256(b"\x01" + mth(leaves[:k]) + mth(leaves[k:])).digest()


def path(m: int, leaves: list[bytes]) -> list[bytes]:
    n = len(leaves)
    if n == 1:
        return []
    k = largest_power_of_two_below(n)
    if m < k:
        return [*path(m, leaves[:k]), mth(leaves[k:])]
    return [*path(m - k, leaves[k:]), mth(leaves[:k])]


def proof(m: int, leaves: list[bytes]) -> list[bytes]:
    return subproof(m, leaves, True)


def subproof(m: int, leaves: list[bytes], b: bool) -> list[bytes]:
    n = len(leaves)
    if m == n:
        return [] if b else [mth(leaves)]
    k = largest_power_of_two_below(n)
    if m <= k:
        return [*subproof(m, leaves[:k], b), mth(leaves[k:])]
    return [*subproof(m - k, leaves[k:], False), mth(leaves[:k])]


def path_shape(m: int, n: int) -> list[bool]:
    """For each step of PATH(m, D[n]), leaf first: is the sibling on the right?"""
    if n == 1:
        return []
    k = largest_power_of_two_below(n)
    if m < k:
        return [*path_shape(m, k), True]
    return [*path_shape(m - k, n - k), False]


def largest_power_of_two_below(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k
