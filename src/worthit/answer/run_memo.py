"""Explanation runs' fixed parts, kept per verdict, so that a product asked about again
costs a lookup instead of its prompt, guard numbers and store key built afresh.

A run's basis and key depend only on the verdict and the sheet's version (its data age
aside, which neither reads), and the decider hands out the same `Verdict` object for as
long as those are unchanged (`decide.verdict_cache`). So an entry is found by the
verdict's identity and kept only while it is that very object for that version: the
entry holds the verdict, so its id cannot be reused while the entry lives. A verdict
decided afresh (live data past its objective) is a new object, and simply misses.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from worthit.decide.verdict import Verdict
from worthit.explain.explainer import ExplanationRun, RunBasis
from worthit.facts.sheet import FactSheet
from worthit.text.lru import LRU

DEFAULT_CAPACITY = 8192
"""As many as the verdict cache keeps."""


class RunMemo:
    """`run(sheet, verdict)`: a fresh `ExplanationRun` and its store key, from a basis
    built once per verdict; `key_of` is how the answerer keys a run's explanation."""

    def __init__(
        self, key_of: Callable[[ExplanationRun], str], capacity: int = DEFAULT_CAPACITY
    ) -> None:
        self.key_of = key_of
        self.capacity = capacity
        self._entries: LRU[int, tuple[Verdict, str, RunBasis, str]] = LRU(capacity)
        self._lock = threading.Lock()

    def run(self, sheet: FactSheet, verdict: Verdict) -> tuple[ExplanationRun, str]:
        slot = id(verdict)
        with self._lock:
            entry = self._entries.peek(slot)
            if entry is not None and entry[0] is verdict and entry[1] == sheet.version:
                self._entries.get(slot)
                return ExplanationRun(sheet, verdict, entry[2]), entry[3]
        run = ExplanationRun(sheet, verdict)
        key = self.key_of(run)
        with self._lock:
            self._entries.put(slot, (verdict, sheet.version, run.basis, key))
        return run, key

    def __len__(self) -> int:
        return len(self._entries)
