"""Product resolution: exact names win, close names resolve, ambiguity is never guessed away."""

from __future__ import annotations

from pathlib import Path

import pytest

from worthit.decide.resolve import ProductResolver, ResolutionStatus
from worthit.market.records import ProductRecord
from worthit.market.store import MarketStore

CATALOGUE = [
    ("S1", "Aurora NC700 Wireless Headphones", "Aurora", ["NC700", "极光NC700"]),
    ("S2", "Aurora NC500 Wireless Headphones", "Aurora", ["NC500", "极光NC500"]),
    ("S5", "Kestrel Q5 Noise Cancelling Headphones", "Kestrel", ["Q5", "红隼Q5"]),
    ("S6", "Nordvik Aria ANC Headphones", "Nordvik", ["Aria ANC"]),
    ("S7", "Halden BrewMaster 3 Espresso Machine", "Halden", ["BrewMaster 3", "哈尔登咖啡机"]),
]


@pytest.fixture(scope="module")
def resolver(tmp_path_factory: pytest.TempPathFactory) -> ProductResolver:
    store = MarketStore(Path(tmp_path_factory.mktemp("r")) / "m.db")
    store.apply(
        [
            ProductRecord(sku=sku, title=title, brand=brand, category="x", aliases=aliases)
            for sku, title, brand, aliases in CATALOGUE
        ]
    )
    return ProductResolver(store)


@pytest.mark.parametrize(
    ("mention", "sku"),
    [
        ("Aurora NC700", "S1"),
        ("the aurora nc700 headphones", "S1"),
        ("NC700", "S1"),
        ("nc700", "S1"),
        ("ＮＣ７００", "S1"),
        ("极光NC700", "S1"),
        ("S7", "S7"),
        ("Auroa NC700", "S1"),
        ("Kestrel Q5", "S5"),
        ("brewmaster 3", "S7"),
        ("Nordvik Aria", "S6"),
        ("哈尔登咖啡机", "S7"),
    ],
)
def test_mentions_that_name_one_product_resolve(
    resolver: ProductResolver, mention: str, sku: str
) -> None:
    resolution = resolver.resolve(mention)
    assert resolution.status is ResolutionStatus.RESOLVED, resolution
    assert resolution.sku == sku


@pytest.mark.parametrize("mention", ["Aurora headphones", "Aurora wireless", "极光"])
def test_a_mention_fitting_several_products_is_ambiguous(
    resolver: ProductResolver, mention: str
) -> None:
    resolution = resolver.resolve(mention)
    assert resolution.status is ResolutionStatus.AMBIGUOUS, resolution
    assert resolution.sku is None
    assert {"S1", "S2"} <= {c.sku for c in resolution.candidates}


@pytest.mark.parametrize("mention", ["Zorblax Hyperdrive 9000", "", "   ", "qq"])
def test_unknown_mentions_return_no_sku(resolver: ProductResolver, mention: str) -> None:
    resolution = resolver.resolve(mention)
    assert resolution.status is ResolutionStatus.UNKNOWN
    assert resolution.sku is None


def test_candidates_are_ordered_best_first(resolver: ProductResolver) -> None:
    candidates = resolver.resolve("Aurora headphones").candidates
    scores = [c.score for c in candidates]
    assert scores == sorted(scores, reverse=True)
    assert len(candidates) <= 5
