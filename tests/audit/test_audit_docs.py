"""docs/audit.md stays true: its example key, checkpoint, leaf, receipt and proof verify
together, and every command it shows parses against the real CLI."""

from __future__ import annotations

import base64
import json
import re
import shlex
from pathlib import Path
from typing import Any

import pytest
import typer.main

from worthit.audit.checkpoint import Checkpoint
from worthit.audit.log import Receipt
from worthit.audit.merkle import leaf_hash
from worthit.audit.note import NoteVerifier
from worthit.audit.proofs import verify_inclusion
from worthit.audit.record import decode_leaf
from worthit.cli.app import app

DOC = (Path(__file__).parents[2] / "docs" / "audit.md").read_text()
BLOCKS = re.findall(r"```(\w*)\n(.*?)```", DOC, re.S)


def block(after: str, kind: str = "") -> str:
    """The first code block of `kind` after the text `after`."""
    start = DOC.index(after)
    for lang, body in re.findall(r"```(\w*)\n(.*?)```", DOC[start:], re.S):
        if lang == kind:
            return str(body)
    raise AssertionError(f"no {kind or 'plain'} block after {after!r}")


def test_the_example_checkpoint_leaf_receipt_and_proof_verify_together() -> None:
    verifier = NoteVerifier.from_vkey(block("The example log's key").strip())
    note = DOC.split("The example log's key", 1)[1].split("```\n\n```\n", 1)[1].split("```")[0]
    head = Checkpoint.open(note, verifier)
    leaf = block("A real leaf", "json").strip().encode()
    index, record = decode_leaf(leaf)
    receipt = Receipt.from_dict(json.loads(block("Its receipt", "json")))
    assert (receipt.leaf_index, receipt.leaf_hash) == (index, leaf_hash(leaf))
    hashes = [
        base64.b64decode(h) for h in json.loads(block("the inclusion proof", "json"))["hashes"]
    ]
    verify_inclusion(receipt.leaf_hash, index, head.size, hashes, head.root)
    assert record.tenant == "acme"


COMMANDS = [
    line[2:]
    for lang, body in BLOCKS
    if lang == "console"
    for line in body.splitlines()
    if line.startswith("$ worthit ")
]


def test_the_doc_shows_every_audit_command() -> None:
    shown = {shlex.split(c)[2] for c in COMMANDS}
    assert shown == {"pubkey", "verify", "verify-proof", "report", "verify-report"}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_in_the_doc_parses(command: str) -> None:
    """Parsed by the real command (options, their types, required arguments), not run."""
    cmd: Any = typer.main.get_command(app)
    args = shlex.split(command)[1:]
    while hasattr(cmd, "get_command"):
        name, args = args[0], args[1:]
        sub = cmd.get_command(cmd.context_class(cmd), name)
        assert sub is not None, f"no command {name!r}: {command}"
        cmd = sub
    cmd.make_context(cmd.name, args)
