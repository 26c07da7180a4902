"""An SLA report an auditor can check: the report, the checkpoint it stands on, a signature.

The report is computed from the leaves below the checkpoint's tree size, so anyone with
the log file and the log's public key can rebuild that tree from the leaf bytes, see
that it reproduces the signed root, compute the report again and compare it byte for
byte. The signature (the log's Ed25519 key over a domain-separated message, so it can
never be taken for a checkpoint signature) shows who issued the report.
"""

from __future__ import annotations

import base64
import binascii
import struct
from collections.abc import Mapping
from typing import Any

from worthit.audit.checkpoint import Checkpoint
from worthit.audit.errors import MalformedError, VerificationError
from worthit.audit.frontier import Frontier
from worthit.audit.note import NoteSigner, NoteVerifier
from worthit.audit.record import canonical_json
from worthit.audit.sla import build_report, objectives_of
from worthit.audit.store import LogReader

BUNDLE_FORMAT = "worthit-audit-report-bundle/1"
SIGNED_PREFIX = b"worthit audit report bundle v1\n"


def make_bundle(
    report: Mapping[str, Any], checkpoint_note: str, signer: NoteSigner
) -> dict[str, Any]:
    payload = {"report": dict(report), "checkpoint": checkpoint_note}
    signature = struct.pack(">I", signer.key_id) + signer.sign_bytes(_message(payload))
    return {
        "format": BUNDLE_FORMAT,
        **payload,
        "key": signer.name,
        "signature": base64.b64encode(signature).decode(),
    }


def verify_bundle(
    bundle: Mapping[str, Any], verifier: NoteVerifier, reader: LogReader
) -> Checkpoint:
    """The checkpoint the bundle stands on, if everything in it checks out against the log."""
    report, note, signature = _fields(bundle)
    checkpoint = Checkpoint.open(note, verifier)
    if signature[:4] != struct.pack(">I", verifier.key_id) or not verifier.verifies(
        _message({"report": report, "checkpoint": note}), signature[4:]
    ):
        raise VerificationError("the bundle's signature does not verify with the log's key")
    anchor = (report.get("origin"), report.get("tree_size"), report.get("root"))
    if anchor != (checkpoint.origin, checkpoint.size, base64.b64encode(checkpoint.root).decode()):
        raise VerificationError("the report is not anchored to the bundle's checkpoint")
    frontier = Frontier()
    for index, data in reader.leaves_below(checkpoint.size):
        if index != frontier.size:
            raise VerificationError(f"the log has no leaf {frontier.size}")
        frontier.append_leaf(data)
    if frontier.size != checkpoint.size:
        raise VerificationError(
            f"the log holds {frontier.size} leaves, the checkpoint {checkpoint.size}"
        )
    if frontier.root() != checkpoint.root:
        raise VerificationError("the log's leaves do not reproduce the checkpoint's root")
    try:
        again = build_report(
            reader.records_between(int(report["from_ms"]), int(report["to_ms"]), checkpoint.size),
            origin=checkpoint.origin,
            from_ms=int(report["from_ms"]),
            to_ms=int(report["to_ms"]),
            tree_size=checkpoint.size,
            root_b64=str(report["root"]),
            objectives=objectives_of(report),
            confidence=float(report["confidence"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise MalformedError(f"the report cannot be computed again: {exc}") from None
    if canonical_json(again) != canonical_json(report):
        raise VerificationError("the report differs from the one the log's leaves give")
    return checkpoint


def _message(payload: Mapping[str, Any]) -> bytes:
    return SIGNED_PREFIX + canonical_json(payload)


def _fields(bundle: Mapping[str, Any]) -> tuple[dict[str, Any], str, bytes]:
    if not isinstance(bundle, Mapping) or bundle.get("format") != BUNDLE_FORMAT:
        raise MalformedError(f"not a report bundle (format {BUNDLE_FORMAT})")
    report, note, signature = (
        bundle.get("report"),
        bundle.get("checkpoint"),
        bundle.get("signature"),
    )
    if not isinstance(report, dict) or not isinstance(note, str) or not isinstance(signature, str):
        raise MalformedError("a bundle holds a report object, a checkpoint and a signature")
    try:
        raw = base64.b64decode(signature, validate=True)
    except binascii.Error:
        raise MalformedError("the bundle's signature is not base64") from None
    if len(raw) < 5:
        raise MalformedError("the bundle's signature is too short")
    return report, note, raw
