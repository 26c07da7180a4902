"""C2SP signed notes (c2sp.org/signed-note) with Ed25519, so transparency-log tools read ours.

    <text, ending in a newline>
    <blank line>
    — <key name> base64(key ID ‖ Ed25519 signature over the text)

The key ID is the first 4 bytes of SHA-256(name ‖ 0x0A ‖ 0x01 ‖ public key); the
verifier key (vkey) that names a key is `name+hex(key ID)+base64(0x01 ‖ public key)`.
As the spec requires, a verifier ignores signatures by keys it does not know, rejects
the note if a known key's signature fails, and rejects it unless one verifies.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from worthit.audit.errors import MalformedError, VerificationError

ED25519 = 0x01
EM_DASH = "\u2014"
MAX_SIGNATURES = 100


def key_id(name: str, public_key: bytes) -> int:
    digest = hashlib.sha256(name.encode() + b"\n" + bytes([ED25519]) + public_key).digest()
    return int(struct.unpack(">I", digest[:4])[0])


def check_key_name(name: str) -> None:
    if not name or "+" in name or any(c.isspace() for c in name):
        raise MalformedError(f"key name {name!r} must be non-empty, without spaces or '+'")


@dataclass(frozen=True)
class NoteVerifier:
    name: str
    key_id: int
    public_key: bytes

    @classmethod
    def from_vkey(cls, vkey: str) -> NoteVerifier:
        parts = vkey.strip().split("+", 2)
        if len(parts) != 3:
            raise MalformedError("a verifier key is name+hex key ID+base64 key")
        name, hex_id, encoded = parts
        check_key_name(name)
        if len(hex_id) != 8:
            raise MalformedError("the verifier key's ID must be 8 hex digits")
        try:
            wanted = int(hex_id, 16)
            key = base64.b64decode(encoded, validate=True)
        except (ValueError, binascii.Error):
            raise MalformedError("the verifier key is not hex and base64") from None
        if len(key) != 33 or key[0] != ED25519:
            raise MalformedError("the verifier key is not an Ed25519 key (type 0x01, 32 bytes)")
        if key_id(name, key[1:]) != wanted:
            raise MalformedError("the verifier key's ID does not match its name and key")
        return cls(name, wanted, key[1:])

    @property
    def vkey(self) -> str:
        encoded = base64.b64encode(bytes([ED25519]) + self.public_key).decode()
        return f"{self.name}+{self.key_id:08x}+{encoded}"

    def verifies(self, text: bytes, signature: bytes) -> bool:
        try:
            Ed25519PublicKey.from_public_bytes(self.public_key).verify(signature, text)
        except InvalidSignature:
            return False
        return True


class NoteSigner:
    def __init__(self, name: str, private_key: Ed25519PrivateKey) -> None:
        check_key_name(name)
        self.name = name
        self._key = private_key
        public = private_key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        self.verifier = NoteVerifier(name, key_id(name, public), public)

    @property
    def key_id(self) -> int:
        return self.verifier.key_id

    def sign_bytes(self, message: bytes) -> bytes:
        return self._key.sign(message)

    def signature_line(self, text: str) -> str:
        signature = struct.pack(">I", self.key_id) + self._key.sign(text.encode())
        return f"{EM_DASH} {self.name} {base64.b64encode(signature).decode()}\n"

    def sign(self, text: str) -> str:
        """The signed note: `text` (which must end in a newline), a blank line, our signature."""
        check_text(text)
        return f"{text}\n{self.signature_line(text)}"


@dataclass(frozen=True)
class Signature:
    name: str
    key_id: int
    signature: bytes


def parse_note(note: str) -> tuple[str, list[Signature]]:
    """(text, signatures) of a note, its shape checked but no signature verified."""
    if "\n\n" not in note:
        raise MalformedError("a signed note needs a blank line before its signatures")
    text, _, block = note.rpartition("\n\n")
    text += "\n"
    check_text(text)
    if not block.endswith("\n"):
        raise MalformedError("the note's last signature line must end in a newline")
    signatures = []
    for line in block[:-1].split("\n"):
        signatures.append(_parse_signature(line))
    if len(signatures) > MAX_SIGNATURES:
        raise MalformedError(f"more than {MAX_SIGNATURES} signatures")
    return text, signatures


def open_note(note: str, verifiers: Iterable[NoteVerifier]) -> str:
    """The note's text, if a known key signed it and no known key's signature fails."""
    text, signatures = parse_note(note)
    known = {(v.name, v.key_id): v for v in verifiers}
    verified = False
    for sig in signatures:
        verifier = known.get((sig.name, sig.key_id))
        if verifier is None:
            continue
        if not verifier.verifies(text.encode(), sig.signature):
            raise VerificationError(f"the signature by {sig.name} does not verify")
        verified = True
    if not verified:
        raise VerificationError("no signature by a known key")
    return text


def check_text(text: str) -> None:
    if not text.endswith("\n"):
        raise MalformedError("a note's text must end in a newline")
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise MalformedError("a note must not hold control characters other than newline")


def _parse_signature(line: str) -> Signature:
    prefix = f"{EM_DASH} "
    if not line.startswith(prefix):
        raise MalformedError("a signature line starts with an em dash and a space")
    name, space, encoded = line[len(prefix) :].partition(" ")
    if not space or " " in encoded:
        raise MalformedError("a signature line is: em dash, key name, base64 signature")
    check_key_name(name)
    try:
        raw = base64.b64decode(encoded, validate=True)
    except binascii.Error:
        raise MalformedError(f"the signature by {name} is not base64") from None
    if len(raw) < 5:
        raise MalformedError(f"the signature by {name} is too short")
    return Signature(name, int(struct.unpack(">I", raw[:4])[0]), raw[4:])
