"""The catalogue's names in an SQLite FTS5 index, and the ranking of what it finds.

FTS5 (unicode61 over the terms of `search_text`) finds candidates; Python then ranks
them by how a shopper means a name: how much of the query a product matches (exactly,
by a typo away, or as a prefix while typing), whether one of its names holds the query
with nothing more (a brand + model code, an alias in any language), and popularity last.

Candidates come in two steps, each bounded so that a common word costs no more at
100,000 products than at 2,000. Rows are numbered by popularity, so FTS5's natural rowid
order is "most popular first" and a LIMIT stops early. First, products matching every
word the catalogue knows (typos as their corrections); when none does (a word of a
question, a wrong model), products matching any of the rarest words, ranked by bm25.

The index lives in process memory and is built from the store's product rows, so it is
the same on SQLite and PostgreSQL; `update` keeps it current as product records arrive.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rapidfuzz import process
from rapidfuzz.distance import OSA

from worthit.decide.search_text import Analysed, Term, analyse, is_variant, weight
from worthit.market.entities import SearchHit
from worthit.text.lru import LRU

CANDIDATES = 50
"""Products FTS5 hands to the ranking."""
OR_ROWS = 2000
"""The most rows the any-word step lets FTS5 rank by bm25: its rarest words are used
while their products add up to no more; a single word commoner than that is read in
popularity order instead."""
PREFIX_QUALITY = 0.85
"""A word still being typed ("auro" for "aurora") counts a little less than a whole one."""
SPELLING_QUALITY = 0.9
"""A model code written with another spacing ("Air 500" for "Air500") counts a little less,
so a product spelt as the shopper spelt it wins over one spelt otherwise."""
TYPO_QUALITY = {1: 0.9, 2: 0.8}
"""A word one or two edits from a catalogue word (a typo) counts a little less again."""
EXTRA_PENALTY = 4.0
"""Score lost per extra model word in the best name ("Q5 Pro" when the shopper said "Q5")."""
_IGNORED_WEIGHT = 0.1
"""Positions weighing this little (filler, particles) are never required to match."""
_CORRECTIONS_KEPT = 4096
_REPEATED_KEPT = 50_000
_DIGITS = re.compile(r"\d+")


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
    texts: frozenset[str]
    """Every term of every name: what the product is found by."""


@dataclass(frozen=True, slots=True)
class Match:
    """A product and how well it matches: `coverage` is the share of the query's weight
    it matches, `score` (0-100) also counts words its best name has beyond the query."""

    hit: SearchHit
    score: float
    coverage: float
    popularity: int


def names_of(hit: SearchHit, known: dict[str, Analysed] | None = None) -> tuple[Name, ...]:
    """Title, SKU, brand, each alias, and the brand before each Latin alias that lacks
    it, so "Kestrel Q5" is a whole name of the product whose aliases say "Q5". `known`
    holds names analysed before (a catalogue repeats its brands and model codes)."""
    known = {} if known is None else known

    def analysed(text: str) -> Analysed:
        found = known.get(text)
        if found is None:
            found = known[text] = analyse(text)
        return found

    names = [Name(analyse(hit.title), True)]
    sku = hit.sku.casefold()
    names.append(Name(Analysed((sku,), (False,), ()) if sku.isalnum() else analyse(sku), False))
    brand = analysed(hit.brand) if hit.brand else None
    if brand is not None:
        names.append(Name(brand, False))
    folded = hit.brand.casefold()
    for alias in dict.fromkeys(hit.aliases):
        names.append(Name(analysed(alias), False))
        if brand is not None and alias.isascii() and folded not in alias.casefold():
            names.append(Name(_joined(brand, analysed(alias)), False))
    return tuple(name for name in names if name.analysed.positions)


def _joined(first: Analysed, second: Analysed) -> Analysed:
    """The analysis of "first second", from the two analyses (it is built for every
    product's brand and each of its model codes, so it is not analysed again)."""
    shift = len(first.positions)
    joins = [*first.joins, *(Term(j.text, j.start + shift, j.end + shift) for j in second.joins)]
    if first.positions and second.positions:
        left, right = first.positions[-1], second.positions[0]
        if not (first.cjk[-1] or second.cjk[0]) and right[0].isdigit() and left.isalpha():
            joins.append(Term(left + right, shift - 1, shift + 1))
    return Analysed(first.positions + second.positions, first.cjk + second.cjk, tuple(joins))


def entry_of(hit: SearchHit, popularity: int, known: dict[str, Analysed] | None = None) -> Entry:
    names = names_of(hit, known)
    return Entry(hit, names, popularity, frozenset(t for n in names for t in n.analysed.texts()))


Postings = dict[str, list[tuple[int, int, int]]]
"""Term → (name, start, end) of each place one product's names have it."""


def postings_of(entry: Entry) -> Postings:
    postings: Postings = {}
    for i, name in enumerate(entry.names):
        for text, start, end in name.analysed.terms:
            postings.setdefault(text, []).append((i, start, end))
    return postings


@dataclass(frozen=True, slots=True)
class _Query:
    analysed: Analysed
    weights: tuple[float, ...]
    wanted: dict[str, list[tuple[Term, float]]]
    """Catalogue term → the query terms it satisfies and how well."""
    started: str | None
    """The unfinished last word, when completing."""


class SearchIndex:
    """Thread-safe: one in-memory SQLite connection behind a lock (a query holds it for
    well under a millisecond), the entries in plain dicts."""

    def __init__(self, hits: Iterable[SearchHit], popularity: Mapping[str, int]) -> None:
        self._lock = threading.Lock()
        self._db = sqlite3.connect(":memory:", check_same_thread=False)
        self._db.execute(
            "CREATE VIRTUAL TABLE names USING fts5("
            "terms, tokenize = 'unicode61 remove_diacritics 0')"
        )
        self._db.execute(
            "CREATE VIRTUAL TABLE labels USING fts5("
            "label, tokenize = 'unicode61 remove_diacritics 0')"
        )
        self._entries: dict[int, Entry] = {}
        self._postings: dict[int, Postings] = {}
        """Of the products searches have ranked, made when first needed: most never are."""
        self._rowids: dict[str, int] = {}
        self._last_rowid = 0
        self._frequency: dict[str, int] = {}
        self._words: list[str] | None = None
        self._corrections: LRU[str, list[tuple[str, int]]] = LRU(_CORRECTIONS_KEPT)
        self._popularity = dict(popularity)
        ordered = sorted(hits, key=lambda hit: (-self._popularity.get(hit.sku, 0), hit.sku))
        self.update(ordered)

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, sku: str) -> Entry | None:
        rowid = self._rowids.get(sku)
        return None if rowid is None else self._entries.get(rowid)

    def update(self, hits: Iterable[SearchHit]) -> None:
        """Add products (after every one indexed: least popular), or rename ones indexed."""
        with self._lock:
            rows: list[tuple[int, str]] = []
            labels: list[tuple[int, str]] = []
            repeated: dict[str, Analysed] = {}
            for hit in hits:
                rowid = self._rowids.get(hit.sku)
                if rowid is not None:
                    self._forget(rowid)
                else:
                    self._last_rowid += 1
                    rowid = self._last_rowid
                entry = entry_of(hit, self._popularity.get(hit.sku, 0), repeated)
                if len(repeated) > _REPEATED_KEPT:
                    repeated.clear()
                self._rowids[hit.sku] = rowid
                self._entries[rowid] = entry
                for text in entry.texts:
                    self._frequency[text] = self._frequency.get(text, 0) + 1
                rows.append((rowid, " ".join(entry.texts)))
                whole = (_whole(n.analysed) for n in entry.names if not n.is_title)
                labels.append((rowid, " ".join(whole)))
            self._db.executemany("INSERT INTO names (rowid, terms) VALUES (?, ?)", rows)
            self._db.executemany("INSERT INTO labels (rowid, label) VALUES (?, ?)", labels)
            self._words = None
            self._corrections.clear()

    def _forget(self, rowid: int) -> None:
        entry = self._entries.pop(rowid)
        self._postings.pop(rowid, None)
        for text in entry.texts:
            left = self._frequency.get(text, 1) - 1
            if left:
                self._frequency[text] = left
            else:
                self._frequency.pop(text, None)
        self._db.execute("DELETE FROM names WHERE rowid = ?", (rowid,))
        self._db.execute("DELETE FROM labels WHERE rowid = ?", (rowid,))

    def search(self, text: str, limit: int = 8, *, prefix: bool = False) -> list[Match]:
        """Products for `text`, best first. `prefix`: the last word may be unfinished
        (autocomplete); otherwise every word is whole, or a typo of a whole one."""
        analysed = analyse(text)
        if not analysed.positions:
            return []
        with self._lock:
            query = self._query(analysed, prefix)
            rowids = self._every_word(query) or self._any_word(query)
            seen = set(rowids)
            rowids += [rowid for rowid in self._named(analysed) if rowid not in seen]
            found = [(self._entries[rowid], self._postings_of(rowid)) for rowid in rowids]
        matches = [m for m in (_match(e, p, query) for e, p in found) if m.coverage > 0]
        matches.sort(key=lambda m: (-m.score, -m.popularity, m.hit.sku))
        return matches[:limit]

    def _postings_of(self, rowid: int) -> Postings:
        postings = self._postings.get(rowid)
        if postings is None:
            postings = self._postings[rowid] = postings_of(self._entries[rowid])
        return postings

    def _query(self, analysed: Analysed, prefix: bool) -> _Query:
        wanted: dict[str, list[tuple[Term, float]]] = {}
        for term in analysed.terms:
            if term.text in self._frequency:
                wanted.setdefault(term.text, []).append((term, 1.0))
                continue
            if any(analysed.cjk[term.start : term.end]) or len(term.text) < 4:
                continue
            if term.text.isdigit():
                continue  # a number is not a typo of another number
            for corrected, distance in self._typos(term.text):
                wanted.setdefault(corrected, []).append((term, TYPO_QUALITY[distance]))
        last = analysed.positions[-1]
        long_enough = len(last) >= (1 if analysed.cjk[-1] else 2)
        in_code = {i for join in analysed.joins for i in range(join.start, join.end)}
        weights = tuple(
            weight(p, c, i in in_code)
            for i, (p, c) in enumerate(zip(analysed.positions, analysed.cjk, strict=True))
        )
        return _Query(analysed, weights, wanted, last if prefix and long_enough else None)

    def _every_word(self, query: _Query) -> list[int]:
        """Products having, for every position that can match, one of its terms."""
        groups: list[list[str]] = [[] for _ in query.analysed.positions]
        for text, hits in query.wanted.items():
            for term, _ in hits:
                for i in range(term.start, term.end):
                    groups[i].append(_quoted(text))
        if query.started:
            groups[-1].append(_quoted(query.started) + "*")
        required = [
            g for g, w in zip(groups, query.weights, strict=True) if g and w > _IGNORED_WEIGHT
        ]
        if not required:
            return []
        expression = " AND ".join(f"({' OR '.join(dict.fromkeys(g))})" for g in required)
        return self._rows(expression, "rowid")

    def _named(self, analysed: Analysed) -> list[int]:
        """Products one of whose labels is exactly what was typed, however popular: the
        steps above keep the most popular matches, and an exact name outside them ("43U8"
        is sixteen brands' TV at 100,000 products) must still be seen to be ambiguous."""
        sql = "SELECT rowid FROM labels WHERE labels MATCH ? ORDER BY rowid LIMIT ?"
        return [row[0] for row in self._db.execute(sql, (_quoted(_whole(analysed)), CANDIDATES))]

    def _any_word(self, query: _Query) -> list[int]:
        """Products having any of the query's rarest terms, by bm25."""
        rarest = sorted(query.wanted, key=lambda text: self._frequency.get(text, 0))
        chosen: list[str] = []
        rows = 0
        for text in rarest:
            if chosen and rows + self._frequency[text] > OR_ROWS:
                break
            chosen.append(_quoted(text))
            rows += self._frequency[text]
        if query.started and not chosen:
            chosen.append(_quoted(query.started) + "*")
            rows = OR_ROWS + 1
        if not chosen:
            return []
        order = "bm25(names), rowid" if rows <= OR_ROWS else "rowid"
        return self._rows(" OR ".join(chosen), order)

    def _rows(self, expression: str, order: str) -> list[int]:
        sql = f"SELECT rowid FROM names WHERE names MATCH ? ORDER BY {order} LIMIT ?"
        return [row[0] for row in self._db.execute(sql, (expression, CANDIDATES))]

    def _typos(self, text: str) -> list[tuple[str, int]]:
        """Catalogue terms one edit away (two for long words), transpositions counting one."""
        cached = self._corrections.get(text)
        if cached is not None:
            return cached
        if self._words is None:
            self._words = [w for w in self._frequency if w.isascii()]
        most = 1 if len(text) < 8 else 2
        found = process.extract(text, self._words, scorer=OSA.distance, score_cutoff=most, limit=8)
        digits = _DIGITS.findall(text)
        corrections = [
            (word, int(distance))
            for word, distance, _ in found
            if distance >= 1 and _DIGITS.findall(word) == digits  # "NC500" is no typo of "NC700"
        ]
        self._corrections.put(text, corrections)
        return corrections


