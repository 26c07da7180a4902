"""How long an answer is expected to run: a high quantile of recent interactive answers' lengths.

The ``complete`` deadline policy used to price all of ``max_tokens``; answers asked for
48 tokens end near 29, so on a host at ~18 ms a token (48 x 18 > 800 ms) every such
request was refused although most would have fit. It now prices this estimate instead
(sequence.py ``DeadlinePolicy.required_tokens``).

Only an answer that ended by itself (``stop``) shows its whole length. One cut by
``length`` or by the deadline says only that it needed more than it got; dropping those
would drop exactly the long answers and bias the estimate low, counting them as ended
would too. So the quantile is read off the Kaplan-Meier estimate, which counts a cut
answer as alive up to its cut and not after: when too many of the recent answers were
cut to know the quantile, there is no estimate and the policy prices all of
``max_tokens``, as it does until ``MIN_SAMPLES`` answers have finished. Written by the
engine thread as requests finish, read by the submitting threads.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Collection

from worthit.engine.sequence import FinishReason

WINDOW = 200
"""Recent answers remembered: a few minutes of traffic, so a change of model, prompt or
traffic shows within that."""
MIN_SAMPLES = 20
"""Answers needed before the estimate is trusted; until then ``complete`` prices all of
max_tokens (today's promise, never broken for want of data)."""

_CUT = (FinishReason.LENGTH, FinishReason.DEADLINE)


class CompletionLengths:
    def __init__(self, quantile: float) -> None:
        self.quantile = quantile
        self._lock = threading.Lock()
        self._samples: deque[tuple[int, bool]] = deque(maxlen=WINDOW)
        """(output tokens, ended by itself) of recent interactive answers."""
        self._expected: int | None = None

    def observe(self, n_tokens: int, reason: FinishReason) -> None:
        """An interactive answer finished. Aborted, expired and failed ones say nothing about
        length and are left out."""
        if reason is not FinishReason.STOP and reason not in _CUT:
            return
        with self._lock:
            self._samples.append((n_tokens, reason is FinishReason.STOP))
            self._expected = (
                kaplan_meier_quantile(self._samples, self.quantile)
                if len(self._samples) >= MIN_SAMPLES
                else None
            )

    def expected(self) -> int | None:
        """Output tokens that this quantile of answers ends within; None when unknown."""
        with self._lock:
            return self._expected

    @property
    def samples(self) -> int:
        with self._lock:
            return len(self._samples)


def kaplan_meier_quantile(samples: Collection[tuple[int, bool]], q: float) -> int | None:
    """Smallest length by which a share q of answers has ended, from (length, ended)
    pairs where an answer not ended was cut at that length; None when the cut answers
    leave the estimate above 1 - q at every observed end."""
    at_risk = len(samples)
    surviving = 1.0
    for length, ended in sorted(samples, key=lambda s: (s[0], not s[1])):
        if ended:
            surviving *= 1 - 1 / at_risk
            if surviving <= 1 - q + 1e-9:
                return length
        at_risk -= 1
    return None
