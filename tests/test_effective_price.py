"""Promotion kinds and the effective price of one unit: each kind at its boundaries from a
hand-built history, the validation that names the field (import and events), old files
and old stores unchanged, and the reasons in both languages, grounded."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest

from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, Reason
from worthit.explain.guard import allowed_numbers, check_grounding
from worthit.facts.builder import FactsBuilder
from worthit.facts.sheet import FactSheet
from worthit.market.events import EventError, event_schema, parse_event
from worthit.market.ingest.importer import LineError, parse_line, run_import
from worthit.market.records import PriceRecord, ProductRecord, PromotionRecord
from worthit.market.schema import migrate
from worthit.market.store import MarketStore
from worthit.text.time import to_ms

from factories import make_offer, make_plain_sheet, make_promotion

NOW = datetime(2026, 6, 10, 12, 0, tzinfo=UTC)


def _store(price: float, *promotions: dict[str, Any]) -> MarketStore:
    """One product at `price` every day for 20 days up to NOW, with `promotions`
    (fields of a promotion line; each runs from a day ago unless it says otherwise)."""
    store = MarketStore(":memory:")
    records: list[Any] = [ProductRecord(sku="P", title="P", brand="B", category="tvs")]
    records += [
        PriceRecord(sku="P", ts=NOW - timedelta(days=day), price=price) for day in range(20)
    ]
    for fields in promotions:
        timing = {"starts": NOW - timedelta(days=1), "ends": NOW + timedelta(days=3)}
        records.append(PromotionRecord(**({"sku": "P", "name": "Offer"} | timing | fields)))
    store.apply(records)
    return store


def _sheet(price: float, *promotions: dict[str, Any]) -> FactSheet:
    sheet = FactsBuilder(_store(price, *promotions)).build("P", at_ms=to_ms(NOW))
    assert sheet is not None
    return sheet


# --- one unit's price, kind by kind -----------------------------------------------------


@pytest.mark.parametrize(
    ("unit", "applies", "effective"),
    [(199.99, False, 199.99), (200.0, True, 170.0), (200.01, True, 170.01)],
)
def test_a_threshold_applies_to_one_unit_from_the_threshold_up(
    unit: float, applies: bool, effective: float
) -> None:
    sheet = _sheet(unit, {"kind": "threshold", "threshold": 200.0, "save": 30.0})
    (offer,) = sheet.active_promotions
    assert (offer.kind, offer.base_price, offer.applies, offer.price) == (
        "threshold",
        unit,
        applies,
        effective,
    )
    assert sheet.effective_price == effective


@pytest.mark.parametrize(
    ("unit", "percent", "effective"),
    [(10.05, 50.0, 5.03), (19.99, 15.0, 16.99), (0.01, 50.0, 0.01), (229.99, 12.5, 201.24)],
)
def test_a_percent_off_is_rounded_half_up_to_the_cent(
    unit: float, percent: float, effective: float
) -> None:
    sheet = _sheet(unit, {"kind": "percent", "percent_off": percent})
    assert sheet.active_promotions[0].price == effective
    assert sheet.effective_price == effective


@pytest.mark.parametrize(
    ("unit", "offer", "effective"),
    [
        (249.99, {"save": 20.0, "min_spend": 250.0}, 249.99),
        (250.0, {"save": 20.0, "min_spend": 250.0}, 230.0),
        (40.0, {"save": 50.0}, 0.0),
        (100.0, {"percent_off": 10.0, "min_spend": 100.0}, 90.0),
        (99.99, {"percent_off": 10.0, "min_spend": 100.0}, 99.99),
    ],
)
def test_a_coupon_takes_its_amount_or_share_from_its_minimum_spend(
    unit: float, offer: dict[str, Any], effective: float
) -> None:
    sheet = _sheet(unit, {"kind": "coupon", **offer})
    assert sheet.active_promotions[0].price == effective
    assert sheet.effective_price == effective


def test_the_effective_price_is_the_best_single_offer_running_now() -> None:
    sheet = _sheet(
        300.0,
        {"name": "Sale", "price": 280.0},
        {"name": "Members", "kind": "percent", "percent_off": 10.0},
        {"name": "满500减100", "kind": "threshold", "threshold": 500.0, "save": 100.0},
        {
            "name": "Later",
            "kind": "percent",
            "percent_off": 50.0,
            "starts": NOW + timedelta(days=5),
            "ends": NOW + timedelta(days=8),
        },
    )
    assert [(p.name, p.price) for p in sheet.active_promotions] == [
        ("Members", 270.0),
        ("Sale", 280.0),
        ("满500减100", 300.0),
    ]
    assert sheet.effective_price == 270.0
    (later,) = sheet.upcoming_promotions
    assert (later.price, later.base_price) == (150.0, 300.0)


def test_a_sheet_without_offers_costs_its_current_price() -> None:
    assert _sheet(123.45).effective_price == 123.45


# --- validation names the field ---------------------------------------------------------

PROMOTION = {
    "type": "promotion",
    "sku": "S1",
    "name": "Offer",
    "starts": "2026-06-01T00:00:00Z",
    "ends": "2026-06-08T00:00:00Z",
}
BAD = [
    ({"kind": "percent"}, "percent_off"),
    ({"kind": "percent", "percent_off": 100}, "percent_off"),
    ({"kind": "percent", "percent_off": 0}, "percent_off"),
    ({"kind": "threshold", "save": 30}, "threshold"),
    ({"kind": "threshold", "threshold": 200}, "save"),
    ({"kind": "threshold", "threshold": 200, "save": 200}, "save"),
    ({"kind": "threshold", "threshold": 200, "save": 0}, "save"),
    ({"kind": "coupon"}, "save"),
    ({"kind": "coupon", "save": 10, "percent_off": 10}, "save"),
    ({"kind": "coupon", "save": 10, "min_spend": 10}, "min_spend"),
    ({"kind": "coupon", "save": 10, "threshold": 100}, "threshold"),
    ({"price": 99.0, "percent_off": 10}, "percent_off"),
    ({"kind": "price"}, "price"),
    ({}, "price"),
    ({"kind": "bogo", "price": 1.0}, "kind"),
]


@pytest.mark.parametrize(("fields", "field"), BAD)
def test_an_import_line_of_the_wrong_shape_names_the_field(
    fields: dict[str, Any], field: str
) -> None:
    parsed = parse_line(json.dumps(PROMOTION | fields), 3)
    assert isinstance(parsed, LineError), parsed
    assert (parsed.line, parsed.field) == (3, field), parsed


@pytest.mark.parametrize(("fields", "field"), BAD)
def test_an_event_of_the_wrong_shape_names_the_field(fields: dict[str, Any], field: str) -> None:
    parsed = parse_event({**PROMOTION, "event_id": "e1", "source": "pos", **fields}, 2)
    assert isinstance(parsed, EventError), parsed
    assert (parsed.index, parsed.field, parsed.event_id) == (2, field, "e1"), parsed


def test_the_messages_say_what_is_wrong() -> None:
    line = json.dumps(PROMOTION | {"kind": "threshold", "threshold": 200, "save": 250})
    parsed = parse_line(line, 1)
    assert isinstance(parsed, LineError)
    assert str(parsed) == "line 1: save: Value error, must be less than threshold (200)"


@pytest.mark.parametrize(
    "fields",
    [
        {"price": 249.0},
        {"kind": "percent", "percent_off": 15},
        {"kind": "threshold", "threshold": 200, "save": 30},
        {"kind": "coupon", "save": 20, "min_spend": 250},
        {"kind": "coupon", "percent_off": 5},
    ],
)
def test_the_schema_accepts_each_kind_as_the_models_do(fields: dict[str, Any]) -> None:
    validator = jsonschema_rs.validator_for(event_schema())
    good = {**PROMOTION, "event_id": "e", "source": "pos", **fields}
    assert validator.is_valid(good) and not isinstance(parse_event(good), EventError)
    assert not validator.is_valid({**good, "kind": "bogo"})


# --- old files and old stores -----------------------------------------------------------

PRODUCT = {"type": "product", "sku": "S1", "title": "Aurora NC700 Wireless Headphones"}
OLD_PROMOTION = PROMOTION | {"name": "Double 11", "price": 249.0}


def test_an_old_file_without_kind_imports_as_promotional_prices(tmp_path: Path) -> None:
    store = MarketStore(tmp_path / "m.db")
    text = [json.dumps(PRODUCT), json.dumps(OLD_PROMOTION)]
    report = run_import(store, text)
    assert (report.written, report.errors) == (2, [])
    (promo,) = store.promotions("S1")
    assert (promo.name, promo.kind, promo.price, promo.percent_off, promo.save) == (
        "Double 11",
        "price",
        249.0,
        None,
        None,
    )
    again = run_import(store, text)
    assert (again.written, again.unchanged) == (0, 2)


def test_a_promotion_changing_kind_updates_its_row(tmp_path: Path) -> None:
    store = MarketStore(tmp_path / "m.db")
    run_import(store, [json.dumps(PRODUCT), json.dumps(OLD_PROMOTION)])
    before = store.revision("S1")
    coupon = OLD_PROMOTION | {"kind": "coupon", "price": None, "save": 20.0, "min_spend": 250.0}
    report = run_import(store, [json.dumps(coupon)])
    assert (report.written, report.errors) == (1, [])
    (promo,) = store.promotions("S1")
    assert (promo.kind, promo.price, promo.save, promo.min_spend) == ("coupon", None, 20.0, 250.0)
    after = store.revision("S1")
    assert before is not None and after is not None and after[0] == before[0] + 1


def test_a_store_from_before_kinds_keeps_its_promotions_and_revisions(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    migrate(conn, target=4)
    conn.execute("INSERT INTO products (sku, title) VALUES ('S1', 'Aurora NC700')")
    conn.execute("INSERT INTO promotions VALUES ('S1', 'Double 11', 1000, 2000, 249.0)")
    revision = conn.execute("SELECT revision FROM products").fetchone()[0]
    conn.close()

    store = MarketStore(path)
    (promo,) = store.promotions("S1")
    assert (promo.name, promo.starts_ms, promo.ends_ms, promo.price, promo.kind) == (
        "Double 11",
        1000,
        2000,
        249.0,
        "price",
    )
    assert store.revision("S1") == (revision, 0)
    store.apply(
        [
            PromotionRecord(
                sku="S1",
                name="Double 11",
                starts=NOW,
                ends=NOW + timedelta(days=1),
                kind="percent",
                percent_off=10,
            )
        ]
    )
    bumped = store.revision("S1")
    assert bumped is not None and bumped[0] == revision + 1


# --- the reasons ------------------------------------------------------------------------


def _reason(sheet: FactSheet, code: str, language: str = "en") -> Reason | None:
    return next((r for r in decide_verdict(sheet, language).reasons if r.code == code), None)


def _offer_sheet(**overrides: Any) -> FactSheet:
    return make_plain_sheet(
        **(
            {
                "current_price": 229.99,
                "active_promotions": (make_offer(),),
                "effective_price": 199.99,
            }
            | overrides
        )
    )


def test_the_effective_price_reason_says_how_in_both_languages() -> None:
    en = _reason(_offer_sheet(), "effective_price")
    zh = _reason(_offer_sheet(), "effective_price", "zh")
    assert en is not None and zh is not None
    assert en.polarity is Polarity.INFO
    assert en.text == (
        "With 满200减30 (spend $200.00, save $30.00) you pay $199.99 for one unit "
        "(current $229.99 − $30.00)."
    )
    assert zh.text == (
        "使用满200减30（满US$200.00减US$30.00），买一件只需US$199.99（现价US$229.99 − US$30.00）。"
    )
    assert en.numbers == {
        "name": "满200减30",
        "effective": 199.99,
        "current": 229.99,
        "saving": 30.0,
        "threshold": 200.0,
        "save": 30.0,
    }


@pytest.mark.parametrize(
    ("offer", "en", "zh"),
    [
        (
            make_offer(
                name="Members",
                kind="percent",
                threshold=None,
                save=None,
                percent_off=15.0,
                price=195.49,
            ),
            "With Members (15% off) you pay $195.49 for one unit (current $229.99 − 15%).",
            "使用Members（立减15%），买一件只需US$195.49（现价US$229.99 − 15%）。",
        ),
        (
            make_offer(
                name="Club", kind="coupon", threshold=None, save=20.0, min_spend=200.0, price=209.99
            ),
            "With Club (a coupon for $20.00 off $200.00 or more) you pay $209.99 for one unit "
            "(current $229.99 − $20.00).",
            "使用Club（优惠券满US$200.00减US$20.00），"
            "买一件只需US$209.99（现价US$229.99 − US$20.00）。",
        ),
    ],
)
def test_each_kind_is_worded(offer: Any, en: str, zh: str) -> None:
    sheet = _offer_sheet(active_promotions=(offer,), effective_price=offer.price)
    found_en = _reason(sheet, "effective_price")
    found_zh = _reason(sheet, "effective_price", "zh")
    assert found_en is not None and found_en.text == en
    assert found_zh is not None and found_zh.text == zh


def test_one_unit_below_the_threshold_is_told_it_saves_nothing() -> None:
    offer = make_offer(price=189.0, base_price=189.0, applies=False)
    sheet = _offer_sheet(current_price=189.0, active_promotions=(offer,), effective_price=189.0)
    assert _reason(sheet, "effective_price") is None
    en = _reason(sheet, "offer_short")
    zh = _reason(sheet, "offer_short", "zh")
    assert en is not None and zh is not None
    assert en.text == (
        "满200减30 (spend $200.00, save $30.00) saves nothing on one unit: at $189.00 it is "
        "below the $200.00 an order needs."
    )
    assert zh.text == (
        "满200减30（满US$200.00减US$30.00）买一件用不上：现价US$189.00不到订单所需的US$200.00。"
    )


def test_a_promotional_price_keeps_its_own_reason() -> None:
    promo = make_promotion(days_until_start=0, price=219.0)
    sheet = _offer_sheet(active_promotions=(promo,), effective_price=219.0)
    assert _reason(sheet, "effective_price") is None
    assert _reason(sheet, "active_promotion") is not None


def _upcoming(offer: Any, **overrides: Any) -> FactSheet:
    return make_plain_sheet(**({"upcoming_promotions": (offer,)} | overrides))


def test_an_upcoming_offer_is_compared_as_one_units_price() -> None:
    offer = make_offer(
        name="618",
        kind="percent",
        threshold=None,
        save=None,
        percent_off=10.0,
        price=270.0,
        base_price=300.0,
        days_until_start=6,
    )
    sheet = _upcoming(offer, effective_price=300.0)
    en = _reason(sheet, "upcoming_sale")
    zh = _reason(sheet, "upcoming_sale", "zh")
    assert en is not None and zh is not None and en.polarity is Polarity.WAIT
    assert en.text == (
        "618 (10% off) starts in 6 days: at today's price one unit would cost $270.00, "
        "10% below today's $300.00."
    )
    assert zh.text == (
        "618（立减10%）将在6天后开始：按现价买一件约US$270.00，比现在的US$300.00低10%。"
    )


def test_an_upcoming_threshold_one_unit_misses_is_no_reason_to_wait() -> None:
    offer = make_offer(
        threshold=500.0,
        save=100.0,
        price=300.0,
        base_price=300.0,
        applies=False,
        days_until_start=6,
    )
    assert _reason(_upcoming(offer, effective_price=300.0), "upcoming_sale") is None


@pytest.mark.parametrize(("today", "waits"), [(300.0, True), (270.0, False)])
def test_an_upcoming_sale_must_beat_what_one_unit_costs_today(today: float, waits: bool) -> None:
    """A sale 10 % below the tag, against a coupon running now that takes 10 % off too."""
    coupon = make_offer(
        name="Club", kind="coupon", threshold=None, save=30.0, price=270.0, base_price=300.0
    )
    sale = make_promotion(price=270.0, days_until_start=6)
    sheet = _upcoming(
        sale,
        active_promotions=(coupon,) if today < 300.0 else (),
        effective_price=today,
    )
    assert (_reason(sheet, "upcoming_sale") is not None) is waits


@pytest.mark.parametrize("language", ["en", "zh"])
def test_every_number_the_offer_reasons_write_is_grounded(language: str) -> None:
    short = make_offer(name="满500减100", threshold=500.0, save=100.0, price=229.99, applies=False)
    upcoming = make_offer(
        name="Coupon Week",
        kind="coupon",
        threshold=None,
        save=None,
        percent_off=20.0,
        min_spend=100.0,
        price=183.99,
        days_until_start=4,
    )
    sheet = _offer_sheet(active_promotions=(make_offer(), short), upcoming_promotions=(upcoming,))
    verdict = decide_verdict(sheet, language)
    codes = {r.code for r in verdict.reasons}
    assert {"effective_price", "offer_short", "upcoming_sale"} <= codes
    grounds = allowed_numbers(sheet, verdict)
    for r in verdict.reasons:
        assert check_grounding(r.text, grounds).ok, r.text


def test_the_builder_and_the_rules_agree_on_a_real_history() -> None:
    sheet = _sheet(229.99, {"name": "满200减30", "kind": "threshold", "threshold": 200, "save": 30})
    found = _reason(sheet, "effective_price")
    assert found is not None and found.numbers["effective"] == 199.99
