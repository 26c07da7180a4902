"""`worthit audit …`: the public key, offline verification, and SLA reports from the log.

The log is `<market>.audit.db` beside the `--db` market file (`--log` names it directly,
for a copy an auditor was handed). Every verifying command exits 0 when everything
verifies, 1 when something does not (and says what), 2 when the input cannot be read.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import sqlite3
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, ParamSpec, TypeVar

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from worthit.audit import keyfile
from worthit.audit.checkpoint import Checkpoint
from worthit.audit.errors import AuditError, MalformedError, VerificationError
from worthit.audit.log import Receipt
from worthit.audit.logcheck import check_log
from worthit.audit.merkle import leaf_hash
from worthit.audit.note import NoteVerifier
from worthit.audit.proofs import verify_consistency, verify_inclusion
from worthit.audit.record import AuditRecord
from worthit.audit.store import AuditPaths, LogReader
from worthit.cli.options import DbOption, JsonOption, audit_paths, market_db
from worthit.cli.progress import stderr
from worthit.text.time import date_to_ms, iso, to_ms

EXIT_FAILED = 1
EXIT_UNREADABLE = 2

audit_app = typer.Typer(
    name="audit",
    help="The tamper-evident log of answers: its key, proofs, verification, SLA reports.",
    no_args_is_help=True,
)

LogOption = Annotated[
    Path | None,
    typer.Option(
        "--log",
        help="The audit log file itself (default: <market>.audit.db beside --db).",
        show_default=False,
    ),
]
KeyOption = Annotated[
    Path | None,
    typer.Option(
        "--key", help="The log's signing key (default: beside the log).", show_default=False
    ),
]
PubkeyOption = Annotated[
    str | None,
    typer.Option(
        "--pubkey",
        help="The log's verifier key (name+id+key, as `audit pubkey` prints it), or a file "
        "holding it.",
        show_default=False,
    ),
]

P = ParamSpec("P")
R = TypeVar("R")


def _outcomes(command: Callable[P, R]) -> Callable[P, R]:
    """Unreadable input → `error: …`, exit 2; a failed verification → `not verified: …`, 1."""

    @functools.wraps(command)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except VerificationError as exc:
            stderr.print(f"[red]not verified:[/] {exc}", highlight=False)
            raise typer.Exit(EXIT_FAILED) from None
        except (AuditError, OSError, sqlite3.DatabaseError, UnicodeDecodeError) as exc:
            stderr.print(f"[red]error:[/] {exc}", highlight=False)
        except json.JSONDecodeError as exc:
            stderr.print(f"[red]error:[/] not JSON: {exc}", highlight=False)
        raise typer.Exit(EXIT_UNREADABLE)

    return guarded


@audit_app.command("pubkey")
@_outcomes
def pubkey_command(db: DbOption = None, log: LogOption = None, key: KeyOption = None) -> None:
    """Print the log's verifier key line (name+key ID+base64 key), for verifiers to pin."""
    paths = _paths(db, log, key)
    if paths.key.exists():
        print(keyfile.load(paths.key).verifier.vkey)
        return
    if paths.db.exists():
        with LogReader(paths.db) as reader:
            vkey = reader.vkey
        if vkey is not None:
            stderr.print(f"no key file at {paths.key}: this is the key the log was made with")
            print(vkey)
            return
    stderr.print(f"[red]error:[/] no audit key at {paths.key} (the server makes it on first start)")
    raise typer.Exit(EXIT_UNREADABLE)


@audit_app.command("verify")
@_outcomes
def verify_command(
    receipt: Annotated[
        Path | None,
        typer.Option(
            "--receipt",
            help="A receipt JSON ({leaf_index, leaf_hash}, or an answer holding one).",
            show_default=False,
        ),
    ] = None,
    proof: Annotated[
        Path | None,
        typer.Option(
            "--proof",
            help='Its inclusion proof JSON ({"hashes": [base64, …]}).',
            show_default=False,
        ),
    ] = None,
    checkpoint: Annotated[
        Path | None,
        typer.Option(
            "--checkpoint", help="The signed checkpoint the proof is for.", show_default=False
        ),
    ] = None,
    leaf: Annotated[
        Path | None,
        typer.Option(
            "--leaf",
            help="Optionally the leaf's content JSON, to check it is the one the receipt names.",
            show_default=False,
        ),
    ] = None,
    pubkey: PubkeyOption = None,
    db: DbOption = None,
    log: LogOption = None,
    as_json: JsonOption = False,
) -> None:
    """Verify a receipt offline (--receipt --proof --checkpoint --pubkey), or a whole log file.

    Without --receipt it checks the log beside --db (or --log) against its signed checkpoints.
    """
    if receipt or proof or checkpoint:
        if not (receipt and proof and checkpoint and pubkey):
            raise MalformedError(
                "offline verification needs --receipt, --proof, --checkpoint and --pubkey"
            )
        _verify_receipt(receipt, proof, checkpoint, leaf, _verifier(pubkey), as_json)
    else:
        _verify_log(_paths(db, log, None), pubkey, as_json)


