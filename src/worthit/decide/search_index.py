"""The catalogue's names in an SQLite FTS5 index, and the ranking of what it finds.

FTS5 (unicode61 over the terms of `search_text`, bm25) finds candidates in well under a
millisecond at 100,000 products; Python then ranks them by how a shopper means a name:
how much of the query a product matches (exactly, by a typo away, or as a prefix while
typing), whether one of its names holds the query with nothing more (a brand + model
code, an alias in any language), and popularity last. Tokens of every name are
precomputed here, so the same analysis serves both sides.

The index lives in process memory and is built from the store's product rows, so it is
the same on SQLite and PostgreSQL; `update` keeps it current as product records arrive.
"""

from __future__ import annotations

import sqlite3
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rapidfuzz import process
from rapidfuzz.distance import OSA

from worthit.decide.search_text import Analysed, Term, analyse, is_variant, weight
from worthit.market.entities import SearchHit

CANDIDATES = 200
"""Products FTS5 hands to the ranking: the ones matching most of the query's rare terms."""
PREFIX_QUALITY = 0.85
"""A term still being typed ("auro" for "aurora") counts a little less than a whole one."""
TYPO_QUALITY = {1: 0.9, 2: 0.8}
"""A term one or two edits from a catalogue term (a typo) counts a little less again."""
EXTRA_PENALTY = 4.0
"""Score lost per extra model word in the best name ("Q5 Pro" when the shopper said "Q5")."""
_CORRECTIONS_KEPT = 4096


@dataclass(frozen=True, slots=True)
class Name:
    """One way a product is named, analysed. A title carries kind words after the model
    ("... Noise Cancelling Headphones") that a shopper leaves out; a label (brand, alias,
    brand + alias, SKU) does not, so every word of a label the query misses is extra."""

    analysed: Analysed
    is_title: bool


@dataclass(frozen=True, slots=True)
class Entry:
    hit: SearchHit
    names: tuple[Name, ...]
    popularity: int


@dataclass(frozen=True, slots=True)
class Match:
    """A product and how well it matches: `coverage` is the share of the query's weight
    it matches, `score` (0-100) also counts words its best name has beyond the query."""

    hit: SearchHit
    score: float
    coverage: float
    popularity: int


def names_of(hit: SearchHit) -> tuple[Name, ...]:
    """Title, SKU, brand, each alias, and the brand before each alias that lacks it, so
    "Kestrel Q5" is a whole name of the product whose aliases say "Q5"."""
    labels = [hit.sku, hit.brand, *hit.aliases]
    brand = hit.brand.casefold()
    if brand:
        labels += [f"{hit.brand} {a}" for a in hit.aliases if brand not in a.casefold()]
    names = [Name(analyse(hit.title), True)]
    names += [Name(analyse(label), False) for label in dict.fromkeys(labels) if label]
    return tuple(name for name in names if name.analysed.positions)


