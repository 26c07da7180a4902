"""What the HTTP handlers share: the store and the decision core.

One object built at startup and kept on `app.state.services`; the engine, loaded when
the app starts, is on `app.state.engine`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worthit.decide.decider import Decider
from worthit.decide.resolve import ProductResolver
from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.market.store import MarketStore


@dataclass
class Services:
    store: MarketStore
    decider: Decider
    default_deadline_ms: int = 800
    degraded: list[str] = field(default_factory=list)

    @classmethod
    def over(cls, store: MarketStore) -> Services:
        decider = Decider(FactsCache(FactsBuilder(store)), ProductResolver(store))
        return cls(store=store, decider=decider)

    @property
    def facts(self) -> FactsCache:
        return self.decider.facts
