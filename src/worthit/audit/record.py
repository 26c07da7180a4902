"""What one leaf of the log says about one answer, and its byte encoding.

The leaf holds hashes, not texts: the question, the facts and the explanation can be
shown later by whoever kept them and checked against the leaf, while the log itself
never stores what a shopper typed. The bytes are canonical JSON (below), so anyone can
re-derive them from the fields and check the leaf hash without worthit's code.

Leaf bytes: one JSON object, UTF-8, keys sorted, no whitespace (`,` and `:` separators),
non-ASCII characters as themselves, no NaN or infinity, integers as integers, floats in
Python's shortest round-trip form. Besides the record's fields it carries `"v": 1` (the
format) and `"index"`, the leaf's own position, so a leaf moved to another position is
named by what it says, not only by a root that no longer matches.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from json.encoder import encode_basestring
from typing import Any

from worthit.audit.errors import MalformedError

LEAF_FORMAT = 1
ANSWER = "answer"
LOST = "lost"
"""A tombstone: an index handed out before a crash whose leaf never reached the disk."""

_HEX_FIELDS = ("question_sha256", "facts_sha256", "explanation_sha256")
_OPTIONAL_TEXT = (
    "tenant",
    "facts_version",
    "verdict",
    "explanation_source",
    "model",
    "sku",
    "language",
    "priority",
    "status",
)


@dataclass(frozen=True, slots=True)
class AuditRecord:
    request_id: str
    tenant: str | None
    wall_ms: int
    """When the answer finished, epoch milliseconds (the SLA report's time axis)."""
    monotonic_ns: int
    """The host's monotonic clock at the same moment: orders leaves when the wall clock jumps."""
    question_sha256: str
    """Hex SHA-256 of the question's UTF-8 bytes; empty on a tombstone."""
    facts_version: str | None = None
    facts_sha256: str | None = None
    """Hex SHA-256 of the fact sheet's canonical JSON (`canonical_json(sheet.to_dict())`)."""
    verdict: str | None = None
    explanation_sha256: str | None = None
    """Hex SHA-256 of the explanation text's UTF-8 bytes, as the shopper was shown it."""
    explanation_source: str | None = None
    model: str | None = None
    timings_ms: Mapping[str, float] = field(default_factory=dict)
    """Per-stage milliseconds as the answer reported them (`to_verdict`, `total`, …)."""
    sku: str | None = None
    language: str | None = None
    priority: str | None = None
    status: str | None = None
    """The decision's status (`answered`, `unknown_product`, …)."""
    kind: str = ANSWER

    @classmethod
    def for_answer(
        cls,
        *,
        request_id: str,
        question: str,
        tenant: str | None = None,
        facts: Mapping[str, Any] | None = None,
        facts_sha256: str | None = None,
        facts_version: str | None = None,
        verdict: str | None = None,
        explanation: str | None = None,
        explanation_source: str | None = None,
        model: str | None = None,
        timings_ms: Mapping[str, float] | None = None,
        sku: str | None = None,
        language: str | None = None,
        priority: str | None = None,
        status: str | None = None,
        wall_ms: int | None = None,
        monotonic_ns: int | None = None,
    ) -> AuditRecord:
        """A record from the raw texts and the fact sheet's dict, hashed here (or the
        dict's `facts_sha256`, `sha256_hex(canonical_json(facts))`, when the caller has it);
        the clocks are read now unless given."""
        if facts is not None:
            facts_sha256 = sha256_hex(canonical_json(facts))
        return cls(
            request_id=request_id,
            tenant=tenant,
            wall_ms=time.time_ns() // 1_000_000 if wall_ms is None else wall_ms,
            monotonic_ns=time.monotonic_ns() if monotonic_ns is None else monotonic_ns,
            question_sha256=sha256_hex(question.encode()),
            facts_version=facts_version,
            facts_sha256=facts_sha256,
            verdict=verdict,
            explanation_sha256=None if explanation is None else sha256_hex(explanation.encode()),
            explanation_source=explanation_source,
            model=model,
            timings_ms=dict(timings_ms or {}),
            sku=sku,
            language=language,
            priority=priority,
            status=status,
        )

    @classmethod
    def lost(cls, wall_ms: int, monotonic_ns: int) -> AuditRecord:
        return cls(
            request_id="",
            tenant=None,
            wall_ms=wall_ms,
            monotonic_ns=monotonic_ns,
            question_sha256="",
            kind=LOST,
        )

    def to_dict(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _FIELDS}
        data["timings_ms"] = dict(self.timings_ms)
        return data

    def to_bytes(self, index: int) -> bytes:
        """The leaf at `index`: what the log stores and hashes (see the module docstring).

        Written field by field, twice as fast as `json.dumps` on the answer path, for the
        plain types the answer path passes; anything else goes through `canonical_json`.
        Both give the same bytes (a property test holds them to it).
        """
        leaf = _plain_leaf(self, index)
        if leaf is None:
            return canonical_json({**self.to_dict(), "index": index, "v": LEAF_FORMAT})
        return leaf

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AuditRecord:
        """The record from its fields, checked: a leaf read back may have been edited."""
        try:
            values = {name: data[name] for name in _FIELDS}
        except KeyError as missing:
            raise MalformedError(f"the leaf has no field {missing}") from None
        _check(values)
        return cls(**values)

    @classmethod
    def from_bytes(cls, data: bytes) -> AuditRecord:
        return decode_leaf(data)[1]


_FIELDS = tuple(f.name for f in fields(AuditRecord))


def decode_leaf(data: bytes) -> tuple[int, AuditRecord]:
    """(index, record) from leaf bytes; `MalformedError` unless they are canonical."""
    try:
        fields = json.loads(data.decode())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MalformedError(f"the leaf is not JSON: {exc}") from None
    if not isinstance(fields, dict):
        raise MalformedError("the leaf is not a JSON object")
    if fields.get("v") != LEAF_FORMAT:
        raise MalformedError(f"leaf format {fields.get('v')!r} is not {LEAF_FORMAT}")
    index = fields.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise MalformedError("the leaf has no index")
    record = AuditRecord.from_dict(fields)
    if set(fields) != {*_FIELDS, "index", "v"}:
        raise MalformedError("the leaf has fields the format does not define")
    if record.to_bytes(index) != data:
        raise MalformedError("the leaf is not in canonical form")
    return index, record


def _plain_leaf(r: AuditRecord, index: int) -> bytes | None:
    """The canonical leaf bytes, or None when a value is not a plain str, int or float."""
    texts = (
        r.explanation_sha256, r.explanation_source, r.facts_sha256, r.facts_version, r.kind,
        r.language, r.model, r.priority, r.question_sha256, r.request_id, r.sku, r.status,
        r.tenant, r.verdict,
    )  # fmt: skip
    if not all(v is None or type(v) is str for v in texts):
        return None
    if not all(type(v) is int for v in (index, r.monotonic_ns, r.wall_ms)):
        return None
    timings = []
    for key in sorted(r.timings_ms):
        value = r.timings_ms[key]
        if type(key) is not str:
            return None
        if type(value) is int:
            timings.append(f"{_text(key)}:{value}")
        elif type(value) is float and math.isfinite(value):
            timings.append(f"{_text(key)}:{float.__repr__(value)}")
        else:
            return None
    (
        ex_sha,
        ex_src,
        f_sha,
        f_ver,
        kind,
        lang,
        model,
        prio,
        q_sha,
        rid,
        sku,
        status,
        tenant,
        verdict,
    ) = (_text(v) for v in texts)
    return (
        f'{{"explanation_sha256":{ex_sha},"explanation_source":{ex_src},"facts_sha256":{f_sha},'
        f'"facts_version":{f_ver},"index":{index},"kind":{kind},"language":{lang},'
        f'"model":{model},"monotonic_ns":{r.monotonic_ns},"priority":{prio},'
        f'"question_sha256":{q_sha},"request_id":{rid},"sku":{sku},"status":{status},'
        f'"tenant":{tenant},"timings_ms":{{{",".join(timings)}}},"v":{LEAF_FORMAT},'
        f'"verdict":{verdict},"wall_ms":{r.wall_ms}}}'
    ).encode()


def _text(value: str | None) -> str:
    return "null" if value is None else encode_basestring(value)


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no whitespace, UTF-8: one byte string per value, whoever encodes it.

    Values JSON has no type for (a date, an enum member) are written as their `str()`.
    """
    return json.dumps(
        value,
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        allow_nan=False,
        default=str,
    ).encode()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _check(values: Mapping[str, Any]) -> None:
    def fail(name: str, what: str) -> None:
        raise MalformedError(f"leaf field {name} must be {what}")

    if not isinstance(values["request_id"], str):
        fail("request_id", "a string")
    for name in ("wall_ms", "monotonic_ns"):
        if not isinstance(values[name], int) or isinstance(values[name], bool):
            fail(name, "an integer")
    for name in _OPTIONAL_TEXT:
        if values[name] is not None and not isinstance(values[name], str):
            fail(name, "a string or null")
    if values["kind"] not in (ANSWER, LOST):
        fail("kind", f"{ANSWER!r} or {LOST!r}")
    for name in _HEX_FIELDS:
        value = values[name]
        if value is None and name != "question_sha256":
            continue
        if not isinstance(value, str) or not _is_sha256_hex(
            value, empty_ok=name == "question_sha256"
        ):
            fail(name, "64 lowercase hex digits")
    timings = values["timings_ms"]
    if not isinstance(timings, dict) or not all(
        isinstance(k, str)
        and isinstance(v, int | float)
        and not isinstance(v, bool)
        and math.isfinite(v)
        for k, v in timings.items()
    ):
        fail("timings_ms", "an object of finite numbers")


def _is_sha256_hex(value: str, *, empty_ok: bool) -> bool:
    if value == "":
        return empty_ok
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)