def _whole(analysed: Analysed) -> str:
    """A label as one term: its positions run together ("Kestrel Q5" is "kestrelq5")."""
    return "".join(analysed.positions)


def _quoted(term: str) -> str:
    """An FTS5 string: whatever the text holds, it is a phrase, never syntax."""
    return '"' + term.replace('"', '""') + '"'


def _match(entry: Entry, postings: Postings, query: _Query) -> Match:
    weights = query.weights
    last = len(weights) - 1
    quality: dict[int, list[float]] = {}
    covered: dict[int, set[int]] = {}
    for text, hits in query.wanted.items():
        places: dict[int, list[tuple[int, int]]] = {}
        for name, start, end in postings.get(text, ()):
            places.setdefault(name, []).append((start, end))
        for name, spans in places.items():
            values = quality.setdefault(name, [0.0] * len(weights))
            used = covered.setdefault(name, set())
            # One place per query word: "Pulse 2" covers one "2" of "Pulse 2-2", not both.
            for k, (term, value) in enumerate(hits):
                start, end = spans[min(k, len(spans) - 1)]
                if term.end - term.start != end - start:
                    value *= SPELLING_QUALITY  # "NC-700" for "NC700": the same, spelt otherwise
                for i in range(term.start, term.end):
                    values[i] = max(values[i], value)
                used.update(range(start, end))
    if query.started:
        for text, spots in postings.items():
            if not text.startswith(query.started) or text in query.wanted:
                continue
            for name, start, end in spots:
                values = quality.setdefault(name, [0.0] * len(weights))
                if values[last] < PREFIX_QUALITY:
                    values[last] = PREFIX_QUALITY
                    covered.setdefault(name, set()).update(range(start, end))
    total = sum(weights)
    overall = [0.0] * len(weights)
    best_weight, best_extra = 0.0, 0
    for name, values in quality.items():
        matched = sum(w * q for w, q in zip(weights, values, strict=True))
        extra = _extra(entry.names[name], covered[name])
        if (matched, -extra) > (best_weight, -best_extra):
            best_weight, best_extra = matched, extra
        overall = [max(a, b) for a, b in zip(overall, values, strict=True)]
    coverage = sum(w * q for w, q in zip(weights, overall, strict=True)) / total
    score = 100 * (0.8 * coverage + 0.2 * best_weight / total) - EXTRA_PENALTY * min(best_extra, 5)
    return Match(entry.hit, round(max(score, 0.0), 1), round(coverage, 3), entry.popularity)


def _extra(name: Name, covered: set[int]) -> int:
    """Words of this name beyond what the query matched. In a label, every one; in a
    title, the ones inside the matched stretch, and a variant word just after it. The
    character pairs of one CJK stretch count as one word."""
    positions, cjk = name.analysed.positions, name.analysed.cjk
    first, last = (min(covered), max(covered)) if name.is_title else (0, len(positions) - 1)
    words = 0
    for i in range(first, last + 1):
        continues = i > first and cjk[i] and cjk[i - 1] and i - 1 not in covered
        if i not in covered and not continues:
            words += 1
    if name.is_title and last + 1 < len(positions) and is_variant(positions[last + 1]):
        words += 1
    return words
