"""Fair share between tenants inside a class: virtual token counters.

After the Virtual Token Counter (VTC) of Sheng et al., "Fairness in Serving Large
Language Models" (OSDI '24): each tenant has a counter of the service it received,
``w_p`` per prompt token computed for it plus ``w_q`` per token generated, and the
scheduler lets the waiting request of the tenant with the lowest counter join first.
A tenant that comes back after having nothing queued is lifted to the lowest counter of
the tenants with work (or, when nobody has any, to the counter of the last one to
leave), so being idle banks no credit to spend later in a burst; counters only rise.

Counters are kept per class: fairness orders requests inside a class, never across
classes, and the class a request is in is the caller's statement of urgency, not a
share of the engine. Background requests (their own queue, arrival order) have none.
Only the engine thread uses this, except ``tenants``, a plain int any thread may read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worthit.engine.sequence import Priority, Sequence


@dataclass
class _ClassCounters:
    counters: dict[str, float] = field(default_factory=dict)
    """Service received, per tenant with work, and per idle tenant still above the
    lift level (one at or below it would be lifted to it anyway: forgotten)."""
    active: dict[str, int] = field(default_factory=dict)
    """Waiting or running requests per tenant with work in the class."""
    floor: float = 0.0
    """The counter of the last tenant to leave: the lift level while nobody has work."""

    def level(self) -> float:
        """Where a returning tenant starts: never below a tenant that kept working."""
        return min((self.counters[t] for t in self.active), default=self.floor)


class FairShare:
    def __init__(self, prompt_weight: float = 1.0, output_weight: float = 2.0) -> None:
        self.prompt_weight = prompt_weight
        self.output_weight = output_weight
        self._classes = {p: _ClassCounters() for p in Priority if not p.is_background}
        self._interactive: dict[str, int] = {}
        self.tenants = 0
        """Tenants with an interactive request waiting or running, in any class."""

    def arrived(self, seq: Sequence) -> None:
        """seq is queued: its tenant is lifted first if it had no work in the class."""
        c = self._classes[seq.priority]
        tenant = seq.tenant
        n = c.active.get(tenant, 0)
        if n == 0:
            c.counters[tenant] = max(c.counters.get(tenant, 0.0), c.level())
        c.active[tenant] = n + 1
        self._interactive[tenant] = self._interactive.get(tenant, 0) + 1
        self.tenants = len(self._interactive)

    def left(self, seq: Sequence) -> None:
        """seq finished (any reason): the tenant may now be idle in the class."""
        c = self._classes[seq.priority]
        tenant = seq.tenant
        n = c.active[tenant] - 1
        if n:
            c.active[tenant] = n
        else:
            del c.active[tenant]
            if not c.active:
                c.floor = c.counters[tenant]
            level = c.level()
            for idle in [t for t, v in c.counters.items() if t not in c.active and v <= level]:
                del c.counters[idle]
        remaining = self._interactive[tenant] - 1
        if remaining:
            self._interactive[tenant] = remaining
        else:
            del self._interactive[tenant]
        self.tenants = len(self._interactive)

    def lift(self, priority: Priority, tenant: str, level: float) -> None:
        """Raise a waiting tenant passed over for its cap to the counter of the tenant
        served instead: it was kept from the slot, as an idle tenant keeps itself, and
        banks no credit by it (otherwise the counters part without bound while the cap
        binds, and the capped tenant later takes every slot until they meet again)."""
        counters = self._classes[priority].counters
        counters[tenant] = max(counters[tenant], level)

    def charge_prompt(self, seq: Sequence, n_tokens: int) -> None:
        self._classes[seq.priority].counters[seq.tenant] += self.prompt_weight * n_tokens

    def charge_output(self, seq: Sequence) -> None:
        self._classes[seq.priority].counters[seq.tenant] += self.output_weight

    def counter(self, priority: Priority, tenant: str) -> float:
        """The service counter tenant's next request in priority is ordered by: its own
        while it has work there, else what it would be lifted to on arrival."""
        c = self._classes[priority]
        own = c.counters.get(tenant, 0.0)
        return own if tenant in c.active else max(own, c.level())
