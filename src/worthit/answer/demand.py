"""What shoppers are about to ask: which products, in which language, and what missed.

The background generator writes explanations in this order, so the store covers the
most demand soonest: a (product, language) pair weighs its product's sales over the last
week times the share of recent questions asked in that language. Every language asked in
often (`EQUAL_SHARE` of the questions or more) is written product by product together
with the others: a shopper asking in Chinese, a quarter of the questions, would otherwise
find the store holding a third as many of the best sellers as one asking in English. A
language asked in rarely keeps its place by its share.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

LANGUAGES = ("en", "zh", "ja")
PRIOR_SHARES = {"en": 0.75, "zh": 0.25, "ja": 0.0}
"""Before any question was asked: what the demo's traffic mix is (benchmarks ask one
question in four in Chinese, none in Japanese: Japanese gets its share as it is asked)."""
PRIOR_WEIGHT = 200
"""Questions' worth of the prior in the shares: the first few questions do not swing them."""
EQUAL_SHARE = 0.1
"""A language asked at least this share of the time is written as early as any other."""
WANTED_LIMIT = 4096
SALES_WINDOW_DAYS = 7
"""Demand is last week's sales."""


class LanguageMix:
    """The share of recent questions in each language (answered questions, counted)."""

    def __init__(self) -> None:
        self._counts = dict.fromkeys(LANGUAGES, 0)
        self._lock = threading.Lock()

    def count(self, language: str) -> None:
        with self._lock:
            if language in self._counts:
                self._counts[language] += 1

    def shares(self) -> dict[str, float]:
        with self._lock:
            total = sum(self._counts.values()) + PRIOR_WEIGHT
            return {
                lang: (self._counts[lang] + PRIOR_WEIGHT * PRIOR_SHARES[lang]) / total
                for lang in LANGUAGES
            }


class Wanted:
    """Pairs a shopper asked for and did not get from the store: generated first, the
    pair missed most often first, the oldest miss among equals.

    Shoppers miss several pairs a second under load (a live feed restates the prompts of
    best sellers while they are asked about) and the engine writes about one a second: in
    arrival order a best seller restated a minute into the traffic would wait behind a
    minute of once-asked pairs, and every asker in between would get the template. Not a
    cache, so not a `worthit.text.lru.LRU`; when full the pair missed least (the oldest
    among equals) is dropped, and it comes round again in the demand walk.
    """

    def __init__(self, limit: int = WANTED_LIMIT) -> None:
        self.limit = limit
        self._misses: dict[tuple[str, str], int] = {}
        """Misses counted since the pair was queued, in the order pairs were queued."""
        self._lock = threading.Lock()

    def add(self, sku: str, language: str) -> None:
        with self._lock:
            pair = (sku, language)
            self._misses[pair] = self._misses.get(pair, 0) + 1
            if len(self._misses) > self.limit:
                del self._misses[min(self._misses, key=self._misses.__getitem__)]

    def pop(self) -> tuple[str, str] | None:
        with self._lock:
            if not self._misses:
                return None
            pair = max(self._misses, key=self._misses.__getitem__)
            del self._misses[pair]
            return pair

    def __len__(self) -> int:
        return len(self._misses)


def demand_order(
    sales: dict[str, float], skus: list[str], shares: dict[str, float]
) -> Iterator[tuple[str, str, float]]:
    """(sku, language, weight), the weight its share of demand; best sellers first, in
    every language asked in often, then the rarer languages by their weight; products
    without sales last, in sku order."""
    pairs = [
        (sku, lang, sales.get(sku, 0.0) * share) for sku in skus for lang, share in shares.items()
    ]

    def first(pair: tuple[str, str, float]) -> tuple[float, str, str]:
        sku, lang, _ = pair
        urgency = sales.get(sku, 0.0) * min(1.0, shares[lang] / EQUAL_SHARE)
        return (-urgency, sku, lang)

    pairs.sort(key=first)
    yield from pairs