def _verify_receipt(
    receipt_file: Path,
    proof_file: Path,
    checkpoint_file: Path,
    leaf_file: Path | None,
    verifier: NoteVerifier,
    as_json: bool,
) -> None:
    data = _read_json(receipt_file)
    if isinstance(data, dict) and isinstance(data.get("receipt"), dict):
        data = data["receipt"]
    if not isinstance(data, dict):
        raise MalformedError(f"{receipt_file} holds no receipt")
    receipt = Receipt.from_dict(data)
    proof_data = _read_json(proof_file)
    hashes = proof_data.get("hashes") if isinstance(proof_data, dict) else proof_data
    path = _hashes(hashes, "proof")
    signed = Checkpoint.open(checkpoint_file.read_text(encoding="utf-8"), verifier)
    if isinstance(proof_data, dict) and proof_data.get("tree_size", signed.size) != signed.size:
        raise VerificationError(
            f"the proof is for tree size {proof_data['tree_size']}, the "
            f"checkpoint for {signed.size}"
        )
    if leaf_file is not None:
        data = leaf_hash(_leaf_bytes(_read_json(leaf_file), receipt.leaf_index))
        if data != receipt.leaf_hash:
            raise VerificationError("the leaf's content does not hash to the receipt's leaf hash")
    verify_inclusion(receipt.leaf_hash, receipt.leaf_index, signed.size, path, signed.root)
    result = {
        "verified": True,
        "leaf_index": receipt.leaf_index,
        "tree_size": signed.size,
        "origin": signed.origin,
        "leaf_checked": leaf_file is not None,
    }
    if as_json:
        print(json.dumps(result))
        return
    what = "its content and " if leaf_file is not None else ""
    print(
        f"verified: {what}leaf {receipt.leaf_index} is in {signed.origin}'s tree of "
        f"{signed.size} leaves, signed by its key {verifier.key_id:08x}"
    )


def _leaf_bytes(data: Any, index: int) -> bytes:
    """The leaf's bytes from GET /v1/audit/leaves/{index}: base64 `leaf`, or the record."""
    if isinstance(data, dict) and isinstance(data.get("leaf"), str):
        return _b64(data["leaf"], "leaf")
    if isinstance(data, dict) and isinstance(data.get("record"), dict):
        data = data["record"]
    if not isinstance(data, dict):
        raise MalformedError("the leaf file holds no leaf")
    return AuditRecord.from_dict(data).to_bytes(index)


def _verify_log(paths: AuditPaths, pubkey: str | None, as_json: bool) -> None:
    with LogReader(paths.db) as reader:
        stored = reader.vkey
    if pubkey is None:
        if stored is None:
            raise MalformedError("the log names no key: pass --pubkey")
        stderr.print(
            "[yellow]note:[/] checking against the key stored in the log itself; pass "
            "--pubkey with the key you trust",
            highlight=False,
        )
        verifier = NoteVerifier.from_vkey(stored)
    else:
        verifier = _verifier(pubkey)
    report = check_log(paths.db, verifier)
    if as_json:
        print(
            json.dumps(
                {
                    "verified": report.ok,
                    "leaves": report.leaves,
                    "checkpoints": report.checkpoints,
                    "verified_size": report.verified_size,
                    "problems": [{"index": p.index, "problem": p.message} for p in report.problems],
                }
            )
        )
    else:
        for problem in report.problems:
            print(f"problem: {problem}")
        verdict = "verified" if report.ok else f"NOT verified ({len(report.problems)} problems)"
        print(
            f"{verdict}: {report.leaves} leaves, {report.checkpoints} signed checkpoints, "
            f"tree reproduced up to size {report.verified_size}"
        )
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


