"""The audit log over HTTP: signed checkpoints and proofs for anyone, leaves for their tenant.

Checkpoints and proofs reveal nothing but hashes, so they are open (a shopper disputing an
answer, or an auditor, needs no key); a leaf says what a tenant's shopper asked about, so
a keyed caller reads only its own tenant's leaves, and another tenant's index is a 404
exactly like an index that does not exist.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import PlainTextResponse

from worthit.audit import AuditLog, TreeRangeError
from worthit.audit.wire import b64, leaf_to_dict, proof_to_dict
from worthit.http.caller import request_tenant
from worthit.http.dependencies import StateDep
from worthit.http.problems import ProblemError
from worthit.service.state import ServiceState

router = APIRouter(tags=["audit"])

PUBLIC_PATHS = ("/v1/audit/checkpoint", "/v1/audit/proof/", "/v1/audit/consistency")
"""What the guard lets through without a key."""

MAX_INDEX = 2**53
"""Larger than any log will hold, and small enough for SQLite's 64-bit integers."""
Index = Annotated[int, Query(ge=0, le=MAX_INDEX)]
LeafIndex = Annotated[int, Path(ge=0, le=MAX_INDEX)]


@router.get("/v1/audit/checkpoint", response_class=PlainTextResponse)
async def checkpoint(state: StateDep) -> PlainTextResponse:
    """The latest signed checkpoint (C2SP signed note: origin, tree size, root hash)."""
    note = _log(state).latest_checkpoint()
    if note is None:
        raise ProblemError(404, "No checkpoint", "the log has signed no checkpoint yet")
    return PlainTextResponse(note, headers={"Cache-Control": "no-cache"})


@router.get("/v1/audit/proof/{index}")
async def inclusion(
    index: LeafIndex, state: StateDep, tree_size: Annotated[int | None, Index] = None
) -> dict[str, Any]:
    """The inclusion proof of leaf `index` in the tree of `tree_size` leaves (default: the
    latest checkpoint's, so the proof checks against a signed root)."""
    log = _log(state)
    size = tree_size if tree_size is not None else _checkpoint_size(log)
    try:
        hashes = log.inclusion_proof(index, size)
        leaf_hash = log.fetch([(0, index)])[(0, index)]
    except TreeRangeError as exc:
        field = "index" if 0 <= index < log.size or tree_size is None else "tree_size"
        raise ProblemError(404, "Not in the log", str(exc), field) from None
    return {"leaf_index": index, "tree_size": size, "leaf_hash": b64(leaf_hash)} | (
        proof_to_dict(hashes)
    )


@router.get("/v1/audit/consistency")
async def consistency(
    state: StateDep, first: Annotated[int, Index], second: Annotated[int, Index]
) -> dict[str, Any]:
    """The proof that the tree of `second` leaves extends the tree of `first`."""
    try:
        hashes = _log(state).consistency_proof(first, second)
    except TreeRangeError as exc:
        raise ProblemError(404, "Not in the log", str(exc), "second") from None
    return {"first": first, "second": second} | proof_to_dict(hashes)


@router.get("/v1/audit/leaves/{index}")
async def leaf(index: LeafIndex, request: Request, state: StateDep) -> dict[str, Any]:
    """Leaf `index`, its exact bytes and the record they hold, if it is the caller's."""
    log = _log(state)
    missing = ProblemError(404, "No such leaf", f"no leaf {index} of yours", "index")
    try:
        owner = log.leaf_tenant(index)
        tenant = request_tenant(request)
        if state.tenants is not None and (tenant is None or owner != tenant.name):
            raise missing
        return leaf_to_dict(log.leaf_bytes(index))
    except TreeRangeError:
        raise missing from None


def _log(state: ServiceState) -> AuditLog:
    if state.service is None or state.service.audit is None:
        raise ProblemError(404, "No audit log", "this service keeps no audit log")
    return state.service.audit


def _checkpoint_size(log: AuditLog) -> int:
    stored = log.latest_stored_checkpoint()
    return log.size if stored is None else stored.size
