"""Consistent hashing with bounded loads: the load bound holds for any sequence of
arrivals and departures, and a replica joining or leaving moves only its own keys."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.engine.remote.router import BoundedLoadRing, affinity_key

replica_names = st.lists(
    st.text("abcdefgh0123456789:/.", min_size=1, max_size=12), min_size=1, max_size=6, unique=True
)
keys = st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=200)
balances = st.sampled_from([1.1, 1.25, 1.5, 2.0])


operations = st.lists(st.tuples(st.booleans(), st.text(max_size=8)), max_size=300)


@settings(max_examples=150, deadline=None)
@given(names=replica_names, ops=operations, balance=balances)
def test_no_replica_takes_a_request_above_the_bound(
    names: list[str], ops: list[tuple[bool, str]], balance: float
) -> None:
    """Each placement lands where the load, with it, is at most ceil(c·m/n), m counting it."""
    ring = BoundedLoadRing(names, balance)
    loads = dict.fromkeys(names, 0)
    placed: list[str] = []
    for arrives, key in ops:
        if arrives or not placed:
            node = ring.pick(key, loads)
            loads[node] += 1
            placed.append(node)
            assert loads[node] <= math.ceil(balance * sum(loads.values()) / len(loads))
        else:
            loads[placed.pop(len(key) % len(placed))] -= 1


@settings(max_examples=150, deadline=None)
@given(names=replica_names, requests=keys, balance=balances)
def test_with_arrivals_only_every_replica_stays_within_the_bound(
    names: list[str], requests: list[str], balance: float
) -> None:
    ring = BoundedLoadRing(names, balance)
    loads = dict.fromkeys(names, 0)
    for key in requests:
        loads[ring.pick(key, loads)] += 1
        bound = math.ceil(balance * sum(loads.values()) / len(loads))
        assert max(loads.values()) <= bound


@settings(max_examples=100, deadline=None)
@given(names=replica_names, newcomer=st.text("xyz", min_size=1, max_size=6), requests=keys)
def test_a_joining_replica_takes_keys_and_moves_no_others(
    names: list[str], newcomer: str, requests: list[str]
) -> None:
    ring = BoundedLoadRing(names)
    before = {k: next(ring.order(k)) for k in requests}
    ring.add(newcomer)
    after = {k: next(ring.order(k)) for k in requests}
    assert all(after[k] in (before[k], newcomer) for k in requests)


@settings(max_examples=100, deadline=None)
@given(names=replica_names.filter(lambda n: len(n) >= 2), requests=keys)
def test_a_leaving_replica_moves_only_its_own_keys(names: list[str], requests: list[str]) -> None:
    ring = BoundedLoadRing(names)
    before = {k: next(ring.order(k)) for k in requests}
    gone = names[0]
    ring.remove(gone)
    after = {k: next(ring.order(k)) for k in requests}
    assert all(after[k] == before[k] for k in requests if before[k] != gone)


def test_most_keys_stay_put_when_a_fourth_replica_joins() -> None:
    """About 1/4 of the keys move to the newcomer (virtual nodes keep the share near it)."""
    ring = BoundedLoadRing(["a:8001", "b:8001", "c:8001"])
    products = [f"Product: item {i}" for i in range(2000)]
    before = [next(ring.order(k)) for k in products]
    ring.add("d:8001")
    moved = sum(next(ring.order(k)) != b for k, b in zip(products, before, strict=True))
    assert 0.1 < moved / len(products) < 0.4


def test_an_idle_ring_sends_one_key_to_one_replica_whatever_the_load_elsewhere() -> None:
    ring = BoundedLoadRing(["a", "b", "c"], 1.25)
    home = next(ring.order("Product: Aurora NC700"))
    for busy in ({}, {n: 1 for n in "abc" if n != home}):
        loads = dict.fromkeys("abc", 0) | busy
        assert ring.pick("Product: Aurora NC700", loads) == home


def test_the_affinity_key_is_the_instructions_and_the_products_line() -> None:
    def prompt(product: str, verdict: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": "You are a shopping assistant."},
            {"role": "user", "content": f"Product: {product}\nVerdict: {verdict}\nReasons:"},
        ]

    assert affinity_key(prompt("Aurora", "Buy now")) == affinity_key(prompt("Aurora", "Wait"))
    assert affinity_key(prompt("Aurora", "Buy now")) != affinity_key(prompt("Borealis", "Wait"))


def test_a_balance_of_one_is_refused() -> None:
    with pytest.raises(ValueError, match="balance"):
        BoundedLoadRing(["a"], 1.0)
