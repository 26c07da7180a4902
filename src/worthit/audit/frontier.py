"""The right edge of a growing tree: one perfect subtree per binary digit of its size.

Appending a leaf merges equal-sized subtrees like carrying in binary addition, and every
merge completes a perfect subtree whose hash never changes again: those are what the
log stores, so proofs read them instead of rebuilding anything. The root is the fold of
the edge, O(log n) hashes, which is what a checkpoint signs.
"""

from __future__ import annotations

from collections.abc import Mapping

from worthit.audit.merkle import EMPTY_ROOT, Piece, fold, leaf_hash, node_hash, pieces


class Frontier:
    def __init__(self, size: int = 0, edge: Mapping[Piece, bytes] | None = None) -> None:
        """The edge of a tree of `size` leaves; `edge` holds the hashes of `pieces(0, size)`."""
        self.size = size
        self._edge: list[tuple[int, bytes]] = []
        for piece in pieces(0, size):
            if edge is None or piece not in edge:
                raise ValueError(f"the edge of a tree of size {size} needs subtree {piece}")
            self._edge.append((piece[0], edge[piece]))

    def copy(self) -> Frontier:
        other = Frontier()
        other.size = self.size
        other._edge = list(self._edge)
        return other

    def append_leaf(self, leaf: bytes) -> list[tuple[Piece, bytes]]:
        return self.append(leaf_hash(leaf))

    def append(self, hashed: bytes) -> list[tuple[Piece, bytes]]:
        """Adds a leaf by its hash; returns the perfect subtrees (level ≥ 1) it completed."""
        index = self.size
        level, value = 0, hashed
        completed: list[tuple[Piece, bytes]] = []
        while self._edge and self._edge[-1][0] == level:
            _, left = self._edge.pop()
            level += 1
            index >>= 1
            value = node_hash(left, value)
            completed.append(((level, index), value))
        self._edge.append((level, value))
        self.size += 1
        return completed

    def root(self) -> bytes:
        if not self._edge:
            return EMPTY_ROOT
        return fold([value for _, value in self._edge])