@audit_app.command("verify-proof")
@_outcomes
def verify_proof_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="Proof JSON: inclusion {leafIdx, treeSize, root, "
            "leafHash, proof} or consistency {size1, size2, root1, "
            "root2, proof}; hashes in base64."
        ),
    ],
) -> None:
    """Check one inclusion or consistency proof: exit 0 if it verifies, 1 if not, 2 unreadable."""
    data = _read_json(file)
    if not isinstance(data, dict):
        raise MalformedError(f"{file} holds no proof object")
    if "leafIdx" in data:
        index, size = _int(data, "leafIdx"), _int(data, "treeSize")
        verify_inclusion(
            _hash(data, "leafHash"),
            index,
            size,
            _hashes(data.get("proof"), "proof"),
            _hash(data, "root"),
        )
        print(f"verified: leaf {index} is in the tree of size {size}")
    elif "size1" in data:
        first, second = _int(data, "size1"), _int(data, "size2")
        verify_consistency(
            first,
            second,
            _hash(data, "root1"),
            _hash(data, "root2"),
            _hashes(data.get("proof"), "proof"),
        )
        print(f"verified: the tree of size {first} is a prefix of the tree of size {second}")
    else:
        raise MalformedError(
            "neither an inclusion proof (leafIdx…) nor a consistency proof (size1…)"
        )


