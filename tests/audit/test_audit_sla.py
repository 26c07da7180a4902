"""SLA evidence: honest percentile claims, intervals that cover, bundles that re-derive."""

from __future__ import annotations

import base64
import copy
import json
from pathlib import Path

import numpy as np
import pytest
from audit_factories import BASE_MS, record
from audit_fixtures import log_path
from scipy import stats

from worthit.audit.bundle import make_bundle, verify_bundle
from worthit.audit.checkpoint import Checkpoint
from worthit.audit.errors import MalformedError, VerificationError
from worthit.audit.log import AuditLog
from worthit.audit.note import NoteVerifier
from worthit.audit.sla import (
    DEFAULT_OBJECTIVES,
    INDEPENDENCE,
    PERCENTILES,
    Objective,
    build_report,
    interval,
    judge,
    min_samples,
    percentile_summary,
    upper_bound,
)
from worthit.audit.store import LogReader

__all__ = ["log_path"]


def test_the_smallest_samples_that_bound_a_percentile() -> None:
    assert min_samples(99) == 299
    assert min_samples(95) == 59
    assert min_samples(50) == 5


def test_p99_is_refused_below_299_samples_and_claimed_from_299() -> None:
    rng = np.random.default_rng(1)
    short = np.sort(rng.exponential(10, 298))
    refused = percentile_summary(short, 99)
    assert refused["claimed"] is False and "299" in refused["reason"]
    assert "estimate_ms" not in refused
    enough = np.sort(rng.exponential(10, 299))
    claimed = percentile_summary(enough, 99)
    assert claimed["claimed"] is True
    assert claimed["upper_bound_ms"] == enough[-1]  # the largest sample bounds P99 at n = 299


def test_an_objective_passes_only_on_the_upper_bound() -> None:
    fast = np.sort(np.full(400, 50.0))
    objective = Objective("to_verdict", 99, 120)
    assert judge(fast, objective)["outcome"] == "pass"
    slow = np.sort(np.full(400, 200.0))
    assert judge(slow, objective) | {"outcome": "fail", "violated": True} == judge(slow, objective)
    assert judge(fast[:100], objective)["outcome"] == "insufficient"
    assert judge(np.asarray([]), objective)["outcome"] == "insufficient"


def test_no_outlier_is_dropped() -> None:
    values = np.sort(np.append(np.full(399, 10.0), 10_000.0))
    summary = percentile_summary(values, 99)
    assert summary["ci_ms"][1] == 10_000.0 or summary["upper_bound_ms"] == 10.0
    stage = build_report(
        [(i, record(i, to_verdict=float(v))) for i, v in enumerate(values)],
        origin="o",
        from_ms=0,
        to_ms=1,
        tree_size=400,
        root_b64="",
    )["stages"]["to_verdict"]
    assert stage["count"] == 400 and stage["max_ms"] == 10_000.0


def test_the_intervals_cover_the_true_percentile_at_least_95_percent_of_the_time() -> None:
    """Seeded, so it cannot flake: 2,000 samples of 400 from a skewed distribution."""
    rng = np.random.default_rng(20260921)
    truth = stats.lognorm(s=0.8, scale=40.0)
    trials = 2_000
    covered = dict.fromkeys(PERCENTILES, 0)
    for _ in range(trials):
        sample = np.sort(truth.rvs(size=400, random_state=rng))
        for percentile in PERCENTILES:
            true_value = truth.ppf(percentile / 100)
            low, high = interval(sample, percentile / 100)
            covered[percentile] += (
                low is not None and high is not None and low <= true_value <= high
            )
    assert all(count / trials >= 0.95 for count in covered.values()), covered


@pytest.mark.parametrize("percentile", PERCENTILES)
def test_the_intervals_cover_at_least_95_percent_for_every_sample_size(percentile: int) -> None:
    """Exactly, not by simulation: for continuous data the count of samples under the true
    quantile is Binomial(n, p), so an interval between order statistics r and s covers it
    with probability P(r ≤ B < s); checked for both the interval and the one-sided bound."""
    p = percentile / 100
    for n in range(min_samples(percentile), 1_500, 11):
        ranks = np.arange(1, n + 1, dtype=float)  # order statistics come back as their ranks
        count = stats.binom(n, p)
        low, high = interval(ranks, p)
        r, s = low or 0, high or n + 1
        assert count.cdf(s - 1) - count.cdf(r - 1) >= 0.95, (percentile, n)
        top = upper_bound(ranks, p)
        assert top is not None and count.cdf(top - 1) >= 0.95 - 1e-12, (percentile, n)


