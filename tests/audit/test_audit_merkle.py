"""The tree, its roots and its proofs against RFC 9162's own recursive definitions."""

from __future__ import annotations

import hashlib
from collections.abc import Collection

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rfc9162_reference import mth, path, proof

from worthit.audit import merkle
from worthit.audit.frontier import Frontier
from worthit.audit.merkle import EMPTY_ROOT, Piece, leaf_hash, node_hash, pieces
from worthit.audit.proofs import verify_consistency, verify_inclusion

# The Certificate Transparency reference inputs and their published tree heads.
CT_LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
CT_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
CT_INCLUSION = {
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}


class MemoryTree:
    """Perfect-subtree hashes computed from a list of leaves, as the log's store keeps them."""

    def __init__(self, leaves: list[bytes]) -> None:
        self.leaves = leaves

    def fetch(self, wanted: Collection[Piece]) -> dict[Piece, bytes]:
        return {(lv, i): mth(self.leaves[i << lv : (i + 1) << lv]) for lv, i in wanted}


def leaves_of(n: int) -> list[bytes]:
    return [f"leaf {i}".encode() for i in range(n)]


def test_the_empty_tree_hashes_to_sha256_of_nothing() -> None:
    assert hashlib.sha256(b"").digest() == EMPTY_ROOT
    assert Frontier().root() == EMPTY_ROOT
    assert merkle.root(0, MemoryTree([]).fetch) == EMPTY_ROOT


def test_leaf_and_node_hashes_have_the_rfc_prefixes() -> None:
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    left, right = b"L" * 32, b"R" * 32
    assert node_hash(left, right) == hashlib.sha256(b"\x01" + left + right).digest()


@pytest.mark.parametrize("size", range(len(CT_ROOTS)))
def test_roots_are_the_published_certificate_transparency_ones(size: int) -> None:
    frontier = Frontier()
    for leaf in CT_LEAVES[:size]:
        frontier.append_leaf(leaf)
    assert frontier.root().hex() == CT_ROOTS[size]
    assert mth(CT_LEAVES[:size]).hex() == CT_ROOTS[size]  # the reference agrees too


@pytest.mark.parametrize(("index", "size"), sorted(CT_INCLUSION))
def test_inclusion_proofs_are_the_published_ones(index: int, size: int) -> None:
    got = merkle.inclusion_proof(index, size, MemoryTree(CT_LEAVES).fetch)
    assert [h.hex() for h in got] == CT_INCLUSION[(index, size)]


def test_the_frontier_root_is_the_reference_root_at_every_size() -> None:
    leaves = leaves_of(70)
    frontier = Frontier()
    for n in range(len(leaves) + 1):
        assert frontier.root() == mth(leaves[:n]), n
        if n < len(leaves):
            frontier.append_leaf(leaves[n])


def test_the_frontier_stores_exactly_the_perfect_subtrees() -> None:
    leaves = leaves_of(37)
    frontier, stored = Frontier(), {}
    for leaf in leaves:
        stored.update(frontier.append_leaf(leaf))
    expected = {
        (level, i): mth(leaves[i << level : (i + 1) << level])
        for level in range(1, 6)
        for i in range(len(leaves) >> level)
    }
    assert stored == expected


def test_pieces_tile_a_range_by_its_binary_digits() -> None:
    assert pieces(0, 13) == [(3, 0), (2, 2), (0, 12)]
    assert pieces(8, 12) == [(2, 2)]
    assert pieces(0, 0) == []


def test_inclusion_and_consistency_proofs_equal_the_reference_for_small_trees() -> None:
    leaves = leaves_of(33)
    tree = MemoryTree(leaves)
    for n in range(1, len(leaves) + 1):
        for m in range(n):
            assert merkle.inclusion_proof(m, n, tree.fetch) == path(m, leaves[:n]), (m, n)
        for m in range(1, n):
            assert merkle.consistency_proof(m, n, tree.fetch) == proof(m, leaves[:n]), (m, n)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=12), min_size=1, max_size=96))
def test_every_leaf_of_a_random_tree_has_a_proof_that_verifies(leaves: list[bytes]) -> None:
    tree, n = MemoryTree(leaves), len(leaves)
    root = merkle.root(n, tree.fetch)
    assert root == mth(leaves)
    for i in range(n):
        verify_inclusion(leaf_hash(leaves[i]), i, n, merkle.inclusion_proof(i, n, tree.fetch), root)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.binary(max_size=12), max_size=96))
def test_every_prefix_of_a_random_tree_is_proved_consistent(leaves: list[bytes]) -> None:
    tree, n = MemoryTree(leaves), len(leaves)
    second = mth(leaves)
    for m in range(n + 1):
        consistency = merkle.consistency_proof(m, n, tree.fetch)
        verify_consistency(m, n, mth(leaves[:m]), second, consistency)