@audit_app.command("report")
@_outcomes
def report_command(
    start: Annotated[
        str,
        typer.Option(
            "--from",
            help="Window start (inclusive): ISO 8601 time (no zone: UTC) or a day (its start).",
        ),
    ],
    end: Annotated[
        str, typer.Option("--to", help="Window end (exclusive): ISO 8601 time or a day (its end).")
    ],
    objective: Annotated[
        list[str] | None,
        typer.Option(
            "--objective",
            help="STAGE:pNN<=MS, repeatable (default: to_verdict:p99<=120 and total:p95<=800).",
            show_default=False,
        ),
    ] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Write the signed bundle (report + checkpoint + signature).",
            show_default=False,
        ),
    ] = None,
    db: DbOption = None,
    log: LogOption = None,
    key: KeyOption = None,
    as_json: JsonOption = False,
) -> None:
    """SLA report: P50/P95/P99 per stage with distribution-free 95 % intervals, per objective.

    Over the window's leaves under the latest signed checkpoint; --out signs a bundle.
    """
    from worthit.audit.bundle import make_bundle
    from worthit.audit.sla import DEFAULT_OBJECTIVES, Objective, build_report

    from_ms, to_ms = _moment(start, "--from", end=False), _moment(end, "--to", end=True)
    if to_ms <= from_ms:
        raise typer.BadParameter("must be after --from", param_hint="--to")
    try:
        objectives = [Objective.parse(o) for o in objective] if objective else DEFAULT_OBJECTIVES
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--objective") from None
    paths = _paths(db, log, key)
    with LogReader(paths.db) as reader:
        anchor = reader.latest_stored_checkpoint()
        if anchor is None:
            raise MalformedError("the log has no signed checkpoint yet")
        signed = Checkpoint.from_note(anchor.note)
        report = build_report(
            reader.records_between(from_ms, to_ms, signed.size),
            origin=signed.origin,
            from_ms=from_ms,
            to_ms=to_ms,
            tree_size=signed.size,
            root_b64=base64.b64encode(signed.root).decode(),
            objectives=objectives,
        )
        newer = sum(1 for _ in reader.records_between(from_ms, to_ms, reader.size)) - (
            report["leaves"]["answers"] + report["leaves"]["lost"]
        )
    if out is not None:
        bundle = make_bundle(report, anchor.note, keyfile.load(paths.key, signed.origin))
        out.write_text(json.dumps(bundle, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        stderr.print(f"wrote the signed bundle to {out}", highlight=False)
    if newer:
        stderr.print(
            f"[yellow]note:[/] {newer} leaves in the window are newer than the checkpoint "
            f"at size {signed.size} and are not counted",
            highlight=False,
        )
    if as_json:
        print(json.dumps(report, ensure_ascii=False))
    else:
        _print_report(report)


@audit_app.command("verify-report")
@_outcomes
def verify_report_command(
    bundle_file: Annotated[Path, typer.Argument(help="A bundle written by `audit report --out`.")],
    pubkey: PubkeyOption = None,
    db: DbOption = None,
    log: LogOption = None,
) -> None:
    """Check a report bundle: its signatures, and that the log's leaves give the same report."""
    from worthit.audit.bundle import verify_bundle

    bundle = _read_json(bundle_file)
    if not isinstance(bundle, dict):
        raise MalformedError(f"{bundle_file} holds no bundle")
    paths = _paths(db, log, None)
    with LogReader(paths.db) as reader:
        if pubkey is None:
            if reader.vkey is None:
                raise MalformedError("the log names no key: pass --pubkey")
            stderr.print(
                "[yellow]note:[/] checking against the key stored in the log itself; "
                "pass --pubkey with the key you trust",
                highlight=False,
            )
            verifier = NoteVerifier.from_vkey(reader.vkey)
        else:
            verifier = _verifier(pubkey)
        signed = verify_bundle(bundle, verifier, reader)
    print(
        f"verified: the report over {iso(bundle['report']['from_ms'])} to "
        f"{iso(bundle['report']['to_ms'])} follows from {signed.origin}'s tree of "
        f"{signed.size} leaves"
    )


def _print_report(report: Mapping[str, Any]) -> None:
    console = Console(highlight=False)
    leaves = report["leaves"]
    console.print(
        f"{report['origin']}: {iso(report['from_ms'])} to {iso(report['to_ms'])}, "
        f"{leaves['answers']} answers ({leaves['lost']} lost leaves), anchored to the checkpoint "
        f"at tree size {report['tree_size']}"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    for column in ("stage", "n", "P50 ms [95% CI]", "P95 ms [95% CI]", "P99 ms [95% CI]"):
        table.add_column(column, justify="left" if column == "stage" else "right")
    for stage, summary in report["stages"].items():
        table.add_row(
            stage, str(summary["count"]), *(_cell(summary[f"p{p}"]) for p in (50, 95, 99))
        )
    console.print(table)
    for judged in report["objectives"]:
        bound = judged["upper_bound_ms"]
        shown = "none" if bound is None else f"{bound:.1f} ms"
        console.print(
            f"{judged['outcome'].upper():<12} {judged['objective']}: 95% upper bound {shown} "
            f"(n = {judged['count']}, needs ≥ {judged['min_samples']})"
            + ("; violated" if judged["violated"] else "")
        )
    console.print(report["assumption"])


def _cell(summary: Mapping[str, Any]) -> str:
    if not summary["claimed"]:
        return f"n < {summary['min_samples']}"
    low, high = summary["ci_ms"]
    return f"{summary['estimate_ms']:.1f} [{_num(low)}–{_num(high)}]"


def _num(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}"


def _paths(db: str | None, log: Path | None, key: Path | None) -> AuditPaths:
    if log is not None:
        return AuditPaths.of_log(log, key)
    paths = audit_paths(market_db(db, create=False))
    return AuditPaths.of_log(paths.db, key) if key is not None else paths


def _verifier(pubkey: str) -> NoteVerifier:
    candidate = Path(pubkey)
    text = (
        candidate.read_text(encoding="utf-8")
        if "+" not in pubkey or candidate.is_file()
        else pubkey
    )
    return NoteVerifier.from_vkey(text.strip())


def _moment(text: str, option: str, *, end: bool) -> int:
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return date_to_ms(day + timedelta(days=1) if end else day)
        return to_ms(datetime.fromisoformat(text))
    except ValueError:
        raise typer.BadParameter(
            f"expected an ISO 8601 time or day, got {text!r}", param_hint=option
        ) from None


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _int(data: Mapping[str, Any], name: str) -> int:
    value = data.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise MalformedError(f"{name} must be an integer")
    return value


def _hash(data: Mapping[str, Any], name: str) -> bytes:
    value = data.get(name)
    if not isinstance(value, str):
        raise MalformedError(f"{name} must be a base64 string")
    return _b64(value, name)


def _hashes(values: Any, name: str) -> list[bytes]:
    """JSON `null` is the empty proof: Go's encoders write an empty slice that way."""
    if values is None:
        return []
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise MalformedError(f"{name} must be a list of base64 hashes")
    return [_b64(v, f"{name}[{i}]") for i, v in enumerate(values)]


def _b64(value: str, name: str) -> bytes:
    """Any length: a hash of the wrong size is a proof that fails (exit 1), not unreadable."""
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise MalformedError(f"{name} is not base64") from None
