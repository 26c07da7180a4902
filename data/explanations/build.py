"""Build the gold explanation data: train.jsonl and heldout.jsonl beside this file.

    .venv/bin/python data/explanations/build.py

Inputs are real: simulated demo markets (worthit.market.simulator) are written to a
temporary SQLite store, fact sheets are cut from them on many as-of days
(FactsBuilder.build_from), and the real rules (decide_verdict) judge each sheet in English
and Chinese; the explanation inputs are what ExplanationInputs.of hands the model. Some
sheets are perturbed before judging, so the model sees numbers it cannot have memorised:
money rescaled into CNY, JPY or EUR, a shopper's budget under today's price, data past
its freshness objective, an unusable (zero) price row. The rules run again on every
perturbed sheet, so each reason is one the rules wrote.

Targets are the team's phrasings (phrasings.py) filled with the strongest reason's values
exactly as the reason writes them. Every target passes worthit.explain.checker (the build
fails otherwise), and the held-out products share no title with train.

Deterministic: fixed seeds and end days, no wall clock; the same code gives the same files.
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from worthit.decide.rules import decide_verdict
from worthit.decide.verdict import Polarity, Reason, Verdict
from worthit.explain.checker import (
    CheckInputs,
    check_explanation,
    key_reason,
    reason_slots,
)
from worthit.explain.inputs import ExplanationInputs, model_text
from worthit.explain.prompt import answer_prefix
from worthit.explain.templates import leading_reasons
from worthit.facts.builder import FactsBuilder
from worthit.facts.sheet import DiscountClaim, FactSheet, PromotionFact, WindowStats
from worthit.market.store import MarketStore

try:  # the demo market's home since the layout issue (24); before it, market/
    from worthit.demo.simulator import simulate
except ImportError:  # pragma: no cover - the older layout
    from worthit.market.simulator import simulate  # type: ignore[import-not-found,no-redef]

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from phrasings import ADVICE, LEAD, SECOND, SECOND_ALLOWED  # noqa: E402

LANGUAGES = ("en", "zh")
FAILURES: list[str] = []
"""Gold targets the checker refuses: the build fails on any (fix the phrasing)."""


@dataclass(frozen=True)
class Market:
    seed: int
    end: date
    skus: int
    days: int = 240
    every_days: int = 5
    span_days: int = 200
    later: bool = False
    """Added after the held-out set was fixed: its products named like a held-out one stay
    out of train, so the held-out set, and the loss measured on it, stays the same."""


TRAIN_MARKETS = (
    Market(seed=11, end=date(2026, 11, 20), skus=110),
    Market(seed=23, end=date(2026, 7, 1), skus=110),
    Market(seed=37, end=date(2026, 12, 24), skus=90),
    Market(seed=53, end=date(2026, 12, 6), skus=200, every_days=3, span_days=30, later=True),
)
HELDOUT_MARKET = Market(seed=97, end=date(2026, 10, 25), skus=130, every_days=7, span_days=180)

CURRENCIES = (("CNY", 7.13), ("JPY", 151.4), ("EUR", 0.93))
"""Rough rates; the point is other symbols and magnitudes, not exchange accuracy."""

TRAIN_CAP_PER_COMBO = 15
"""Lines per (language, verdict, leading codes) in train: frequent combinations (a BUY
near its all-time low) would otherwise drown the rare ones."""
TRAIN_CAP_SINGLE = 40
"""Lines per combination whose verdict rests on one reason (a WAIT whose price is only
close to its average): the commonest answers on a real market, and the ones where a model
with little to say invents a second fact ("out of stock", "still falling")."""
HELDOUT_PER_LANGUAGE = 150
REDRAWS = 5
"""Draws of other phrasings when the first one the checker refuses: one input can make a
good phrasing ambiguous ("at $91.01 … on until 2026-05-11 at $91.01" repeats itself where
the sale price is today's). The build fails only if none of them passes."""
SECOND_SHARE = 0.55
"""How often a target also words the second reason, when that one points the same way."""


@dataclass(frozen=True)
class Candidate:
    language: str
    title: str
    verdict: Verdict
    currency: str
    variation: str
    sku: str

    @property
    def leading(self) -> list[Reason]:
        return leading_reasons(self.verdict)

    @property
    def combo(self) -> tuple[str, str, tuple[str, ...]]:
        return (self.language, self.verdict.kind.value, tuple(r.code for r in self.leading))

    @property
    def shape(self) -> tuple[str, str, tuple[str, ...], bool]:
        """The combination, and whether a sale event's expected price is a range ("$383.99
        to $388.31"): a range is worded differently, and a model that saw few of them
        writes its upper end where today's price belongs."""
        ranged = any(
            r.code == "sale_event" and r.numbers["price_from"] != r.numbers["price_to"]
            for r in self.leading
        )
        return (*self.combo, ranged)


# --- inputs: real markets, real rules -----------------------------------------------------


def _markets_sheets(market: Market, workdir: Path) -> Iterator[FactSheet]:
    store = MarketStore(workdir / f"market-{market.seed}.db")
    simulate(store, skus=market.skus, days=market.days, seed=market.seed, end=market.end)
    builder = FactsBuilder(store)
    last = datetime(market.end.year, market.end.month, market.end.day, 20, tzinfo=UTC)
    for hit in sorted(store.all_names(), key=lambda h: h.sku):
        history = builder.history(hit.sku)
        if history is None:
            continue
        for back in range(0, market.span_days, market.every_days):
            at = last - timedelta(days=back, hours=(back * 7) % 13)
            yield builder.build_from(history, int(at.timestamp() * 1000))
    store.close()


def _scaled(sheet: FactSheet, currency: str, rate: float) -> FactSheet:
    """The same sheet in another currency: every money field times `rate`, to the cent.
    Shares and percentages are untouched, so the rules see the same situation."""

    def m(value: float | None) -> float | None:
        return None if value is None else round(value * rate, 2)

    def promo(p: PromotionFact) -> PromotionFact:
        return replace(
            p,
            price=round(p.price * rate, 2),
            base_price=m(p.base_price),
            threshold=m(p.threshold),
            save=m(p.save),
            min_spend=m(p.min_spend),
        )

    claim: DiscountClaim | None = sheet.discount_claim
    if claim is not None:
        claim = replace(
            claim,
            reference=round(claim.reference * rate, 2),
            price=round(claim.price * rate, 2),
            prior_low=m(claim.prior_low),
            raised_from=m(claim.raised_from),
        )
    windows = tuple(
        WindowStats(w.days, w.observations, m(w.min), m(w.avg), m(w.median)) for w in sheet.windows
    )
    return replace(
        sheet,
        currency=currency,
        current_price=m(sheet.current_price),
        list_price=m(sheet.list_price),
        windows=windows,
        all_time_low=m(sheet.all_time_low),
        all_time_high=m(sheet.all_time_high),
        active_promotions=tuple(promo(p) for p in sheet.active_promotions),
        upcoming_promotions=tuple(promo(p) for p in sheet.upcoming_promotions),
        discount_claim=claim,
        effective_price=m(sheet.effective_price),
    )


def _stale(sheet: FactSheet, age_ms: int) -> FactSheet:
    """The sheet as a store fed by events would hold it, its newest data `age_ms` old: the
    rules then say the data is past its freshness objective."""
    return replace(sheet, fed_by_events=True, data_age_ms=age_ms)


def _budget_under(price: float, rng: random.Random) -> float:
    """A round budget a shopper would name, below today's price."""
    target = price * rng.uniform(0.6, 0.95)
    step = 10 ** max(0, len(str(int(target))) - 2)
    return float(max(step, int(target // step) * step))


def _variants(
    sheet: FactSheet, rng: random.Random
) -> Iterator[tuple[str, FactSheet, float | None]]:
    """(variation, sheet, budget): the sheet as it is, then at most one perturbation."""
    yield "none", sheet, None
    draw = rng.random()
    if draw < 0.45:
        currency, rate = rng.choice(CURRENCIES)
        yield f"currency:{currency}", _scaled(sheet, currency, rate * rng.uniform(0.9, 1.1)), None
    elif draw < 0.55 and sheet.current_price is not None:
        yield "budget", sheet, _budget_under(sheet.current_price, rng)
    elif draw < 0.60:
        age_ms = rng.choice((95_000, 400_000, 7_300_000, 90_000_000))
        yield "stale", _stale(sheet, age_ms), None
    elif draw < 0.62 and sheet.current_price is not None and sheet.list_price is not None:
        yield "unusable_price", replace(sheet, list_price=0.0), None
    elif draw < 0.65 and sheet.current_price is not None:
        age_days = rng.choice((4, 9, 31, 100))
        yield "stale_price", replace(sheet, price_age_days=age_days, price_stale=True), None


def candidates(market: Market, workdir: Path) -> Iterator[Candidate]:
    for sheet in _markets_sheets(market, workdir):
        rng = random.Random(f"{market.seed}:{sheet.sku}:{sheet.as_of}")
        for variation, varied, budget in _variants(sheet, rng):
            for language in LANGUAGES:
                verdict = decide_verdict(varied, language, budget=budget)
                if not leading_reasons(verdict):
                    continue  # nothing to word: the template says the label alone
                yield Candidate(
                    language, varied.title, verdict, varied.currency, variation, varied.sku
                )


# --- targets: the team's phrasings ---------------------------------------------------------


def _variant(reason: Reason, slots: dict[str, str]) -> str:
    """Which phrasing family a reason takes (see phrasings.py's keys)."""
    if reason.code == "upcoming_sale" and "terms" in slots:
        return "upcoming_offer"
    if reason.code == "fake_discount" and "true_pct" not in slots:
        return "fake_discount_none"
    if reason.code == "pre_sale_hike" and reason.polarity is Polarity.INFO:
        return "pre_sale_hike_on"
    if reason.code == "over_budget_at_low" and "gap_pct" not in slots:
        return "over_budget_at_low_at"
    return reason.code


def _derived(slots: dict[str, str], language: str) -> dict[str, str]:
    """Slots that keep English grammatical and names readable; values come from the reason."""
    out = dict(slots)
    if "days" in slots:
        one = slots["days"] == "1"
        out["days_away"] = "1 day" if one else f"{slots['days']} days"
        out["in_days"] = f"in {out['days_away']}"
    if "observations" in slots:
        n = slots["observations"]
        out["obs"] = f"{n} price observation" + ("" if n == "1" else "s")
        out["are"] = "is" if n == "1" else "are"
    if "days_tracked" in slots:
        d = slots["days_tracked"]
        out["over_days"] = "less than a day" if d == "0" else f"{d} day" + ("" if d == "1" else "s")
    if "price_from" in slots:
        low, high = slots["price_from"], slots.get("price_to", slots["price_from"])
        joiner = "至" if language == "zh" else " to "
        out["prices"] = low if low == high else f"{low}{joiner}{high}"
    if "name" in slots:
        name = slots["name"]
        if language == "zh":
            out["np"] = name if name == "当前价" else f"{name}活动价"
        else:
            out["np"] = "today's price" if name == "Today's price" else name
    return out


def _reason_values(reason: Reason, language: str, currency: str) -> tuple[str, dict[str, str]]:
    text = model_text(reason, language, currency)
    slots = reason_slots(reason.code, text, language)
    if slots is None:
        raise SystemExit(f"no phrasing of {reason.code} reads {text!r}")
    return _variant(reason, slots), _derived(slots, language)


def target_for(c: Candidate, rng: random.Random) -> str | None:
    """The gold explanation, prefix included; None where the team writes none."""
    kind = c.verdict.kind.value
    leading = c.leading
    key = key_reason(c.verdict.kind, leading)
    if key is None or key.code in ("low_stock", "stale_data"):
        return None  # a modifier alone is no reason for a verdict: the template words it
    lead_variant, lead_slots = _reason_values(key, c.language, c.currency)
    leads = LEAD[c.language]
    lead_key = next(k for k in (f"{kind}:{lead_variant}", lead_variant) if k in leads)
    lead = rng.choice(leads[lead_key]).format(**lead_slots)
    second = ""
    others = [r for r in leading if r is not key]
    supporting = {"BUY": Polarity.BUY, "WAIT": Polarity.WAIT, "SKIP": Polarity.SKIP}.get(kind)
    if others and rng.random() < SECOND_SHARE:
        other = others[0]
        if other.code in SECOND_ALLOWED[kind] and other.polarity in (supporting, Polarity.INFO):
            variant, slots = _reason_values(other, c.language, c.currency)
            options = SECOND[c.language][variant]
            if ", and " in lead:  # one "and" a sentence: take a variant that opens with ";"
                options = tuple(o for o in options if o.startswith(";")) or options
            second = rng.choice(options).format(**slots)
    advice_table = ADVICE[c.language]
    advice_key = next(
        k for k in (f"{kind}:{lead_variant}", f"{kind}:{key.code}", kind) if k in advice_table
    )
    advice = rng.choice(advice_table[advice_key]).format(**lead_slots)
    inputs = ExplanationInputs.of(c.title, c.verdict, c.currency)
    prefix = answer_prefix(inputs)
    if c.language == "zh":
        return f"{prefix}{lead}{second}。{advice}"
    return f"{prefix} {lead}{second}. {advice}"


def record(c: Candidate, index: int, split: str) -> dict[str, object] | None:
    digest = hashlib.sha256(f"{split}:{index}:{c.sku}:{c.language}".encode()).hexdigest()
    target = target_for(c, random.Random(digest))
    if target is None:
        return None
    inputs = ExplanationInputs.of(c.title, c.verdict, c.currency)
    leading = c.leading
    row: dict[str, object] = {
        "id": f"{split}-{c.language}-{index:05d}",
        "language": c.language,
        "title": inputs.title,
        "verdict": c.verdict.kind.value,
        "codes": [r.code for r in leading],
        "polarities": [r.polarity.value for r in leading],
        "reasons": list(inputs.reasons),
        "currency": c.currency,
        "variation": c.variation,
        "target": target,
    }
    check = CheckInputs.from_record(row)
    result = check_explanation(target, check)
    for draw in range(1, REDRAWS + 1):
        if result.ok:
            break
        target = target_for(c, random.Random(f"{digest}:{draw}")) or target
        result = check_explanation(target, check)
    if not result.ok:
        FAILURES.append(f"{result.code}: {result.detail}\n    {row['reasons']}\n    {target}")
    row["target"] = target
    return row


# --- selection -------------------------------------------------------------------------------


def _unique(found: Iterator[Candidate]) -> list[Candidate]:
    """One candidate per distinct model input (language, title, verdict, reasons)."""
    seen: set[tuple[object, ...]] = set()
    out = []
    for c in found:
        key = (
            c.language,
            c.title,
            c.verdict.kind,
            tuple(model_text(r, c.language, c.currency) for r in c.leading),
        )
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _balanced(found: list[Candidate], cap: int, single_cap: int, seed: str) -> list[Candidate]:
    """At most `cap` per combination (`single_cap` where the verdict has one leading
    reason), drawn evenly over products, real sheets first; a sale event's range and its
    single price count as two combinations."""
    groups: dict[tuple[str, str, tuple[str, ...], bool], list[Candidate]] = collections.defaultdict(
        list
    )
    for c in found:
        groups[c.shape].append(c)
    out = []
    for combo in sorted(groups):
        group = groups[combo]
        judged = combo[1] != "INSUFFICIENT_DATA"  # "not enough data" has little to word
        limit = single_cap if judged and len(combo[2]) == 1 else cap
        random.Random(f"{seed}:{combo[:3]}{':range' if combo[3] else ''}").shuffle(group)
        real = [c for c in group if c.variation == "none"]
        varied = [c for c in group if c.variation != "none"]
        take = real[: (limit + 1) // 2]
        take += varied[: limit - len(take)]
        take += real[len(take) : limit] if len(take) < limit else []
        out += take[:limit]
    return out


def _heldout(found: list[Candidate], per_language: int) -> list[Candidate]:
    """`per_language` per language, spread over combinations round-robin."""
    out = []
    for language in LANGUAGES:
        groups: dict[tuple[str, str, tuple[str, ...]], list[Candidate]] = collections.defaultdict(
            list
        )
        for c in found:
            if c.language == language:
                groups[c.combo].append(c)
        for combo in groups:
            random.Random(f"heldout:{combo}").shuffle(groups[combo])
        picked: list[Candidate] = []
        while len(picked) < per_language and any(groups.values()):
            for combo in sorted(groups):
                if groups[combo] and len(picked) < per_language:
                    picked.append(groups[combo].pop())
        out += picked
    return out


def _write(rows: list[dict[str, object]], path: Path) -> None:
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _rows(chosen: list[Candidate], split: str) -> list[dict[str, object]]:
    rows = []
    for i, c in enumerate(chosen):
        row = record(c, i, split)
        if row is not None:
            rows.append(row)
    return rows


def summary(rows: list[dict[str, object]]) -> dict[str, collections.Counter[str]]:
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for row in rows:
        lang = str(row["language"])
        counts["language"][lang] += 1
        counts["verdict"][f"{lang} {row['verdict']}"] += 1
        codes = row["codes"]
        assert isinstance(codes, list)
        counts["lead"][f"{lang} {row['verdict']} {codes[0]}"] += 1
        for code in codes:
            counts["code"][f"{lang} {code}"] += 1
        counts["variation"][f"{lang} {str(row['variation']).split(':')[0]}"] += 1
    return counts


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        first = _unique(c for m in TRAIN_MARKETS if not m.later for c in candidates(m, workdir))
        later = _unique(c for m in TRAIN_MARKETS if m.later for c in candidates(m, workdir))
        held_found = _unique(candidates(HELDOUT_MARKET, workdir))
    train_titles = {c.title for c in first}
    held_found = [c for c in held_found if c.title not in train_titles]
    held_titles = {c.title for c in held_found}
    train_found = _unique([*first, *(c for c in later if c.title not in held_titles)])
    train = _rows(_balanced(train_found, TRAIN_CAP_PER_COMBO, TRAIN_CAP_SINGLE, "train"), "train")
    heldout = _rows(_heldout(held_found, HELDOUT_PER_LANGUAGE + 20), "heldout")
    heldout = [
        row
        for language in LANGUAGES
        for row in [r for r in heldout if r["language"] == language][:HELDOUT_PER_LANGUAGE]
    ]
    if FAILURES:
        print("\n".join(FAILURES), file=sys.stderr)
        codes = collections.Counter(f.split(":")[0] for f in FAILURES)
        raise SystemExit(f"{len(FAILURES)} gold targets fail the checker: {dict(codes)}")
    _write(train, HERE / "train.jsonl")
    _write(heldout, HERE / "heldout.jsonl")
    for name, rows in (("train", train), ("heldout", heldout)):
        counts = summary(rows)
        print(f"{name}: {len(rows)} lines")
        for what in ("language", "verdict", "variation"):
            print("  " + ", ".join(f"{k}: {n}" for k, n in sorted(counts[what].items())))
        real = sum(1 for row in rows if row["variation"] == "none")
        print(f"  real sheets: {real}, varied: {len(rows) - real}")


if __name__ == "__main__":
    main()
