"""Every answer in the audit log, through the real server: receipts, signed checkpoints,
proofs a client can check, leaves only for their tenant, and the offline verifier."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path

import httpx

from worthit.audit import AuditPaths, CheckpointPolicy, NoteVerifier, verify_inclusion
from worthit.audit.checkpoint import Checkpoint
from worthit.audit.proofs import verify_consistency
from worthit.service.tenants import TenantStore

from conftest import run_cli
from service_fixtures import market_copy, serving

__all__ = ["market_copy"]

QUESTION = "Is the Aurora NC700 worth buying?"
FAST = CheckpointPolicy(every_leaves=1, every_s=0.05)


def signed_checkpoint(base_url: str, market: Path, at_least: int) -> Checkpoint:
    """The newest checkpoint once it covers `at_least` leaves, its signature checked."""
    vkey = run_cli("audit", "pubkey", "--db", str(market)).stdout.strip()
    verifier = NoteVerifier.from_vkey(vkey)
    deadline = time.monotonic() + 20
    while True:
        reply = httpx.get(base_url + "/v1/audit/checkpoint")
        if reply.status_code == 200:
            checkpoint = Checkpoint.open(reply.text, verifier)
            if checkpoint.size >= at_least:
                return checkpoint
        assert time.monotonic() < deadline, "no checkpoint covering the answers was signed"
        time.sleep(0.05)


def b64(text: str) -> bytes:
    return base64.b64decode(text)


def test_every_answer_carries_a_receipt_its_proof_checks_against_a_signed_root(
    market_copy: Path,
) -> None:
    with serving(market_copy, audit_policy=FAST, auth=False) as server:
        url = server.base_url
        answer = httpx.post(url + "/v1/decide", json={"question": QUESTION}, timeout=30).json()
        with httpx.stream(
            "POST", url + "/v1/decide", json={"question": QUESTION},
            headers={"Accept": "text/event-stream"}, timeout=30,
        ) as stream:  # fmt: skip
            done = [json.loads(line[6:]) for line in stream.iter_lines() if '"receipt"' in line]
        chat = httpx.post(
            url + "/v1/chat/completions",
            json={"model": "worthit", "messages": [{"role": "user", "content": QUESTION}]},
            timeout=30,
        ).json()
        receipts = [answer["receipt"], done[-1]["receipt"], chat["worthit"]["receipt"]]
        checkpoint = signed_checkpoint(url, market_copy, at_least=3)
        proofs = [
            httpx.get(
                f"{url}/v1/audit/proof/{r['leaf_index']}", params={"tree_size": checkpoint.size}
            ).json()
            for r in receipts
        ]
        first = checkpoint
        httpx.post(url + "/v1/decide", json={"question": QUESTION}, timeout=30)
        second = signed_checkpoint(url, market_copy, at_least=first.size + 1)
        consistency = httpx.get(
            url + "/v1/audit/consistency", params={"first": first.size, "second": second.size}
        ).json()
        out_of_range = httpx.get(f"{url}/v1/audit/proof/{second.size + 5}")
    assert sorted(r["leaf_index"] for r in receipts) == [0, 1, 2]
    assert chat["id"] == chat["worthit"]["request_id"]
    for receipt, proof in zip(receipts, proofs, strict=True):
        assert proof["leaf_hash"] == receipt["leaf_hash"]
        hashes = [b64(h) for h in proof["hashes"]]
        verify_inclusion(
            b64(receipt["leaf_hash"]), receipt["leaf_index"], checkpoint.size, hashes,
            checkpoint.root,
        )  # fmt: skip
    verify_consistency(
        first.size, second.size, first.root, second.root,
        [b64(h) for h in consistency["hashes"]],
    )  # fmt: skip
    assert out_of_range.status_code == 404
    assert out_of_range.headers["content-type"].startswith("application/problem+json")


def test_a_tenant_reads_only_its_own_leaves_and_proofs_need_no_key(market_copy: Path) -> None:
    tenants = TenantStore(market_copy)
    a = {"Authorization": f"Bearer {tenants.create('a', 'medium', rpm=100, tpm=10_000)[1]}"}
    b = {"Authorization": f"Bearer {tenants.create('b', 'medium', rpm=100, tpm=10_000)[1]}"}
    with serving(market_copy, audit_policy=FAST) as server:
        url = server.base_url
        answer = httpx.post(url + "/v1/decide", json={"question": QUESTION}, headers=a).json()
        index = answer["receipt"]["leaf_index"]
        own = httpx.get(f"{url}/v1/audit/leaves/{index}", headers=a)
        other = httpx.get(f"{url}/v1/audit/leaves/{index}", headers=b)
        missing = httpx.get(f"{url}/v1/audit/leaves/{index + 100}", headers=b)
        anonymous = httpx.get(f"{url}/v1/audit/leaves/{index}")
        checkpoint = signed_checkpoint(url, market_copy, at_least=index + 1)
        proof = httpx.get(f"{url}/v1/audit/proof/{index}")
    assert own.status_code == 200
    record = own.json()["record"]
    assert record["tenant"] == "a" and record["request_id"] == answer["request_id"]
    assert record["verdict"] == answer["verdict"] and record["facts_version"]
    assert other.status_code == 404 and missing.status_code == 404
    assert other.json()["detail"] == missing.json()["detail"].replace(
        str(index + 100), str(index)
    )  # another tenant's leaf reads exactly like one that does not exist
    assert answer["request_id"] not in other.text and "record" not in other.json()
    assert anonymous.status_code == 401
    assert proof.status_code == 200 and proof.json()["tree_size"] == checkpoint.size


def test_a_receipt_verifies_offline_with_the_cli(market_copy: Path, tmp_path: Path) -> None:
    with serving(market_copy, audit_policy=FAST, auth=False) as server:
        url = server.base_url
        answer = httpx.post(url + "/v1/decide", json={"question": QUESTION}, timeout=30).json()
        checkpoint = signed_checkpoint(url, market_copy, at_least=1)
        note = httpx.get(url + "/v1/audit/checkpoint").text
        proof = httpx.get(f"{url}/v1/audit/proof/{answer['receipt']['leaf_index']}").json()
        leaf = httpx.get(f"{url}/v1/audit/leaves/{answer['receipt']['leaf_index']}").json()
    files = {"answer.json": json.dumps(answer), "proof.json": json.dumps(proof),
             "checkpoint.txt": note, "leaf.json": json.dumps(leaf)}  # fmt: skip
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    vkey = run_cli("audit", "pubkey", "--db", str(market_copy)).stdout.strip()
    args = ["--receipt", str(tmp_path / "answer.json"), "--proof", str(tmp_path / "proof.json"),
            "--checkpoint", str(tmp_path / "checkpoint.txt"), "--pubkey", vkey]  # fmt: skip
    verified = run_cli("audit", "verify", *args, "--leaf", str(tmp_path / "leaf.json"))
    assert verified.returncode == 0, verified.stderr
    tampered = dict(answer, receipt=dict(answer["receipt"], leaf_index=checkpoint.size + 1))
    (tmp_path / "answer.json").write_text(json.dumps(tampered))
    refused = run_cli("audit", "verify", *args)
    assert refused.returncode == 1
    whole = run_cli("audit", "verify", "--db", str(market_copy))
    assert whole.returncode == 0, whole.stderr
    assert AuditPaths.beside(market_copy).key.stat().st_mode & 0o777 == 0o600


def test_readyz_reports_the_log_and_what_a_crash_lost(market_copy: Path) -> None:
    with serving(market_copy, audit_policy=FAST, auth=False) as server:
        httpx.post(server.base_url + "/v1/decide", json={"question": QUESTION}, timeout=30)
        signed_checkpoint(server.base_url, market_copy, at_least=1)
        audit = httpx.get(server.base_url + "/readyz").json()["audit"]
    assert audit["leaves"] >= 1 and audit["checkpoint_size"] >= 1
    assert audit["lost_at_last_start"] == 0 and audit["lost_exact"] is True
