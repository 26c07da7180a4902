"""The leaf's bytes: documented, stable, canonical, and read back exactly."""

from __future__ import annotations

import hashlib
import json

import pytest
from audit_factories import record
from hypothesis import given, settings
from hypothesis import strategies as st

from worthit.audit.errors import MalformedError
from worthit.audit.record import AuditRecord, canonical_json, decode_leaf


def test_the_leaf_bytes_are_sorted_compact_utf8_json_with_index_and_format() -> None:
    leaf = AuditRecord(
        request_id="r-1",
        tenant="商店",
        wall_ms=1,
        monotonic_ns=2,
        question_sha256=hashlib.sha256(b"q").hexdigest(),
        timings_ms={"total": 1.5, "to_verdict": 0.25},
    ).to_bytes(7)
    assert (
        leaf
        == (
            '{"explanation_sha256":null,"explanation_source":null,"facts_sha256":null,'
            '"facts_version":null,"index":7,"kind":"answer","language":null,"model":null,'
            '"monotonic_ns":2,"priority":null,"question_sha256":'
            '"8e35c2cd3bf6641bdb0e2050b76932cbb2e6034a0ddacc1d9bea82a6ba57f7cf",'
            '"request_id":"r-1","sku":null,"status":null,"tenant":"商店",'
            '"timings_ms":{"to_verdict":0.25,"total":1.5},"v":1,"verdict":null,"wall_ms":1}'
        ).encode()
    )


def test_for_answer_hashes_the_question_facts_and_explanation() -> None:
    facts = {"b": 2, "a": [1, 2.5], "price": 99.5}
    r = AuditRecord.for_answer(
        request_id="r", question="值不值得买？", facts=facts, explanation="Buy it.", wall_ms=5
    )
    assert r.question_sha256 == hashlib.sha256("值不值得买？".encode()).hexdigest()
    expected = json.dumps(facts, sort_keys=True, separators=(",", ":")).encode()
    assert r.facts_sha256 == hashlib.sha256(expected).hexdigest()
    assert r.explanation_sha256 == hashlib.sha256(b"Buy it.").hexdigest()
    assert r.monotonic_ns > 0 and r.wall_ms == 5


def test_bytes_read_back_to_the_same_record_and_index() -> None:
    r = record(3)
    assert decode_leaf(r.to_bytes(12)) == (12, r)
    assert AuditRecord.from_bytes(r.to_bytes(12)) == r
    assert AuditRecord.from_dict(r.to_dict()) == r


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(v=2),
        lambda d: d.pop("index"),
        lambda d: d.update(extra=1),
        lambda d: d.update(question_sha256="XYZ"),
        lambda d: d.update(timings_ms={"total": "fast"}),
        lambda d: d.update(wall_ms="now"),
        lambda d: d.update(kind="other"),
        lambda d: d.pop("tenant"),
    ],
)
def test_leaves_that_break_the_format_are_refused(change: object) -> None:
    fields = json.loads(record(1).to_bytes(1))
    change(fields)  # type: ignore[operator]
    with pytest.raises(MalformedError):
        decode_leaf(canonical_json(fields))


def test_non_canonical_bytes_are_refused() -> None:
    data = record(1).to_bytes(1)
    spaced = json.dumps(json.loads(data), sort_keys=True, ensure_ascii=False).encode()
    with pytest.raises(MalformedError, match="canonical"):
        decode_leaf(spaced)
    with pytest.raises(MalformedError):
        decode_leaf(b"\xff")


def test_a_tombstone_is_a_lost_leaf_with_no_answer() -> None:
    lost = AuditRecord.lost(wall_ms=10, monotonic_ns=11)
    assert lost.kind == "lost" and lost.tenant is None and lost.timings_ms == {}
    assert decode_leaf(lost.to_bytes(4)) == (4, lost)


texts = st.none() | st.text(max_size=20)
timings = st.dictionaries(
    st.text(max_size=8),
    st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(
    st.builds(
        AuditRecord,
        request_id=st.text(max_size=20),
        tenant=texts,
        wall_ms=st.integers(-(2**63), 2**63),
        monotonic_ns=st.integers(0, 2**64),
        question_sha256=st.text(max_size=70),
        facts_version=texts,
        facts_sha256=texts,
        verdict=texts,
        explanation_sha256=texts,
        explanation_source=texts,
        model=texts,
        timings_ms=timings,
        sku=texts,
        language=texts,
        priority=texts,
        status=texts,
        kind=st.text(max_size=8),
    ),
    st.integers(0, 2**48),
)
def test_the_fast_encoding_is_exactly_canonical_json(r: AuditRecord, index: int) -> None:
    expected = canonical_json({**r.to_dict(), "index": index, "v": 1})
    assert r.to_bytes(index) == expected