def test_the_report_states_its_method_and_the_independence_assumption() -> None:
    report = build_report(
        [(i, record(i)) for i in range(10)],
        origin="o",
        from_ms=0,
        to_ms=1,
        tree_size=10,
        root_b64="",
    )
    assert report["assumption"] == INDEPENDENCE and "independent" in INDEPENDENCE
    assert "quantile_test" in report["method"]
    assert [o["objective"] for o in report["objectives"]] == [str(o) for o in DEFAULT_OBJECTIVES]
    assert report["stages"]["to_verdict"]["p99"]["claimed"] is False


def test_objectives_parse_from_the_command_line_form() -> None:
    assert Objective.parse("to_verdict:p99<=120") == Objective("to_verdict", 99.0, 120.0)
    assert Objective.parse(" total : P95 <= 800.5 ") == Objective("total", 95.0, 800.5)
    for bad in ("to_verdict<=120", "total:p100<=5", "total:p95>=5"):
        with pytest.raises(ValueError):
            Objective.parse(bad)


@pytest.fixture
def bundled(log_path: Path) -> tuple[dict, NoteVerifier, Path]:
    log = AuditLog(log_path)
    rng = np.random.default_rng(5)
    for i, v in enumerate(rng.exponential(20, 350)):
        log.append(record(i, to_verdict=float(v)))
    log.close()
    with LogReader(log_path) as reader:
        stored = reader.latest_stored_checkpoint()
        assert stored is not None and stored.size == 350
        head = Checkpoint.from_note(stored.note)
        report = build_report(
            reader.records_between(BASE_MS, BASE_MS + 300_000, head.size),
            origin=head.origin,
            from_ms=BASE_MS,
            to_ms=BASE_MS + 300_000,
            tree_size=head.size,
            root_b64=base64.b64encode(head.root).decode(),
        )
    from worthit.audit import keyfile

    signer = keyfile.load(log_path.with_name("market.audit.key"))
    bundle = json.loads(json.dumps(make_bundle(report, stored.note, signer)))
    return bundle, signer.verifier, log_path


def test_a_bundle_re_derives_from_the_log(bundled: tuple[dict, NoteVerifier, Path]) -> None:
    bundle, verifier, path = bundled
    assert bundle["report"]["leaves"]["answers"] == 300
    with LogReader(path) as reader:
        assert verify_bundle(bundle, verifier, reader).size == 350


def test_a_bundle_whose_report_was_edited_is_refused(
    bundled: tuple[dict, NoteVerifier, Path],
) -> None:
    bundle, verifier, path = bundled
    edited = copy.deepcopy(bundle)
    edited["report"]["objectives"][0]["outcome"] = "pass"
    edited["report"]["stages"]["to_verdict"]["count"] = 301
    with LogReader(path) as reader, pytest.raises(VerificationError, match="signature"):
        verify_bundle(edited, verifier, reader)


def test_a_bundle_over_an_edited_log_is_refused(bundled: tuple[dict, NoteVerifier, Path]) -> None:
    import sqlite3

    bundle, verifier, path = bundled
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("DELETE FROM leaves WHERE idx = 17")
    conn.close()
    with LogReader(path) as reader, pytest.raises(VerificationError, match="no leaf 17"):
        verify_bundle(bundle, verifier, reader)


def test_a_bundle_signed_by_another_key_is_refused(
    bundled: tuple[dict, NoteVerifier, Path], tmp_path: Path
) -> None:
    from worthit.audit import keyfile

    bundle, verifier, path = bundled
    other = keyfile.load_or_create(tmp_path / "other.key", verifier.name)
    forged = make_bundle(bundle["report"], bundle["checkpoint"], other)
    with LogReader(path) as reader, pytest.raises(VerificationError):
        verify_bundle(forged, verifier, reader)
    with LogReader(path) as reader, pytest.raises(MalformedError):
        verify_bundle({"format": "nope"}, verifier, reader)
