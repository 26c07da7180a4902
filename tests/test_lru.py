"""The one bounded LRU every in-process cache uses, checked against a plain list model
under random operations; and the miss queue that is deliberately not one."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from worthit.answer.demand import Wanted
from worthit.text.lru import LRU

keys = st.integers(min_value=0, max_value=7)
values = st.integers(min_value=0, max_value=3)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("get"), keys),
        st.tuples(st.just("peek"), keys),
        st.tuples(st.just("put"), keys, values, st.booleans()),
        st.tuples(st.just("pop"), keys),
        st.tuples(st.just("clear")),
    ),
    max_size=60,
)


class Model:
    """(key, value) pairs, least recently used first: what the LRU should hold."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.pairs: list[tuple[int, int]] = []

    def _find(self, key: int) -> int | None:
        return next((i for i, (k, _) in enumerate(self.pairs) if k == key), None)

    def get(self, key: int, use: bool) -> int | None:
        i = self._find(key)
        if i is None:
            return None
        pair = self.pairs[i]
        if use:
            del self.pairs[i]
            self.pairs.append(pair)
        return pair[1]

    def put(self, key: int, value: int, recent: bool) -> list[int]:
        self.pop(key)
        if recent:
            self.pairs.append((key, value))
        else:
            self.pairs.insert(0, (key, value))
        over = max(0, len(self.pairs) - self.capacity)
        forgotten = [k for k, _ in self.pairs[:over]]
        del self.pairs[:over]
        return forgotten

    def pop(self, key: int) -> int | None:
        i = self._find(key)
        return None if i is None else self.pairs.pop(i)[1]


@given(capacity=st.integers(min_value=1, max_value=5), ops=operations)
def test_lru_matches_the_list_model(capacity: int, ops: list[tuple[Any, ...]]) -> None:
    lru: LRU[int, int] = LRU(capacity)
    model = Model(capacity)
    for op in ops:
        match op:
            case ("get", key):
                assert lru.get(key) == model.get(key, use=True)
            case ("peek", key):
                assert lru.peek(key) == model.get(key, use=False)
            case ("put", key, value, recent):
                assert lru.put(key, value, recent=recent) == model.put(key, value, recent)
            case ("pop", key):
                assert lru.pop(key) == model.pop(key)
            case ("clear",):
                lru.clear()
                model.pairs.clear()
        assert list(lru.items()) == model.pairs
        assert list(lru) == [k for k, _ in model.pairs]
        assert len(lru) == len(model.pairs) <= capacity
        assert all(k in lru for k, _ in model.pairs)


@given(capacity=st.integers(min_value=1, max_value=5), ops=operations)
def test_reading_the_order_is_not_a_use(capacity: int, ops: list[tuple[Any, ...]]) -> None:
    """items() and iteration leave the order as it was, so an owner can look for its own
    victim without promoting what it looked at."""
    lru: LRU[int, int] = LRU(capacity)
    for op in ops:
        if op[0] == "put":
            lru.put(op[1], op[2], recent=op[3])
    before = list(lru.items())
    assert list(lru) == [k for k, _ in before]
    assert list(lru.items()) == before


@given(st.lists(keys, min_size=1, max_size=20))
def test_a_least_recent_put_into_a_full_lru_is_the_one_forgotten(filled: list[int]) -> None:
    lru: LRU[int, int] = LRU(len(set(filled)))
    for key in filled:
        lru.put(key, key)
    before = list(lru.items())
    lru.put(-1, -1, recent=False)
    assert -1 not in lru
    assert list(lru.items()) == before


def test_the_miss_queue_gives_the_pair_missed_most_first() -> None:
    """A best seller whose prompt changed is missed by every asker until it is rewritten:
    it goes before pairs missed once earlier, which in arrival order it would wait behind."""
    wanted = Wanted(limit=3)
    for sku in ("A", "B", "C", "C", "B", "C"):
        wanted.add(sku, "en")
    wanted.add("D", "en")  # full: A, missed least and longest ago, makes room
    assert len(wanted) == 3
    assert [wanted.pop(), wanted.pop(), wanted.pop(), wanted.pop()] == [
        ("C", "en"),
        ("B", "en"),
        ("D", "en"),
        None,
    ]


@given(st.lists(st.sampled_from("ABCDEFG"), max_size=40))
def test_the_miss_queue_pops_by_misses_then_by_first_miss(misses: list[str]) -> None:
    wanted = Wanted()
    for sku in misses:
        wanted.add(sku, "zh")
    popped = []
    while (pair := wanted.pop()) is not None:
        popped.append(pair[0])
    expected = sorted(set(misses), key=lambda sku: (-misses.count(sku), misses.index(sku)))
    assert popped == expected
