"""`worthit audit verify-proof` agrees with every inclusion and consistency vector of
transparency-dev/merkle (testdata at 417fb0c, Apache-2.0, vendored in merkle_vectors/):
a vector that must verify exits 0, one that must not exits non-zero."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from worthit.cli.app import app

VECTORS = sorted((Path(__file__).parent / "merkle_vectors").rglob("*.json"))
runner = CliRunner()


def test_all_vectors_are_here() -> None:
    assert len(VECTORS) == 196


@pytest.mark.parametrize("path", VECTORS, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_verify_proof_agrees_with_the_vector(path: Path) -> None:
    want_error = json.loads(path.read_text())["wantErr"]
    result = runner.invoke(app, ["audit", "verify-proof", str(path)], env={"NO_COLOR": "1"})
    assert (result.exit_code != 0) == want_error, result.output
    if not want_error:
        assert result.output.startswith("verified:")
