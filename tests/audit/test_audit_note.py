"""Signed notes and checkpoints as C2SP specifies them, and the key file they are signed with."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from worthit.audit import keyfile
from worthit.audit.checkpoint import Checkpoint
from worthit.audit.errors import KeyFileError, MalformedError, VerificationError
from worthit.audit.merkle import EMPTY_ROOT
from worthit.audit.note import NoteSigner, NoteVerifier, key_id, open_note, parse_note

# The example in c2sp.org/signed-note: a vkey and the note it verifies.
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYj"
    "OBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)


def signer(name: str = "example.com/log") -> NoteSigner:
    return NoteSigner(name, Ed25519PrivateKey.from_private_bytes(bytes(range(32))))


def test_the_spec_example_note_verifies_with_the_spec_example_key() -> None:
    verifier = NoteVerifier.from_vkey(SPEC_VKEY)
    assert verifier.name == "example.com/foo"
    assert verifier.key_id == 0x530D903A
    assert verifier.vkey == SPEC_VKEY
    assert open_note(SPEC_NOTE, [verifier]) == "This is an example message.\n"
    with pytest.raises(VerificationError):
        open_note(SPEC_NOTE.replace("example message", "example massage"), [verifier])


def test_key_id_is_sha256_of_name_newline_type_and_key() -> None:
    s = signer()
    public = s.verifier.public_key
    digest = hashlib.sha256(b"example.com/log\n\x01" + public).digest()
    assert key_id("example.com/log", public) == int.from_bytes(digest[:4], "big")
    name, hex_id, encoded = s.verifier.vkey.split("+", 2)
    assert (name, hex_id) == ("example.com/log", digest[:4].hex())
    assert base64.b64decode(encoded) == b"\x01" + public


def test_a_signed_note_is_text_blank_line_and_an_em_dash_signature_line() -> None:
    s = signer()
    note = s.sign("hello\nworld\n")
    text, rest = note.split("\n\n")
    assert text == "hello\nworld"
    assert rest.startswith("\u2014 example.com/log ") and rest.endswith("\n")
    raw = base64.b64decode(rest.split(" ")[2])
    assert raw[:4] == s.key_id.to_bytes(4, "big") and len(raw) == 4 + 64
    assert open_note(note, [s.verifier]) == "hello\nworld\n"


def test_unknown_signatures_are_ignored_and_a_failing_known_one_rejects() -> None:
    s, other = signer(), signer("example.com/witness")
    note = s.sign("tree\n")
    cosigned = note + other.signature_line("tree\n")
    assert open_note(cosigned, [s.verifier]) == "tree\n"
    with pytest.raises(VerificationError, match="no signature by a known key"):
        open_note(note, [other.verifier])
    bad_id = s.key_id.to_bytes(4, "big") + bytes(64)
    with_bad = f"tree\n\n— example.com/log {base64.b64encode(bad_id).decode()}\n"
    with pytest.raises(VerificationError, match="does not verify"):
        open_note(with_bad, [s.verifier])


@pytest.mark.parametrize(
    "note",
    [
        "no blank line\n— example.com/log AAAAAAA=\n",
        "text\n\n- example.com/log AAAAAAAA\n",
        "text\n\n— example.com/log not-base64!\n",
        "text\n\n— example.com/log AAAA\n",
        "te\txt\n\n— example.com/log AAAAAAAA\n",
        "text\n\n— example.com/log AAAAAAAA",
    ],
)
def test_malformed_notes_are_refused(note: str) -> None:
    with pytest.raises(MalformedError):
        parse_note(note)


@pytest.mark.parametrize(
    "vkey",
    [
        "example.com/foo+530d903a",
        "example.com/foo+530d903b+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
        "example.com/foo+530d903a+AgkyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
        "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv",
        "exa mple+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k",
    ],
)
def test_bad_verifier_keys_are_refused(vkey: str) -> None:
    with pytest.raises(MalformedError):
        NoteVerifier.from_vkey(vkey)


def test_a_checkpoint_is_origin_size_and_base64_root_signed_by_the_origin() -> None:
    s = signer()
    root = hashlib.sha256(b"root").digest()
    note = Checkpoint("example.com/log", 1234, root).sign(s)
    body = f"example.com/log\n1234\n{base64.b64encode(root).decode()}\n"
    assert note.startswith(body + "\n\u2014 example.com/log ")
    assert Checkpoint.open(note, s.verifier) == Checkpoint("example.com/log", 1234, root)
    with pytest.raises(VerificationError):
        Checkpoint.open(note.replace("1234", "1235"), s.verifier)
    with pytest.raises(VerificationError):
        Checkpoint.open(note, signer("example.com/other").verifier)


@pytest.mark.parametrize(
    "body",
    [
        "origin\n012\nAAAA\n",
        "origin\n12\n" + base64.b64encode(b"short").decode() + "\n",
        "origin\n-1\n" + base64.b64encode(EMPTY_ROOT).decode() + "\n",
        "origin\n1\n",
        "origin\n\n" + base64.b64encode(EMPTY_ROOT).decode() + "\n",
    ],
)
def test_malformed_checkpoints_are_refused(body: str) -> None:
    with pytest.raises(MalformedError):
        Checkpoint.parse(body)


def test_the_empty_tree_checkpoint_has_size_zero() -> None:
    body = Checkpoint("example.com/log", 0, EMPTY_ROOT).body()
    assert body == "example.com/log\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"
    assert Checkpoint.parse(body).size == 0


def test_the_key_file_is_made_once_with_mode_0600_and_reused(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "log.key"
    first = keyfile.load_or_create(path, "example.com/log")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().startswith("PRIVATE+KEY+example.com/log+")
    again = keyfile.load_or_create(path, "example.com/log")
    assert again.verifier == first.verifier
    with pytest.raises(KeyFileError, match="is for"):
        keyfile.load(path, "example.com/other")


def test_a_key_file_others_can_read_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.key"
    keyfile.load_or_create(path, "example.com/log")
    os.chmod(path, 0o644)
    with pytest.raises(KeyFileError, match="chmod 600"):
        keyfile.load(path)


def test_a_file_that_is_not_a_key_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.key"
    path.write_text("hello\n")
    os.chmod(path, 0o600)
    with pytest.raises(KeyFileError):
        keyfile.load(path)
