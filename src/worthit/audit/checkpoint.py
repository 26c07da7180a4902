"""C2SP tlog checkpoints (c2sp.org/tlog-checkpoint): the signed head of the tree.

The body is three lines, each ending in a newline: the origin (the log's name, also
the signing key's name), the tree size in decimal without leading zeros, and the
base64 root hash. We write no extension lines and refuse none when reading.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from worthit.audit.errors import MalformedError, VerificationError
from worthit.audit.merkle import HASH_SIZE
from worthit.audit.note import NoteSigner, NoteVerifier, check_key_name, open_note, parse_note


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes

    def body(self) -> str:
        return f"{self.origin}\n{self.size}\n{base64.b64encode(self.root).decode()}\n"

    def sign(self, signer: NoteSigner) -> str:
        if signer.name != self.origin:
            raise ValueError(f"the key {signer.name!r} is not the log {self.origin!r}")
        return signer.sign(self.body())

    @classmethod
    def parse(cls, body: str) -> Checkpoint:
        lines = body.split("\n")
        if len(lines) < 4 or lines[-1] != "" or any(not line for line in lines[:-1]):
            raise MalformedError("a checkpoint is at least three non-empty lines")
        origin, size_text, root_text = lines[:3]
        check_key_name(origin)
        if (
            not size_text.isdigit()
            or not size_text.isascii()
            or (size_text != "0" and size_text.startswith("0"))
        ):
            raise MalformedError(f"checkpoint size {size_text!r} is not a decimal number")
        try:
            root = base64.b64decode(root_text, validate=True)
        except binascii.Error:
            raise MalformedError("the checkpoint's root is not base64") from None
        if len(root) != HASH_SIZE:
            raise MalformedError(f"the checkpoint's root is not {HASH_SIZE} bytes")
        return cls(origin, int(size_text), root)

    @classmethod
    def from_note(cls, note: str) -> Checkpoint:
        """The checkpoint in a note, unverified (to show it, or to find which key to ask)."""
        return cls.parse(parse_note(note)[0])

    @classmethod
    def open(cls, note: str, verifier: NoteVerifier) -> Checkpoint:
        """The checkpoint in a signed note, if the log's own key signed it.

        Other signatures (a witness's cosignature) are ignored, as the note spec says.
        """
        checkpoint = cls.parse(open_note(note, [verifier]))
        if checkpoint.origin != verifier.name:
            raise VerificationError(
                f"the checkpoint is of the log {checkpoint.origin!r}, the key of {verifier.name!r}"
            )
        return checkpoint