class SearchIndex:
    """Thread-safe: one in-memory SQLite connection behind a lock (a query holds it for
    well under a millisecond), the entries in plain dicts."""

    def __init__(self, hits: Iterable[SearchHit], popularity: Mapping[str, int]) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE names USING fts5("
            "terms, popularity UNINDEXED, tokenize = 'unicode61 remove_diacritics 0')"
        )
        self._entries: dict[int, Entry] = {}
        self._rowids: dict[str, int] = {}
        self._vocabulary: dict[str, int] = {}
        self._words: list[str] | None = None
        self._corrections: OrderedDict[str, list[tuple[str, int]]] = OrderedDict()
        self._popularity = dict(popularity)
        self.update(hits)

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, sku: str) -> Entry | None:
        rowid = self._rowids.get(sku)
        return None if rowid is None else self._entries.get(rowid)

    def update(self, hits: Iterable[SearchHit], popularity: Mapping[str, int] = {}) -> None:
        """Add products, or replace the names of ones already indexed."""
        with self._lock:
            self._popularity.update(popularity)
            rows = []
            for hit in hits:
                old = self._rowids.get(hit.sku)
                if old is not None:
                    self._forget(old)
                entry = Entry(hit, names_of(hit), self._popularity.get(hit.sku, 0))
                rowid = old if old is not None else len(self._rowids) + 1
                while old is None and rowid in self._entries:
                    rowid += 1
                self._rowids[hit.sku] = rowid
                self._entries[rowid] = entry
                texts = {t.text for n in entry.names for t in n.analysed.terms}
                for text in texts:
                    self._vocabulary[text] = self._vocabulary.get(text, 0) + 1
                rows.append((rowid, " ".join(sorted(texts)), entry.popularity))
            self._db.executemany(
                "INSERT INTO names (rowid, terms, popularity) VALUES (?, ?, ?)", rows
            )
            self._words = None
            self._corrections.clear()

    def _forget(self, rowid: int) -> None:
        entry = self._entries.pop(rowid)
        for text in {t.text for n in entry.names for t in n.analysed.terms}:
            left = self._vocabulary.get(text, 1) - 1
            if left:
                self._vocabulary[text] = left
            else:
                self._vocabulary.pop(text, None)
        self._db.execute("DELETE FROM names WHERE rowid = ?", (rowid,))

    def search(self, text: str, limit: int = 8, *, prefix: bool = False) -> list[Match]:
        """Products for `text`, best first. `prefix`: the last word may be unfinished
        (autocomplete); otherwise every term is whole, or a typo of a whole one."""
        query = analyse(text)
        if not query.positions:
            return []
        with self._lock:
            wanted = self._wanted(query)
            started = self._started(query) if prefix else None
            expression = " OR ".join(_quoted(t) for t in wanted)
            if started:
                expression = " OR ".join(filter(None, [expression, _quoted(started) + "*"]))
            if not expression:
                return []
            rows = self._db.execute(
                "SELECT rowid FROM names WHERE names MATCH ?"
                " ORDER BY round(bm25(names), 1), popularity DESC LIMIT ?",
                (expression, CANDIDATES),
            ).fetchall()
            entries = [self._entries[row[0]] for row in rows]
        matches = [
            m for m in (_match(e, query, wanted, started) for e in entries) if m.coverage > 0
        ]
        matches.sort(key=lambda m: (-m.score, -m.popularity, m.hit.sku))
        return matches[:limit]

    def _wanted(self, query: Analysed) -> dict[str, list[tuple[Term, float]]]:
        """Catalogue term → the query terms it satisfies and how well (1 exact, less for
        a typo). A query term the catalogue lacks is looked up as a typo."""
        wanted: dict[str, list[tuple[Term, float]]] = {}
        for term in query.terms:
            if term.text in self._vocabulary:
                wanted.setdefault(term.text, []).append((term, 1.0))
                continue
            if any(query.cjk[term.start : term.end]) or len(term.text) < 4:
                continue
            for corrected, distance in self._typos(term.text):
                wanted.setdefault(corrected, []).append((term, TYPO_QUALITY[distance]))
        return wanted

    def _typos(self, text: str) -> list[tuple[str, int]]:
        """Catalogue terms one edit away (two for long words), transpositions counting one."""
        cached = self._corrections.get(text)
        if cached is not None:
            return cached
        if self._words is None:
            self._words = [w for w in self._vocabulary if w.isascii()]
        most = 1 if len(text) < 8 else 2
        found = process.extract(text, self._words, scorer=OSA.distance, score_cutoff=most, limit=8)
        corrections = [(word, int(distance)) for word, distance, _ in found if distance >= 1]
        self._corrections[text] = corrections
        if len(self._corrections) > _CORRECTIONS_KEPT:
            self._corrections.popitem(last=False)
        return corrections

    @staticmethod
    def _started(query: Analysed) -> str | None:
        """The last position, if long enough to complete without listing the catalogue."""
        last = query.positions[-1]
        return last if len(last) >= (1 if query.cjk[-1] else 2) else None


def _quoted(term: str) -> str:
    """An FTS5 string: whatever the text holds, it is a phrase, never syntax."""
    return '"' + term.replace('"', '""') + '"'


def _match(
    entry: Entry,
    query: Analysed,
    wanted: Mapping[str, list[tuple[Term, float]]],
    started: str | None,
) -> Match:
    weights = [weight(p, c) for p, c in zip(query.positions, query.cjk, strict=True)]
    total = sum(weights)
    last = len(query.positions) - 1
    overall = [0.0] * len(weights)
    best_weight, best_extra = 0.0, 0
    for name in entry.names:
        quality = [0.0] * len(weights)
        covered: set[int] = set()
        for term in name.analysed.terms:
            hits = wanted.get(term.text, ())
            for wanted_term, value in hits:
                for i in range(wanted_term.start, wanted_term.end):
                    quality[i] = max(quality[i], value)
            if not hits and started and term.text.startswith(started):
                quality[last] = max(quality[last], PREFIX_QUALITY)
            elif not hits:
                continue
            covered.update(range(term.start, term.end))
        if not covered:
            continue
        matched = sum(w * q for w, q in zip(weights, quality, strict=True))
        extra = _extra(name, covered)
        if (matched, -extra) > (best_weight, -best_extra):
            best_weight, best_extra = matched, extra
        overall = [max(a, b) for a, b in zip(overall, quality, strict=True)]
    coverage = sum(w * q for w, q in zip(weights, overall, strict=True)) / total
    score = 100 * (0.8 * coverage + 0.2 * best_weight / total) - EXTRA_PENALTY * min(best_extra, 5)
    return Match(entry.hit, round(max(score, 0.0), 1), round(coverage, 3), entry.popularity)


def _extra(name: Name, covered: set[int]) -> int:
    """Words of this name beyond what the query matched. In a label, every one; in a
    title, the ones inside the matched stretch, and a variant word just after it."""
    positions = name.analysed.positions
    if not name.is_title:
        return len(positions) - len(covered)
    low, high = min(covered), max(covered)
    gaps = high - low + 1 - len(covered)
    after = positions[high + 1] if high + 1 < len(positions) else None
    return gaps + (1 if after is not None and is_variant(after) else 0)
