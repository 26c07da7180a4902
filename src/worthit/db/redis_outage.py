"""What each client of the shared state in Redis remembers of an outage.

The fact tier, the explanation store and the rate limiter all answer from their own
process while Redis is unreachable, and must not pay a connect timeout on every call
meanwhile: after a failure they leave Redis alone for `retry_after_s`, and /readyz
reports the last error until a call (theirs or, through `revive`, another client's)
gets through again.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class RedisOutage:
    """`warning` is logged once per outage, with the error after it."""

    def __init__(
        self, warning: str, retry_after_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.warning = warning
        self.retry_after_s = retry_after_s
        self.last_error: str | None = None
        self._clock = clock
        self._until = -math.inf

    @property
    def waiting(self) -> bool:
        """Redis failed less than `retry_after_s` ago: do not try it now."""
        return self._clock() < self._until

    def failed(self, exc: BaseException) -> None:
        if self.last_error is None:
            log.warning("%s: %s", self.warning, exc)
        self.last_error = f"{type(exc).__name__}: {exc}"
        self._until = self._clock() + self.retry_after_s

    def up(self) -> bool:
        """A call got through; True when that ends an outage."""
        ended = self.last_error is not None
        self.last_error = None
        return ended

    def revive(self) -> None:
        """Another client saw Redis answer: try it at the next call."""
        self.last_error = None
        self._until = -math.inf


class ReportsOutage:
    """The two members /readyz and the other Redis clients use, for a client that keeps
    its outage in `self.outage`."""

    outage: RedisOutage

    @property
    def last_error(self) -> str | None:
        return self.outage.last_error

    def revive(self) -> None:
        """Redis answers again (another client saw it): try it at the next call, and stop
        reporting the last failure."""
        self.outage.revive()
