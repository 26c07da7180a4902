"""A tenant's LLM tokens: reserved before the model runs, settled when it stops.

A request reserves what it may generate (its `max_tokens`, within the server's bound),
so a tenant cannot overspend its per-minute budget with one long answer, and gets back
what generation did not use, so a stored explanation or a short answer costs only what
it took. A request refused before the model (a 4xx) reserves nothing. A request larger
than the tenant's whole minute is granted that minute: waiting could never make the
larger reservation fit, and a `finish_reason` of "length" says it was cut.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from fastapi import Request

from worthit.http.caller import request_tenant
from worthit.http.problems import ProblemError
from worthit.service.ratelimit import Admission, Limiter, Limits
from worthit.service.tenants import Tenant


@dataclass
class TokenReservation:
    tokens: int
    """What the request may generate: its max_tokens, or the tenant's whole minute."""
    limiter: Limiter | None = None
    tenant: str | None = None
    _settled: bool = field(default=False, repr=False)

    def settle(self, used: int | None) -> None:
        """Give back what was reserved and not generated, once. ``None`` (the answer was
        cut off before its count was known) keeps the whole reservation."""
        if self._settled:
            return
        self._settled = True
        if self.limiter is not None and self.tenant is not None and used is not None:
            self.limiter.refund(self.tenant, self.tokens - min(used, self.tokens))


def reserve_tokens(request: Request, limiter: Limiter, max_tokens: int) -> TokenReservation:
    """Reserve `max_tokens` from the caller's budget, or raise a 429 saying how long to
    wait. Without a tenant (auth off) there is no budget."""
    tenant = request_tenant(request)
    if tenant is None:
        return TokenReservation(max_tokens)
    limits, granted = _ask(tenant, max_tokens)
    admission = limiter.admit(tenant.name, limits, granted, requests=0)
    return _granted(admission, tenant, granted, limiter)


async def reserve_tokens_async(
    request: Request, limiter: Limiter, max_tokens: int
) -> TokenReservation:
    """`reserve_tokens` for a handler on the event loop: with the limits in Redis
    (`--redis`) the loop serves other requests while the script runs."""
    tenant = request_tenant(request)
    if tenant is None:
        return TokenReservation(max_tokens)
    limits, granted = _ask(tenant, max_tokens)
    admission = await limiter.admit_async(tenant.name, limits, granted, requests=0)
    return _granted(admission, tenant, granted, limiter)


def _ask(tenant: Tenant, max_tokens: int) -> tuple[Limits, int]:
    limits = Limits(tenant.requests_per_minute, tenant.llm_tokens_per_minute)
    return limits, min(max_tokens, tenant.llm_tokens_per_minute)


def _granted(
    admission: Admission, tenant: Tenant, granted: int, limiter: Limiter
) -> TokenReservation:
    if not admission.allowed:
        retry = admission.retry_after_header
        raise ProblemError(
            429,
            "Too many requests",
            f"tenant {tenant.name!r} has fewer than {granted} LLM tokens left this minute "
            f"(budget {tenant.llm_tokens_per_minute}/min); retry after {retry} s or ask for "
            "fewer max_tokens",
            "max_tokens",
            headers={"Retry-After": retry} if retry else None,
            code="rate_limit_exceeded",
        )
    return TokenReservation(granted, limiter, tenant.name)
