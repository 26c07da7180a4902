"""The log's Ed25519 signing key: made once, kept in a file only its owner can read.

The file holds one line in the signer-key format of Go's golang.org/x/mod/sumdb/note
(`PRIVATE+KEY+<name>+<hex key ID>+base64(0x01 ‖ 32-byte seed)`), so the same key can sign
with Go's tools. It is created with O_EXCL and mode 0600, so two first starts cannot
each make a key, and a file that group or others can read is refused, as ssh refuses
a private key anyone else can read.
"""

from __future__ import annotations

import base64
import binascii
import os
import stat
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from worthit.audit.errors import KeyFileError
from worthit.audit.note import ED25519, NoteSigner, check_key_name

PREFIX = "PRIVATE+KEY+"


def load_or_create(path: Path, name: str) -> NoteSigner:
    """The signer in `path`, made there first if there is no file yet."""
    check_key_name(name)
    if not path.exists():
        try:
            return _create(path, name)
        except FileExistsError:
            pass  # another process made it first: read that one
    return load(path, name)


def load(path: Path, name: str | None = None) -> NoteSigner:
    """The signer in `path`; `name`, when given, must be the name it was made for."""
    try:
        mode = path.stat().st_mode
        text = path.read_text(encoding="ascii")
    except (OSError, UnicodeDecodeError) as exc:
        raise KeyFileError(f"cannot read the audit key {path}: {exc}") from None
    if stat.S_IMODE(mode) & 0o077:
        raise KeyFileError(
            f"the audit key {path} can be read by other users (mode {stat.S_IMODE(mode):o}); "
            f"run: chmod 600 {path}"
        )
    signer = _parse(text.strip(), path)
    if name is not None and signer.name != name:
        raise KeyFileError(f"the audit key {path} is for {signer.name!r}, not {name!r}")
    return signer


def _create(path: Path, name: str) -> NoteSigner:
    key = Ed25519PrivateKey.generate()
    signer = NoteSigner(name, key)
    seed = key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    line = (
        f"{PREFIX}{name}+{signer.key_id:08x}+{base64.b64encode(bytes([ED25519]) + seed).decode()}\n"
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, line.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    return signer


def _parse(text: str, path: Path) -> NoteSigner:
    if not text.startswith(PREFIX):
        raise KeyFileError(f"{path} is not an audit signing key")
    parts = text[len(PREFIX) :].split("+", 2)
    if len(parts) != 3:
        raise KeyFileError(f"{path} is not an audit signing key")
    name, hex_id, encoded = parts
    try:
        raw = base64.b64decode(encoded, validate=True)
        wanted = int(hex_id, 16)
    except (binascii.Error, ValueError):
        raise KeyFileError(f"{path} is not an audit signing key") from None
    if len(raw) != 33 or raw[0] != ED25519:
        raise KeyFileError(f"{path} does not hold an Ed25519 key")
    signer = NoteSigner(name, Ed25519PrivateKey.from_private_bytes(raw[1:]))
    if signer.key_id != wanted:
        raise KeyFileError(f"the key ID in {path} does not match its key")
    return signer
