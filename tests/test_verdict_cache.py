"""The verdict cache answers exactly what the rules would, and only reuses a verdict when
nothing the rules read has changed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worthit.answer.payload import verdict_payload
from worthit.decide.decider import Decider, Decision
from worthit.decide.resolve import ProductResolver
from worthit.decide.rules import decide_verdict
from worthit.decide.verdict_cache import VerdictCache
from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.facts.sheet import FactSheet
from worthit.market.store import MarketStore
from worthit.text.time import DAY_MS, iso

from conftest import MARKET_NOW_MS, market_clock

QUESTIONS = (
    "Is the {title} worth buying?",
    "Should I wait for a sale on the {title}?",
    "Is the {title} worth buying under ${budget}?",
    "{title}值不值得买？",
    "{title}和{other}哪个好",
    "{title} or {other}?",
)


@pytest.fixture(scope="module")
def store(small_market: Path) -> Iterator[MarketStore]:
    store = MarketStore(small_market)
    yield store
    store.close()


@pytest.fixture(scope="module")
def sheets(store: MarketStore) -> list[FactSheet]:
    builder = FactsBuilder(store, market_clock())
    built = (builder.build(hit.sku) for hit in store.all_names())
    return [sheet for sheet in built if sheet is not None]


def test_an_unchanged_sheet_is_a_hit(sheets: list[FactSheet]) -> None:
    cache = VerdictCache()
    first = cache.verdict(sheets[0], "en")
    again = cache.verdict(replace(sheets[0], data_age_ms=sheets[0].data_age_ms + 5_000), "en")
    assert again is first and (cache.hits, cache.misses) == (1, 1)
    assert first == decide_verdict(sheets[0], "en")


@pytest.mark.parametrize(
    ("change", "language", "budget"),
    [
        ({"version": "0123456789abcdef"}, "en", None),
        ({}, "zh", None),
        ({}, "en", 99.0),
    ],
    ids=["facts version", "language", "budget"],
)
def test_anything_the_rules_read_changing_is_a_miss(
    sheets: list[FactSheet], change: dict[str, Any], language: str, budget: float | None
) -> None:
    cache = VerdictCache()
    cache.verdict(sheets[0], "en")
    changed = replace(sheets[0], **change)
    assert cache.verdict(changed, language, budget) == decide_verdict(
        changed, language, budget=budget
    )
    assert (cache.hits, cache.misses) == (0, 2) and len(cache) == 2


def test_a_sheet_rebuilt_at_a_new_moment_is_decided_again(sheets: list[FactSheet]) -> None:
    """The rules read `as_of` (a promotion that starts later), so a new moment is a miss;
    an unchanged verdict is then the very object kept, so whatever is kept for it (the
    explanation run's basis, answer/run_memo.py) survives the rebuild."""
    cache = VerdictCache()
    sheet = next(s for s in sheets if s.discount_claim is None)
    first = cache.verdict(sheet, "en")
    rebuilt = replace(sheet, as_of=iso(MARKET_NOW_MS + 1_000))
    assert cache.verdict(rebuilt, "en") is first
    assert cache.verdict(rebuilt, "en") is first
    assert (cache.hits, cache.misses, len(cache)) == (1, 2, 1)

    def early(sheet: FactSheet) -> FactSheet:
        return replace(sheet, as_of="2000-01-01T00:00:00Z")  # its offer starts later

    moved = next(s for s in sheets if decide_verdict(early(s), "en") != decide_verdict(s, "en"))
    now = cache.verdict(moved, "en")
    then = cache.verdict(early(moved), "en")
    assert then != now and then == decide_verdict(early(moved), "en")
    assert cache.verdict(moved, "en") == now


def test_live_data_past_its_objective_is_decided_every_time(sheets: list[FactSheet]) -> None:
    cache = VerdictCache()
    stale = replace(sheets[0], fed_by_events=True, data_age_ms=2 * DAY_MS)
    older = replace(stale, data_age_ms=30 * DAY_MS)
    first, second = cache.verdict(stale, "en"), cache.verdict(older, "en")
    assert "stale_data" in {r.code for r in first.reasons}
    assert first != second and second == decide_verdict(older, "en")
    assert (cache.hits, cache.misses, cache.uncacheable, len(cache)) == (0, 0, 2, 0)


def test_the_oldest_verdict_goes_first_when_full(sheets: list[FactSheet]) -> None:
    cache = VerdictCache(capacity=2)
    for sheet in sheets[:3]:
        cache.verdict(sheet, "en")
    cache.verdict(sheets[2], "en")
    cache.verdict(sheets[0], "en")
    assert len(cache) == 2 and (cache.hits, cache.misses) == (1, 4)


AGES = st.one_of(st.just(-1), st.integers(0, 120_000), st.integers(0, 40 * DAY_MS))
BUDGETS = st.one_of(st.none(), st.sampled_from([19.99, 99.0, 250.0, 1_000.0, 5_000.0]))
SHARED = VerdictCache()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_shared_cache_gives_the_rules_verdict_for_any_sheet(
    sheets: list[FactSheet], data: st.DataObject
) -> None:
    """One cache across every example, so entries made at one age, language or budget
    are offered to the others: a key missing an input would hand back a wrong verdict."""
    sheet = data.draw(st.sampled_from(sheets))
    sheet = replace(
        sheet,
        data_age_ms=data.draw(AGES),
        fed_by_events=data.draw(st.booleans()),
    )
    language = data.draw(st.sampled_from(["en", "zh"]))
    budget = data.draw(BUDGETS)
    assert SHARED.verdict(sheet, language, budget) == decide_verdict(sheet, language, budget=budget)


def deciders(store: MarketStore) -> tuple[Decider, Decider]:
    resolver = ProductResolver(store)
    cached = Decider(FactsCache(FactsBuilder(store, market_clock())), resolver)
    uncached = Decider(
        FactsCache(FactsBuilder(store, market_clock())), resolver, verdicts=VerdictCache(0)
    )
    return cached, uncached


def answer(decision: Decision) -> dict[str, Any]:
    payload = verdict_payload(decision)
    payload.pop("data_age_ms")  # read later from the same cached sheet: older by then
    return payload


@pytest.fixture(scope="module")
def both(store: MarketStore) -> tuple[Decider, Decider]:
    return deciders(store)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_cached_and_uncached_answers_are_equal(
    store: MarketStore, both: tuple[Decider, Decider], data: st.DataObject
) -> None:
    cached, uncached = both
    names = store.all_names()
    hit, other = data.draw(st.sampled_from(names)), data.draw(st.sampled_from(names))
    template = data.draw(st.sampled_from(QUESTIONS))
    budget = data.draw(st.sampled_from([49, 199, 999]))
    question = template.format(title=hit.title, other=other.title, budget=budget)
    sku = data.draw(st.one_of(st.none(), st.just(hit.sku)))
    language = data.draw(st.sampled_from([None, "en", "zh"]))
    at_ms = data.draw(st.one_of(st.none(), st.just(MARKET_NOW_MS - 20 * DAY_MS)))
    for _ in range(2):  # the second is answered from the cache
        a = cached.decide(question, sku=sku, language=language, at_ms=at_ms)
        b = uncached.decide(question, sku=sku, language=language, at_ms=at_ms)
        assert answer(a) == answer(b)
        assert [j.verdict for j in a.compared] == [j.verdict for j in b.compared]
    assert uncached.verdicts.hits == 0


def test_the_decider_reuses_a_verdict_of_unchanged_facts(store: MarketStore) -> None:
    cached, _ = deciders(store)
    first = cached.decide("Is the Aurora NC700 worth buying?")
    again = cached.decide("Should I buy the Aurora NC700?")
    assert first.verdict is not None and again.verdict is first.verdict
    assert cached.verdicts.hits == 1
