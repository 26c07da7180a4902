"""A category's typical event discount, the evidence `sale_event` falls back on for a
product with no past occurrence of its own: measured on hand-built categories at its
boundaries (products measured, the median, occurrences ended by the moment, a market
younger than a year), and the WAIT reason's wording on each evidence in both languages."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pytest

from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Reason, VerdictKind
from worthit.explain.guard import allowed_numbers, check_grounding
from worthit.facts.builder import FactsBuilder
from worthit.facts.category_events import MIN_PRODUCTS
from worthit.facts.sheet import CategoryOccurrence, EventFact, FactSheet
from worthit.market.records import PriceRecord, ProductRecord
from worthit.market.store import MarketStore
from worthit.text.time import to_ms

from factories import make_event, make_plain_sheet

DOUBLE11_2025 = (date(2025, 11, 10), date(2025, 11, 11))
SIX18_2026 = (date(2026, 6, 16), date(2026, 6, 18))
DOUBLE11_2026 = (date(2026, 11, 10), date(2026, 11, 11))


def _days(first: date, last: date) -> Iterator[date]:
    yield from (first + timedelta(days=i) for i in range((last - first).days + 1))


def _market(first: date, peers: list[dict[tuple[date, date], float]]) -> MarketStore:
    """Headphones priced 100 at noon each day from `first` to 2026-11-30, each peer at its
    share off during the event windows it names; and P, listed on 2026-10-20."""
    store = MarketStore(":memory:")
    skus = [f"C{n}" for n in range(1, len(peers) + 1)]
    store.apply([ProductRecord(sku=s, title=s, brand="B", category="headphones")
                 for s in [*skus, "P"]])  # fmt: skip

    def price(sales: dict[tuple[date, date], float], day: date) -> float:
        off = next((pct for (a, b), pct in sales.items() if a <= day <= b), 0.0)
        return 100.0 - off

    rows = [
        PriceRecord(sku=sku, ts=datetime(d.year, d.month, d.day, 12, tzinfo=UTC),
                    price=price(sales, d))
        for sku, sales in zip(skus, peers, strict=True)
        for d in _days(first, date(2026, 11, 30))
    ]  # fmt: skip
    rows += [PriceRecord(sku="P", ts=datetime(d.year, d.month, d.day, 12, tzinfo=UTC), price=100.0)
             for d in _days(date(2026, 10, 20), date(2026, 11, 30))]  # fmt: skip
    store.apply(rows)
    return store


def _event(store: MarketStore, key: str, moment: datetime, sku: str = "P") -> EventFact:
    builder = FactsBuilder(store)
    sheet = builder.build(sku, at_ms=to_ms(moment))
    assert sheet is not None
    history = builder.history(sku)
    assert history is not None
    assert builder.build_from(history, to_ms(moment)).coming_events == sheet.coming_events
    return next(e for e in sheet.coming_events if e.key == key)


@pytest.fixture(scope="module")
def older() -> Iterator[MarketStore]:
    """Five peers tracked since October 2025: 10, 20, 30, 0 and 5 % off on Double 11 2025."""
    store = _market(date(2025, 10, 1), [{DOUBLE11_2025: pct} for pct in (10, 20, 30, 0, 5)])
    yield store
    store.close()


def test_the_category_median_at_the_same_event_stands_in(older: MarketStore) -> None:
    event = _event(older, "double11", datetime(2026, 11, 1, 12, tzinfo=UTC))
    assert event.past_discounts_pct == ()
    assert event.category_past == (
        CategoryOccurrence("double11", "Double 11", "双11", 2025, 10.0, 5),
    )


def test_a_product_with_its_own_past_gets_no_category_evidence(older: MarketStore) -> None:
    event = _event(older, "double11", datetime(2026, 11, 1, 12, tzinfo=UTC), sku="C2")
    assert event.past_discounts_pct == (20.0,) and event.category_past == ()


def test_no_sale_at_the_last_one_is_evidence_too(older: MarketStore) -> None:
    """Black Friday 2025 moved none of them: a typical discount of 0, no reason to wait."""
    event = _event(older, "black_friday", datetime(2026, 11, 1, 12, tzinfo=UTC))
    assert [(o.key, o.year, o.discount_pct) for o in event.category_past] == [
        ("black_friday", 2025, 0.0)
    ]


@pytest.mark.parametrize("measured", [MIN_PRODUCTS - 1, MIN_PRODUCTS])
def test_an_occurrence_needs_enough_products_measured(measured: int) -> None:
    """A market younger than a year: no past Double 11, so the calendar's other events
    (618 2026) speak; peers without a 618 price (listed after it) are not measured."""
    peers: list[dict[tuple[date, date], float]] = [{SIX18_2026: 15.0}] * measured
    store = _market(date(2026, 5, 1), peers)
    store.apply([ProductRecord(sku="L", title="L", brand="B", category="headphones")])
    since_july = _days(date(2026, 7, 1), date(2026, 11, 30))
    store.apply([PriceRecord(sku="L", ts=datetime(d.year, d.month, d.day, 12, tzinfo=UTC),
                             price=100.0) for d in since_july])  # fmt: skip
    event = _event(store, "double11", datetime(2026, 11, 1, 12, tzinfo=UTC))
    expected = (
        (CategoryOccurrence("618", "618", "618", 2026, 15.0, MIN_PRODUCTS),)
        if measured == MIN_PRODUCTS
        else ()
    )
    assert event.category_past == expected


@pytest.mark.parametrize(
    ("moment", "seen"),
    [(datetime(2026, 11, 11, 23, 59, 59, 999000, tzinfo=UTC), [("618", 15.0)]),
     (datetime(2026, 11, 12, tzinfo=UTC), [("double11", 20.0), ("618", 15.0)])],
)  # fmt: skip
def test_an_occurrence_counts_once_it_has_ended(
    moment: datetime, seen: list[tuple[str, float]]
) -> None:
    """Black Friday coming in a market younger than a year: Double 11 2026 joins the
    evidence at the first moment after its window, newest first."""
    store = _market(date(2026, 5, 1), [{SIX18_2026: 15.0, DOUBLE11_2026: 20.0}] * 5)
    event = _event(store, "black_friday", moment)
    assert [(o.key, o.discount_pct) for o in event.category_past] == seen


# --- the rule -------------------------------------------------------------------------


def _occurrences(*found: tuple[str, int, float, int]) -> tuple[CategoryOccurrence, ...]:
    names = {"double12": ("Double 12", "双12"), "double11": ("Double 11", "双11"),
             "618": ("618", "618")}  # fmt: skip
    return tuple(CategoryOccurrence(k, *names[k], y, pct, n) for k, y, pct, n in found)


def _sheet(*found: tuple[str, int, float, int], **event: Any) -> FactSheet:
    fields: dict[str, Any] = {"past_discounts_pct": (), "past_years": ()} | event
    return make_plain_sheet(
        coming_events=(make_event(category_past=_occurrences(*found), **fields),)
    )


def _reason(sheet: FactSheet, language: str = "en") -> Reason | None:
    reasons = decide_verdict(sheet, language).reasons
    return next((r for r in reasons if r.code == "sale_event"), None)


SAME = (("double12", 2025, 12.0, 40), ("double12", 2024, 18.0, 38))
OTHER = (("double11", 2026, 12.0, 40), ("618", 2026, 18.0, 38))

WORDING: list[tuple[tuple[tuple[str, int, float, int], ...], str, str, str]] = [
    (SAME, "category", "en",
     "Double 12 is in 11 days; this product has no past Double 12 price, but at the last 2 "
     "Double 12 sales headphones were typically 12% to 18% below the 30 days before (the "
     "median of 38 or more products), which would put it at $246.00 to $264.00 "
     "(today $300.00)."),
    (SAME, "category", "zh",
     "11天后是双12；该商品没有过往双12的价格，但过去2次双12，耳机通常比此前30天低12%至18%"
     "（至少38件商品的中位数），照此约为US$246.00至US$264.00（现价US$300.00）。"),
    (SAME[:1], "category", "en",
     "Double 12 is in 11 days; this product has no past Double 12 price, but at the last "
     "Double 12 headphones were typically 12% below the 30 days before (the median of 40 "
     "products), which would put it at $264.00 (today $300.00)."),
    (SAME[:1], "category", "zh",
     "11天后是双12；该商品没有过往双12的价格，但上一次双12，耳机通常比此前30天低12%"
     "（40件商品的中位数），照此约为US$264.00（现价US$300.00）。"),
    (OTHER, "category_events", "en",
     "Double 12 is in 11 days; with no past Double 12 on record, at the last 2 big sales "
     "(Double 11 2026, 618 2026) headphones were typically 12% to 18% below the 30 days "
     "before (the median of 38 or more products), which would put it at $246.00 to $264.00 "
     "(today $300.00)."),
    (OTHER, "category_events", "zh",
     "11天后是双12；还没有过往双12的记录，但最近2次大促（2026年双11、2026年618），耳机通常比"
     "此前30天低12%至18%（至少38件商品的中位数），照此约为US$246.00至US$264.00（现价US$300.00）。"),
    (OTHER[1:], "category_events", "en",
     "Double 12 is in 11 days; with no past Double 12 on record, at the last big sale "
     "(618 2026) headphones were typically 18% below the 30 days before (the median of 38 "
     "products), which would put it at $246.00 (today $300.00)."),
    (OTHER[1:], "category_events", "zh",
     "11天后是双12；还没有过往双12的记录，但上一次大促（2026年618），耳机通常比此前30天低18%"
     "（38件商品的中位数），照此约为US$246.00（现价US$300.00）。"),
]  # fmt: skip


@pytest.mark.parametrize(("found", "basis", "language", "text"), WORDING)
def test_the_wait_says_which_evidence_it_rests_on(
    found: tuple[tuple[str, int, float, int], ...], basis: str, language: str, text: str
) -> None:
    sheet = _sheet(*found)
    verdict = decide_verdict(sheet, language)
    assert verdict.kind is VerdictKind.WAIT
    reason = verdict.reasons[0]
    assert reason.code == "sale_event" and reason.text == text
    assert reason.numbers["basis"] == basis and reason.numbers["count"] == len(found)
    assert check_grounding(reason.text, allowed_numbers(sheet, verdict)).ok


@pytest.mark.parametrize(("low", "fires"), [(5.0, True), (4.9, False), (0.0, False)])
def test_the_category_must_save_enough_at_its_least(low: float, fires: bool) -> None:
    sheet = _sheet(("double12", 2025, low, 40), ("double12", 2024, 20.0, 40))
    assert (_reason(sheet) is not None) is fires


def test_the_products_own_past_comes_first_even_when_it_says_less() -> None:
    sheet = _sheet(*SAME, past_discounts_pct=(3.0,), past_years=(2025,))
    assert _reason(sheet) is None
    own = _sheet(*SAME, past_discounts_pct=(20.0,), past_years=(2025,))
    found = _reason(own)
    assert found is not None and found.numbers["basis"] == "product"
    assert "products" not in found.numbers


def test_an_unknown_category_is_named_by_its_key() -> None:
    sheet = make_plain_sheet(
        category="kites",
        coming_events=(make_event(past_discounts_pct=(), past_years=(),
                                  category_past=_occurrences(*SAME)),),
    )  # fmt: skip
    found = _reason(sheet)
    assert found is not None and "sales kites were typically" in found.text
