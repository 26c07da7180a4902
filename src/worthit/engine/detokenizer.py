"""Token ids to text, one token at a time, never cutting a character or leaking a
stop string.

A byte-level BPE token can end in the middle of a UTF-8 character (Chinese text, emoji),
so bytes go through an incremental decoder that holds incomplete sequences back. Text
that could still grow into a stop string is held back too, so the caller never sees a
stop string it would have to retract. Where a sentence ends is not this module's rule
but the project's (``worthit.text.sentences``).
"""

from __future__ import annotations

import codecs
from collections.abc import Callable, Iterable


class Detokenizer:
    def __init__(self, piece: Callable[[int], bytes], stop: Iterable[str] = ()) -> None:
        self._piece = piece
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._stop = tuple(s for s in stop if s)
        self._text = ""
        self._released = 0
        self.stopped = False
        """True once a stop string appeared; the text is cut before it."""

    @property
    def text(self) -> str:
        """Text released so far."""
        return self._text[: self._released]

    def add(self, token: int) -> str:
        """Feed one token; return the text that became safe to show."""
        if self.stopped:
            return ""
        self._text += self._decoder.decode(self._piece(token))
        if self._stop:
            self._check_stop()
        return self._release(self._safe_end())

    def flush(self) -> str:
        """End of generation: release what was held back for a stop string that never
        came. The bytes of a character cut off by max_tokens are dropped: half a
        character (or a U+FFFD standing in for it) is never shown."""
        self._decoder.reset()
        return self._release(len(self._text))

    def _check_stop(self) -> None:
        window_start = max(0, self._released - max(len(s) for s in self._stop))
        hits = [i for s in self._stop if (i := self._text.find(s, window_start)) >= 0]
        if hits:
            self._text = self._text[: min(hits)]
            self.stopped = True

    def _safe_end(self) -> int:
        if self.stopped or not self._stop:
            return len(self._text)
        hold = 0
        for stop in self._stop:
            for k in range(min(len(stop) - 1, len(self._text)), 0, -1):
                if self._text.endswith(stop[:k]):
                    hold = max(hold, k)
                    break
        return max(self._released, len(self._text) - hold)

    def _release(self, end: int) -> str:
        out = self._text[self._released : end]
        self._released = end
        return out
