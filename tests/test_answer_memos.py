"""The answer path's memos change only what an answer costs, never what it says or
what its audit record holds."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime

from hypothesis import given
from hypothesis import strategies as st

from worthit.answer.facts_digest import FactsDigests
from worthit.answer.run_memo import RunMemo
from worthit.audit.record import canonical_json, sha256_hex
from worthit.explain.explainer import ExplanationRun
from worthit.explain.store_key import explanation_key

from factories import make_offer, make_promotion, make_sheet, make_verdict

titles = st.text(min_size=1, max_size=30)
ages = st.integers(min_value=-1, max_value=10**12)


moments = st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1)).map(
    lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")
)


@given(titles, ages, ages, moments, st.booleans())
def test_spliced_digest_is_the_digest_of_the_whole_sheet(title, age, other_age, moment, live):
    """Read older, and rebuilt at another moment with nothing changed: each hashed as itself."""
    digests = FactsDigests()
    sheet = make_sheet(title=title, data_age_ms=age, fed_by_events=live)
    again = replace(sheet, data_age_ms=other_age)
    rebuilt = replace(sheet, as_of=moment)
    for each in (sheet, again, rebuilt, sheet):
        assert digests.digest(each) == sha256_hex(canonical_json(each.to_dict()))


def test_digest_follows_what_the_version_leaves_out():
    """The moment and `fed_by_events` are not in the version: a sheet differing only there is
    hashed as itself, not as the one seen first."""
    digests = FactsDigests()
    sheet = make_sheet(active_promotions=(make_offer(),), upcoming_promotions=(make_promotion(),))
    for each in (
        sheet,
        replace(sheet, as_of="2026-03-15T00:00:00Z"),
        replace(sheet, fed_by_events=True),
    ):
        assert digests.digest(each) == sha256_hex(canonical_json(each.to_dict()))


def _key(run: ExplanationRun) -> str:
    return explanation_key("m", run.messages, run.prefix, "greedy")


def test_memoized_run_is_a_fresh_run_with_the_same_basis():
    memo = RunMemo(_key)
    sheet, verdict = make_sheet(), make_verdict()
    first, key = memo.run(sheet, verdict)
    second, again = memo.run(replace(sheet, data_age_ms=5), verdict)
    assert again == key == _key(ExplanationRun(sheet, verdict))
    assert second.basis is first.basis and second is not first
    assert second.feed("") == first.feed("")
    assert second.fallback("x").text == ExplanationRun(sheet, verdict).fallback("x").text


def test_memo_misses_on_another_verdict_or_version():
    memo = RunMemo(_key)
    sheet, verdict = make_sheet(), make_verdict()
    first, _ = memo.run(sheet, verdict)
    other_verdict, _ = memo.run(sheet, make_verdict())
    other_version, _ = memo.run(replace(sheet, version="ffff"), verdict)
    assert other_verdict.basis is not first.basis
    assert other_version.basis is not first.basis


def test_memo_keeps_at_most_its_capacity():
    memo = RunMemo(_key, capacity=3)
    verdicts = [make_verdict() for _ in range(5)]
    for verdict in verdicts:
        memo.run(make_sheet(), verdict)
    assert len(memo) == 3
