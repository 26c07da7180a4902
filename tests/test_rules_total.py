"""The rules are total over every history the edge accepts: whatever prices, timestamps
and offers a feed sends, building the sheet, deciding, wording the template and checking
the grounding never raise."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, VerdictKind
from worthit.explain.guard import allowed_numbers
from worthit.explain.inputs import ExplanationInputs
from worthit.explain.templates import template_explanation
from worthit.facts.builder import FactsBuilder
from worthit.market.records import (
    MAX_PRICE,
    MIN_PRICE,
    PriceRecord,
    ProductRecord,
    PromotionRecord,
    minor_unit,
)
from worthit.market.store import MarketStore
from worthit.text.time import to_ms

NOW = datetime(2026, 6, 1, tzinfo=UTC)
CURRENCIES = ("USD", "JPY", "CNY", "KWD")

prices = st.one_of(
    st.sampled_from([MIN_PRICE, 1.0, 0.015, 999_999.99, MAX_PRICE]),
    st.floats(min_value=MIN_PRICE, max_value=MAX_PRICE, allow_nan=False, allow_infinity=False),
)
observation = st.tuples(
    st.integers(min_value=-400, max_value=5),  # days from NOW: repeats and the future too
    prices,
    st.one_of(st.none(), prices),
)
promotion = st.tuples(st.integers(min_value=-40, max_value=40), st.integers(1, 20), prices)


@st.composite
def histories(draw: st.DrawFn) -> tuple[str, list[object]]:
    currency = draw(st.sampled_from(CURRENCIES))
    floor = minor_unit(currency)
    records: list[object] = [ProductRecord(sku="P", title="Any product", category="headphones")]
    for day, price, listed in draw(st.lists(observation, max_size=40)):
        records.append(
            PriceRecord(
                sku="P",
                ts=NOW + timedelta(days=day, minutes=draw(st.integers(0, 3))),
                price=max(price, floor),
                currency=currency,
                list_price=None if listed is None else max(listed, floor),
            )
        )
    for day in draw(st.lists(st.integers(min_value=-400, max_value=0), max_size=2)):
        # A row a store kept from before the floor: below a cent, never validated.
        records.append(
            PriceRecord.model_construct(
                sku="P", type="price", price=draw(st.floats(1e-6, MIN_PRICE, exclude_max=True)),
                currency=currency, list_price=None, ts=NOW + timedelta(days=day),
            )
        )  # fmt: skip
    for start, length, price in draw(st.lists(promotion, max_size=3)):
        records.append(
            PromotionRecord(
                sku="P", name="Sale", price=price,
                starts=NOW + timedelta(days=start), ends=NOW + timedelta(days=start + length),
            )
        )  # fmt: skip
    return currency, records


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories(), st.one_of(st.none(), prices), st.sampled_from(["en", "zh"]))
def test_no_accepted_history_makes_a_rule_raise(
    history: tuple[str, list[object]], budget: float | None, language: str
) -> None:
    _, records = history
    with tempfile.TemporaryDirectory() as folder:
        store = MarketStore(Path(folder) / "m.db")
        try:
            store.apply(records)  # type: ignore[arg-type]
            builder = FactsBuilder(store, clock=lambda: to_ms(NOW))
            for at in (NOW - timedelta(days=200), NOW, NOW + timedelta(days=3)):
                sheet = builder.build("P", at_ms=to_ms(at))
                assert sheet is not None
                verdict = decide_verdict(sheet, language, budget=budget)
                assert verdict.kind in VerdictKind
                window = sheet.window(90)
                if verdict.kind is VerdictKind.WAIT and window is not None and window.avg:
                    # a WAIT on a price history says what it waits for
                    assert any(r.polarity is Polarity.WAIT for r in verdict.reasons)
                assert template_explanation(verdict, sheet)
                ExplanationInputs.of(sheet.title, verdict, sheet.currency)
                allowed_numbers(sheet, verdict)
        finally:
            store.close()
