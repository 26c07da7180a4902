"""Calibration: the Beta posteriors by hand, what counts as right, the reliability table
on a hand-made set, feedback kept once per request, and `worthit calibration`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from worthit.decide.backtest import Outcome
from worthit.decide.calibration import (
    Calibration,
    Evidence,
    backtest_success,
    calibration_error,
    feedback_success,
    prior,
    reliability,
)
from worthit.decide.feedback import Answered, Feedback, FeedbackConflictError, FeedbackStore

from conftest import MARKET_AS_OF, run_cli


def evidence(verdict: str, confidence: float | None, success: bool, n: int = 1) -> Evidence:
    return Evidence(verdict, "headphones", confidence, success, "backtest", n)


def test_the_posterior_mean_by_hand() -> None:
    calibration = Calibration(
        [evidence("BUY", 0.8, True, 3), evidence("BUY", 0.6, False), evidence("WAIT", 0.7, True)]
    )
    # prior Beta(0.8·10, 0.2·10) = Beta(8, 2); 3 successes, 1 failure → Beta(11, 3)
    calibrated = calibration.calibrate("BUY", "headphones", 0.8)
    assert calibrated is not None
    assert calibrated.confidence == pytest.approx(11 / 14, abs=1e-4)
    assert calibrated.evidence == 4
    assert calibration.posterior("BUY", "headphones", 0.8).args == pytest.approx((11.0, 3.0))
    assert calibration.posterior("BUY", "headphones", 0.8).mean() == pytest.approx(11 / 14)
    # another category has no evidence: the rule's own confidence
    assert calibration.calibrate("BUY", "tv", 0.8) == type(calibrated)(0.8, 0)
    assert calibration.calibrate("INSUFFICIENT_DATA", "headphones", 0.5) is None


def test_the_prior_stays_a_proper_beta_at_the_ends() -> None:
    assert prior(0.7) == pytest.approx((7.0, 3.0))
    assert prior(1.0) == pytest.approx((9.9, 0.1))
    assert prior(0.0) == pytest.approx((0.1, 9.9))


@given(
    c=st.floats(0.01, 0.99),
    successes=st.integers(0, 500),
    failures=st.integers(0, 500),
)
def test_the_calibrated_value_lies_between_the_rule_and_the_observed_rate(
    c: float, successes: int, failures: int
) -> None:
    items = [evidence("WAIT", c, True, successes), evidence("WAIT", c, False, failures)]
    calibrated = Calibration(items).calibrate("WAIT", "headphones", c)
    assert calibrated is not None and calibrated.evidence == successes + failures
    if successes + failures:
        observed = successes / (successes + failures)
        low, high = sorted((c, observed))
        assert low - 1e-4 <= calibrated.confidence <= high + 1e-4


def test_what_feedback_says_about_the_advice() -> None:
    assert feedback_success("BUY", "bought") is True
    assert feedback_success("BUY", "returned") is False
    assert feedback_success("BUY", "waited") is None
    assert feedback_success("BUY", "dismissed") is None
    assert feedback_success("WAIT", "waited") is True
    assert feedback_success("WAIT", "bought") is False
    assert feedback_success("SKIP", "bought") is False
    assert feedback_success("SKIP", "returned") is True
    assert feedback_success("INSUFFICIENT_DATA", "bought") is None
    assert feedback_success(None, "bought") is None


def outcome(verdict: str, now: float, paid: float | None, best: float) -> Outcome:
    bought = None if paid is None else "2026-01-02"
    return Outcome("S1", "headphones", "2026-01-01", verdict, bought, paid, now, best)


def test_what_the_backtest_says_about_the_advice() -> None:
    assert backtest_success(outcome("BUY", 100.0, 100.0, 95.0)) is False  # exactly 5 % lower
    assert backtest_success(outcome("BUY", 100.0, 100.0, 95.01)) is True
    assert backtest_success(outcome("WAIT", 100.0, 99.0, 90.0)) is True
    assert backtest_success(outcome("WAIT", 100.0, 100.0, 90.0)) is False  # waited for nothing
    assert backtest_success(outcome("WAIT", 100.0, 104.0, 90.0)) is False
    assert backtest_success(outcome("SKIP", 100.0, None, 90.0)) is None


def test_the_reliability_table_on_a_hand_made_set() -> None:
    items = [
        evidence("BUY", 0.85, True, 3),
        evidence("BUY", 0.85, False),
        evidence("SKIP", 0.15, False, 2),
        Evidence("WAIT", "tv", 0.95, True, "feedback"),
        evidence("WAIT", 1.0, True),  # the top bin is closed
        evidence("BUY", None, True, 50),  # no known confidence: not in the table
    ]
    table = reliability(items, bins=10)
    assert [(b.low, b.high, b.n, b.successes) for b in table] == [
        (0.1, 0.2, 2, 0),
        (0.8, 0.9, 4, 3),
        (0.9, 1.0, 2, 2),
    ]
    assert [b.predicted for b in table] == pytest.approx([0.15, 0.85, 0.975])
    assert [b.observed for b in table] == pytest.approx([0.0, 0.75, 1.0])
    assert table[2].sources == {"backtest": 1, "feedback": 1}
    low, high = table[1].interval()
    assert low < 0.75 < high
    # ECE = (2·0.15 + 4·0.10 + 2·0.025) / 8
    assert calibration_error(table) == pytest.approx((0.3 + 0.4 + 0.05) / 8)
    assert table[1].to_dict()["observed"] == 0.75
    assert calibration_error([]) is None


def answered(verdict: str = "BUY") -> Answered:
    return Answered(verdict, "S1", "headphones", 0.8, answered_ms=1_000)


def test_feedback_is_kept_once_per_request_and_learnt_from(tmp_path: Path) -> None:
    db = tmp_path / "market.db"
    calibration = Calibration.open(db)
    first = calibration.record(Feedback("a", "r1", "bought", answered(), 2_000))
    again = calibration.record(Feedback("a", "r1", "bought", answered(), 3_000))
    other_tenant = calibration.record(Feedback("b", "r1", "waited", answered(), 3_000))
    with pytest.raises(FeedbackConflictError) as conflict:
        calibration.record(Feedback("a", "r1", "dismissed", answered(), 4_000))
    assert not first.duplicate and again.duplicate and not other_tenant.duplicate
    assert again.feedback.received_ms == 2_000  # the first one stands
    assert conflict.value.stored == "bought"
    assert calibration.tally("BUY", "headphones").successes == 1  # b's wait says nothing
    returned = calibration.record(Feedback("a", "r1", "returned", answered(), 5_000))
    assert returned.replaced == "bought"
    tally = calibration.tally("BUY", "headphones")
    assert (tally.successes, tally.failures) == (0, 1)
    calibration.close()

    reopened = Calibration.open(db)
    tally = reopened.tally("BUY", "headphones")
    assert (tally.successes, tally.failures) == (0, 1)
    assert reopened.store is not None
    stored = reopened.store.get("a", "r1")
    assert stored is not None and stored.outcome == "returned" and stored.answer == answered()
    assert reopened.store.get(None, "r1") is None
    reopened.close()


def test_a_store_refuses_an_outcome_it_does_not_know(tmp_path: Path) -> None:
    store = FeedbackStore(tmp_path / "market.db")
    with pytest.raises(ValueError, match="outcome"):
        store.record(Feedback(None, "r1", "loved", answered(), 1))
    store.close()


def test_the_cli_prints_a_reliability_table_and_saves_the_evidence(
    small_market: Path, tmp_path: Path
) -> None:
    db = tmp_path / "market.db"
    shutil.copy(small_market, db)
    replayed = run_cli("calibration", "--db", str(db), "--skus", "6", "--save", "--json")
    assert replayed.returncode == 0, replayed.stderr
    report = json.loads(replayed.stdout)
    assert report["saved"] is True and report["evidence"]["feedback"] == 0
    total = report["evidence"]["backtest"]
    assert total > 0 and sum(row["n"] for row in report["reliability"]) == total
    for row in report["reliability"]:
        assert row["low"] <= row["predicted"] <= row["high"]
        assert 0 <= row["observed"] <= 1
    assert {p["verdict"] for p in report["posteriors"]} <= {"BUY", "WAIT"}

    stored = run_cli("calibration", "--db", str(db), "--stored", "--json")
    assert stored.returncode == 0, stored.stderr
    assert json.loads(stored.stdout)["reliability"] == report["reliability"]
    shown = run_cli("calibration", "--db", str(db), "--stored")
    assert shown.returncode == 0 and "predicted" in shown.stdout and "calibrated" in shown.stdout
    assert "expected calibration error: the outcome-weighted mean" in shown.stdout  # legend
    missing = run_cli("calibration", "--db", str(tmp_path / "none.db"))
    assert missing.returncode == 2 and "no database" in missing.stderr

    # `worthit ask` calibrates on the saved evidence as the server does
    ask = ("ask", "--db", str(db), "--no-llm", "--as-of", MARKET_AS_OF, "--sku", "S1", "?")
    answer = json.loads(run_cli(*ask, "--json").stdout)
    assert answer["verdict"] == "BUY" and answer["calibration_evidence"] > 0
    assert 0 < answer["calibrated_confidence"] < 1
    text = run_cli(*ask).stdout
    assert (
        f"calibrated confidence {answer['calibrated_confidence']:.2f} "
        f"(from {answer['calibration_evidence']} outcomes)"
    ) in text
