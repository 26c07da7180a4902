"""What the HTTP handlers share: the store, the decision core, the engine, the tenants.

One object built at startup and kept on `app.state.services`; handlers take it from the
request, so the app factory decides what is real and tests can build a smaller one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from worthit.decide.decider import Decider
from worthit.decide.resolve import ProductResolver
from worthit.engine.engine import Engine
from worthit.facts.builder import FactsBuilder
from worthit.facts.cache import FactsCache
from worthit.market.store import MarketStore


@dataclass
class Services:
    store: MarketStore
    decider: Decider
    engine: Engine | None = None
    default_deadline_ms: int = 800
    degraded: list[str] = field(default_factory=list)

    @classmethod
    def over(cls, store: MarketStore, engine: Engine | None = None) -> Services:
        decider = Decider(FactsCache(FactsBuilder(store)), ProductResolver(store))
        return cls(store=store, decider=decider, engine=engine)

    @property
    def facts(self) -> FactsCache:
        return self.decider.facts
