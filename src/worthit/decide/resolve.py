"""Free-text product mention → one SKU, or the closest candidates; never a silent guess.

The search index (decide/search_index.py) ranks the catalogue for the mention; this
module decides whether its first product is the one meant. It is when it matches most
of what was typed and either stands clearly ahead (its name holds the mention with no
model word more, where a rival's has one: "Kestrel Q5" over "Kestrel Q5 Pro") or is the
only product matching that much. Otherwise the shopper is shown the candidates, most
popular first. Autocomplete goes through the same index, so what a shopper is offered
while typing is what a question about it resolves to.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from worthit.decide.intent import parse_intent
from worthit.decide.search_index import Match, SearchIndex
from worthit.decide.search_text import fold
from worthit.market.entities import SearchHit
from worthit.market.store import MarketStore
from worthit.text.lru import LRU

RESOLVE_COVERAGE = 0.75
"""Share of the mention's weight the product must match to be answered."""
CLEAR_MARGIN = 3.0
"""Score points the first product must stand ahead of the second by (one extra model
word costs 4)."""
CANDIDATE_COVERAGE = 0.5
"""Below this share a product is not even offered as a candidate."""
MAX_CANDIDATES = 5
POPULARITY_DAYS = 30
"""Popularity is units sold over this many days up to the market's last price."""


class ResolutionStatus(StrEnum):
    RESOLVED = "resolved"
    AMBIGUOUS = "ambiguous"
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Candidate:
    sku: str
    title: str
    score: float


@dataclass(frozen=True, slots=True)
class Resolution:
    mention: str
    status: ResolutionStatus
    sku: str | None
    candidates: tuple[Candidate, ...]


def normalise(text: str) -> str:
    """Case, width and spacing folded, so 'ＮＣ７００' and 'nc700 ' meet."""
    return fold(text)


def decide(mention: str, matches: list[Match]) -> Resolution:
    """The resolution of `mention` given the index's ranked matches."""
    offered = [m for m in matches if m.coverage >= CANDIDATE_COVERAGE]
    candidates = tuple(Candidate(m.hit.sku, m.hit.title, m.score) for m in offered)
    if not offered:
        return Resolution(mention, ResolutionStatus.UNKNOWN, None, ())
    best = offered[0]
    runner_up = offered[1] if len(offered) > 1 else None
    clear = runner_up is None or best.score - runner_up.score >= CLEAR_MARGIN
    if (best.coverage >= RESOLVE_COVERAGE and clear) or runner_up is None:
        return Resolution(mention, ResolutionStatus.RESOLVED, best.hit.sku, candidates)
    return Resolution(mention, ResolutionStatus.AMBIGUOUS, None, candidates)


class ProductResolver:
    """Resolution and autocomplete over one search index of the store's catalogue."""

    def __init__(self, store: MarketStore, cache_size: int = 4096) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._cache: LRU[str, Resolution] = LRU(cache_size)
        self.reload()

    def reload(self) -> None:
        """Index the catalogue afresh (after an import adds products)."""
        index = SearchIndex(self.store.all_names(), self._popularity())
        with self._lock:
            self.index = index
            self._cache.clear()

    def refresh(self, skus: Iterable[str]) -> None:
        """Re-read these products' names: events may have added or renamed them."""
        changed = []
        for sku in set(skus):
            product = self.store.product(sku)
            if product is None:
                continue
            hit = SearchHit(
                product.sku, product.title, product.brand, product.category, product.aliases
            )
            entry = self.index.entry(sku)
            if entry is None or entry.hit != hit:
                changed.append(hit)
        if changed:
            self.index.update(changed)
            with self._lock:
                self._cache.clear()

    def _popularity(self) -> dict[str, int]:
        span = self.store.price_span()
        if span is None:
            return {}
        last = datetime.fromtimestamp(span[1] / 1000, UTC).date()
        since = last - timedelta(days=POPULARITY_DAYS - 1)
        rows = self.store.top_by_sales(None, since.isoformat(), last.isoformat(), 10**9)
        return dict(rows)

    def title(self, sku: str) -> str:
        entry = self.index.entry(sku)
        return entry.hit.title if entry else sku

    def resolve(self, mention: str) -> Resolution:
        key = normalise(mention)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                return cached
        resolution = decide(mention, self.index.search(mention, MAX_CANDIDATES))
        with self._lock:
            self._cache.put(key, resolution)
        return resolution

    def suggest(self, text: str, limit: int = 8) -> list[SearchHit]:
        """Products for a search box: what is typed may be a name being typed or a whole
        question ("极光NC700值不值得买"), so the names the question mentions are searched,
        the last one as a prefix while the shopper is still typing it."""
        folded = fold(text)
        mentions = parse_intent(text).mentions or (text,)
        lists = [self.index.search(m, limit, prefix=folded.endswith(fold(m))) for m in mentions]
        hits: dict[str, SearchHit] = {}
        for rank in range(limit):
            for matches in lists:
                if rank < len(matches):
                    hits.setdefault(matches[rank].hit.sku, matches[rank].hit)
        return list(hits.values())[:limit]
