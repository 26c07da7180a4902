"""`worthit audit …` through the real command line app: outputs and exit codes."""

from __future__ import annotations

import base64
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from audit_factories import BASE_MS, record
from typer.testing import CliRunner

from worthit.audit.log import AuditLog, CheckpointPolicy
from worthit.audit.wire import leaf_to_dict, proof_to_dict
from worthit.cli.app import app
from worthit.text.time import iso

runner = CliRunner()
SIZE = 320


def cli(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["audit", *args], env={"NO_COLOR": "1", "COLUMNS": "200"})
    return result.exit_code, result.output


@pytest.fixture(scope="module")
def market(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A market path whose audit log (beside it) holds SIZE answers and a receipt's files."""
    folder = tmp_path_factory.mktemp("cli")
    market = folder / "shop.db"
    log = AuditLog(folder / "shop.audit.db", policy=CheckpointPolicy(every_leaves=100))
    rng = np.random.default_rng(3)
    receipts = [
        log.append(record(i, to_verdict=float(v))) for i, v in enumerate(rng.exponential(20, SIZE))
    ]
    log.close()
    log = AuditLog(folder / "shop.audit.db")
    note = log.latest_checkpoint()
    assert note is not None
    (folder / "checkpoint.txt").write_text(note)
    (folder / "vkey.txt").write_text(log.vkey + "\n")
    (folder / "receipt.json").write_text(json.dumps({"receipt": receipts[42].to_dict()}))
    hashes = [base64.b64encode(h).decode() for h in log.inclusion_proof(42, log.size)]
    (folder / "proof.json").write_text(json.dumps({"hashes": hashes, "tree_size": log.size}))
    (folder / "leaf.json").write_text(json.dumps({"record": log.leaf(42).to_dict()}))
    log.close()
    return market


def files(market: Path, *names: str) -> list[str]:
    return [str(market.with_name(n)) for n in names]


def test_pubkey_prints_the_verifier_key_line(market: Path) -> None:
    code, out = cli("pubkey", "--db", str(market))
    assert code == 0
    assert out.strip() == market.with_name("vkey.txt").read_text().strip()
    name, key_id, key = out.strip().split("+", 2)
    assert name == "worthit.local/audit" and len(key_id) == 8 and base64.b64decode(key)[0] == 1


def test_verify_checks_a_receipt_offline(market: Path) -> None:
    receipt, proof, checkpoint, leaf, vkey = files(
        market, "receipt.json", "proof.json", "checkpoint.txt", "leaf.json", "vkey.txt"
    )
    args = ["verify", "--receipt", receipt, "--proof", proof, "--checkpoint", checkpoint]
    code, out = cli(*args, "--pubkey", vkey, "--leaf", leaf)
    assert code == 0, out
    assert "leaf 42 is in worthit.local/audit's tree of 320 leaves" in out
    wrong = market.with_name("wrong-receipt.json")
    data = json.loads(Path(receipt).read_text())["receipt"]
    wrong.write_text(json.dumps({**data, "leaf_index": 43}))
    code, out = cli(
        "verify",
        "--receipt",
        str(wrong),
        "--proof",
        proof,
        "--checkpoint",
        checkpoint,
        "--pubkey",
        vkey,
    )
    assert code == 1 and "not verified" in out
    code, out = cli(*args)
    assert code == 2 and "--pubkey" in out


def test_verify_checks_a_whole_log_and_names_tampering(market: Path, tmp_path: Path) -> None:
    code, out = cli("verify", "--db", str(market), "--pubkey", files(market, "vkey.txt")[0])
    assert code == 0 and "verified: 320 leaves" in out
    copy = tmp_path / "copy.audit.db"
    source = sqlite3.connect(market.with_name("shop.audit.db"))
    target = sqlite3.connect(copy)
    source.backup(target)
    source.close()
    data = target.execute("SELECT data FROM leaves WHERE idx = 200").fetchone()[0]
    target.execute("UPDATE leaves SET data = ? WHERE idx = 200", (data.replace(b"buy", b"BUY"),))
    target.commit()
    target.close()
    code, out = cli("verify", "--log", str(copy), "--pubkey", files(market, "vkey.txt")[0])
    assert code == 1
    assert "problem: leaf 200: its bytes were changed" in out


def test_verify_proof_checks_inclusion_and_consistency_files(market: Path, tmp_path: Path) -> None:
    proof = json.loads(market.with_name("proof.json").read_text())
    checkpoint = market.with_name("checkpoint.txt").read_text().split("\n")
    receipt = json.loads(market.with_name("receipt.json").read_text())["receipt"]
    good = {
        "leafIdx": 42,
        "treeSize": SIZE,
        "root": checkpoint[2],
        "leafHash": receipt["leaf_hash"],
        "proof": proof["hashes"],
    }
    path = tmp_path / "p.json"

    def check(data: object) -> int:
        path.write_text(data if isinstance(data, str) else json.dumps(data))
        return cli("verify-proof", str(path))[0]

    assert check(good) == 0
    assert check({**good, "treeSize": 100}) == 1
    assert check({**good, "proof": good["proof"][:-1]}) == 1
    assert check({**good, "leafHash": base64.b64encode(bytes(31)).decode()}) == 1
    assert check({**good, "root": "not base64!"}) == 2
    assert check({**good, "leafIdx": "42"}) == 2
    assert check("{not json") == 2
    assert check({"something": "else"}) == 2
    with AuditLog(market.with_name("shop.audit.db")) as log:
        consistency = {
            "size1": 100,
            "size2": SIZE,
            "root1": base64.b64encode(log.root(100)).decode(),
            "root2": base64.b64encode(log.root(SIZE)).decode(),
            "proof": [base64.b64encode(h).decode() for h in log.consistency_proof(100, SIZE)],
        }
    assert check(consistency) == 0
    assert check({**consistency, "size1": 101}) == 1
    flipped = bytearray(base64.b64decode(consistency["proof"][0]))
    flipped[0] ^= 1
    assert (
        check(
            {
                **consistency,
                "proof": [base64.b64encode(flipped).decode(), *consistency["proof"][1:]],
            }
        )
        == 1
    )


def test_report_and_verify_report(market: Path, tmp_path: Path) -> None:
    window = ["--from", iso(BASE_MS), "--to", iso(BASE_MS + SIZE * 1000)]
    bundle = tmp_path / "bundle.json"
    code, out = cli("report", "--db", str(market), *window, "--out", str(bundle))
    assert code == 0, out
    assert "PASS" in out and "to_verdict:p99<=120" in out and "independent" in out
    code, out = cli(
        "report", "--db", str(market), *window, "--json", "--objective", "to_verdict:p99<=10"
    )
    report = json.loads(out[out.index("{") :])
    assert report["leaves"]["answers"] == SIZE
    assert report["objectives"][0]["outcome"] == "fail"
    vkey = files(market, "vkey.txt")[0]
    code, out = cli("verify-report", str(bundle), "--db", str(market), "--pubkey", vkey)
    assert code == 0 and "follows from worthit.local/audit's tree of 320 leaves" in out
    edited = json.loads(bundle.read_text())
    edited["report"]["objectives"][1]["threshold_ms"] = 1.0
    bundle.write_text(json.dumps(edited))
    code, out = cli("verify-report", str(bundle), "--db", str(market), "--pubkey", vkey)
    assert code == 1
    code, out = cli("report", "--db", str(market), "--from", "yesterday", "--to", "today")
    assert code == 2


def test_a_missing_log_is_an_error_not_a_traceback(tmp_path: Path) -> None:
    code, out = cli("verify", "--db", str(tmp_path / "none.db"))
    assert code == 2 and "error:" in out
    code, out = cli("pubkey", "--db", str(tmp_path / "none.db"))
    assert code == 2 and "no audit key" in out


def test_the_api_shapes_are_what_verify_reads(market: Path, tmp_path: Path) -> None:
    with AuditLog(market.with_name("shop.audit.db")) as log:
        proof = proof_to_dict(log.inclusion_proof(42, log.size))
        leaf = leaf_to_dict(log.leaf_bytes(42))
    assert leaf["leaf_index"] == 42 and leaf["record"]["request_id"] == "req-42"
    (tmp_path / "proof.json").write_text(json.dumps(proof))
    (tmp_path / "leaf.json").write_text(json.dumps(leaf))
    receipt, checkpoint, vkey = files(market, "receipt.json", "checkpoint.txt", "vkey.txt")
    code, out = cli(
        "verify",
        "--receipt",
        receipt,
        "--proof",
        str(tmp_path / "proof.json"),
        "--checkpoint",
        checkpoint,
        "--pubkey",
        vkey,
        "--leaf",
        str(tmp_path / "leaf.json"),
    )
    assert code == 0, out
