"""Free-text product mention → one SKU, or the closest candidates; never a silent guess.

Exact names (SKU, title, alias) win outright. Otherwise the full-text index proposes
candidates and rapidfuzz scores them; only when the index finds nothing (a typo) does
fuzzy matching scan every name. A mention resolves when the best score is high and
clearly ahead of the runner-up.
"""

from __future__ import annotations

import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from rapidfuzz import fuzz, process

from worthit.market.entities import SearchHit
from worthit.market.store import MarketStore

RESOLVE_SCORE = 88.0
CLEAR_MARGIN = 6.0
CANDIDATE_SCORE = 55.0
MAX_CANDIDATES = 5


_FILLER = frozenset({"the", "a", "an", "this", "that", "my", "new", "one"})


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
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split())


def _names(hit: SearchHit) -> list[str]:
    names = [hit.title, *hit.aliases]
    if hit.brand and hit.aliases:
        names.append(f"{hit.brand} {hit.aliases[0]}")
    return names


class ProductResolver:
    def __init__(self, store: MarketStore, cache_size: int = 4096) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, Resolution] = OrderedDict()
        self._cache_size = cache_size
        self.reload()

    def reload(self) -> None:
        """Re-read the catalogue's names (after an import adds products)."""
        hits = self.store.all_names()
        exact: dict[str, set[str]] = {}
        choices: list[str] = []
        owners: list[SearchHit] = []
        for hit in hits:
            for name in [hit.sku, *_names(hit)]:
                exact.setdefault(normalise(name), set()).add(hit.sku)
            for name in _names(hit):
                choices.append(normalise(name))
                owners.append(hit)
        with self._lock:
            self._by_sku = {hit.sku: hit for hit in hits}
            self._exact = exact
            self._choices = choices
            self._owners = owners
            self._cache.clear()

    def title(self, sku: str) -> str:
        hit = self._by_sku.get(sku)
        return hit.title if hit else sku

    def resolve(self, mention: str) -> Resolution:
        key = normalise(mention)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None:
                self._cache.move_to_end(key)
                return cached
        resolution = self._resolve(mention, key)
        with self._lock:
            self._cache[key] = resolution
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return resolution

    def _resolve(self, mention: str, key: str) -> Resolution:
        if not key:
            return Resolution(mention, ResolutionStatus.UNKNOWN, None, ())
        exact = self._exact.get(key)
        if exact and len(exact) == 1:
            sku = next(iter(exact))
            return Resolution(
                mention,
                ResolutionStatus.RESOLVED,
                sku,
                (Candidate(sku, self.title(sku), 100.0),),
            )
        scored = self._score(key, self.store.search(key, limit=25))
        if not scored:
            scored = self._scan(key)
        if not scored:
            return Resolution(mention, ResolutionStatus.UNKNOWN, None, ())
        best = scored[0]
        runner_up = scored[1].score if len(scored) > 1 else 0.0
        top = tuple(scored[:MAX_CANDIDATES])
        if best.score >= RESOLVE_SCORE and best.score - runner_up >= CLEAR_MARGIN:
            return Resolution(mention, ResolutionStatus.RESOLVED, best.sku, top)
        status = (
            ResolutionStatus.AMBIGUOUS
            if best.score >= CANDIDATE_SCORE
            else ResolutionStatus.UNKNOWN
        )
        return Resolution(mention, status, None, top)

    def _score(self, key: str, hits: list[SearchHit]) -> list[Candidate]:
        best: dict[str, float] = {}
        for hit in hits:
            score = max(_similarity(key, normalise(name)) for name in _names(hit))
            best[hit.sku] = max(score, best.get(hit.sku, 0.0))
        return _ranked(best, self.title)

    def _scan(self, key: str) -> list[Candidate]:
        matches = process.extract(
            key, self._choices, scorer=fuzz.QRatio, limit=20, score_cutoff=CANDIDATE_SCORE - 15
        )
        best: dict[str, float] = {}
        for _, _, index in matches:
            owner = self._owners[index]
            score = max(_similarity(key, normalise(name)) for name in _names(owner))
            best[owner.sku] = max(score, best.get(owner.sku, 0.0))
        return _ranked(best, self.title)


def _similarity(mention: str, name: str) -> float:
    """How well a mention names a product: containment counts, as do typos.

    token_set_ratio rewards "aurora nc700" inside a long title; ratio keeps the
    score honest when the mention is a near-spelling of a short alias. Two or three
    characters say too little to resolve anything but an exact name.
    """
    if mention == name:
        return 100.0
    informative = _weight(mention) >= 4
    score = max(
        96.0 if mention in name and informative else 0.0,
        fuzz.token_set_ratio(mention, name),
        fuzz.ratio(mention, name),
        fuzz.partial_ratio(mention, name) * 0.9,
    )
    score *= 0.4 + 0.6 * _coverage(mention, name)
    return score if informative else min(score, CANDIDATE_SCORE - 1)


def _coverage(mention: str, name: str) -> float:
    """Share of the mention's words found (exactly, inside, or nearly) among the name's.

    Whole-string scores forgive an invented word next to a real one ("Zorblax 900"
    is close to "BX900"); coverage does not.
    """
    words = [w for w in mention.split() if w not in _FILLER]
    targets = name.split()
    total = 0.0
    for word in words:
        best = 0.0
        for target in targets:
            if word == target or (word in target and _weight(word) >= 4):
                best = 1.0
                break
            best = max(best, fuzz.ratio(word, target) / 100)
        total += best if best >= 0.8 else 0.0
    return total / len(words) if words else 0.0


def _weight(text: str) -> int:
    """Length in Latin-letter equivalents: one Chinese character says about as much as two."""
    return sum(2 if "\u3400" <= ch <= "\u9fff" else 1 for ch in text if not ch.isspace())


def _ranked(best: dict[str, float], title: Callable[[str], str]) -> list[Candidate]:
    ordered = sorted(best.items(), key=lambda item: (-item[1], item[0]))
    return [
        Candidate(sku, title(sku), round(score, 1))
        for sku, score in ordered
        if score >= CANDIDATE_SCORE - 15
    ]
