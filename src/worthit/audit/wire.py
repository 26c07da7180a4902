"""The JSON shapes the API serves and `worthit audit verify` reads, defined once for both."""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

from worthit.audit.record import decode_leaf


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def proof_to_dict(hashes: Sequence[bytes]) -> dict[str, Any]:
    """`{"hashes": [base64, …]}`: an inclusion or consistency proof, RFC 9162 order."""
    return {"hashes": [b64(h) for h in hashes]}


def leaf_to_dict(leaf: bytes) -> dict[str, Any]:
    """A leaf as served: its index, its exact bytes (base64, what the leaf hash covers) and
    the record they hold, decoded for reading."""
    index, record = decode_leaf(leaf)
    return {"leaf_index": index, "leaf": b64(leaf), "record": record.to_dict()}
