"""One bounded least-recently-used mapping, for the in-process caches every layer keeps
(verdicts, resolutions, explanation runs, stored explanations, API keys, …).

It holds no lock: each owner already takes its own around more than the mapping (a
counter, a second map), so a lock here would be taken twice.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterator
from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class LRU(Generic[K, V]):
    """At most `capacity` entries; putting one more forgets the least recently used."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value, now the most recently used; None when absent."""
        value = self._entries.get(key)
        if value is not None:
            self._entries.move_to_end(key)
        return value

    def peek(self, key: K) -> V | None:
        """The value, its place left as it is (a caller that may not count it a use)."""
        return self._entries.get(key)

    def put(self, key: K, value: V, *, recent: bool = True) -> list[K]:
        """Set `key` as the most recently used, then forget the oldest beyond capacity;
        the keys forgotten, oldest first, for an owner that keeps more about them.

        recent=False files it as the least recently used instead, first to go: for an
        entry its owner wants kept only while nothing more deserving needs the room.
        """
        self._entries[key] = value
        self._entries.move_to_end(key, last=recent)
        forgotten: list[K] = []
        while len(self._entries) > self.capacity:
            forgotten.append(self._entries.popitem(last=False)[0])
        return forgotten

    def pop(self, key: K) -> V | None:
        return self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def items(self) -> Iterator[tuple[K, V]]:
        """(key, value), least recently used first, none counted a use: for an owner that
        chooses its own victim (the oldest one that may go) rather than the oldest."""
        return iter(self._entries.items())

    def __iter__(self) -> Iterator[K]:
        """Keys, least recently used first, none counted a use."""
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries
