"""The key an explanation is stored under: which model file, which prompt, which sampling.

Two askers of the same inputs build the same prompt bytes, so they share one key; any
change to an input changes the prompt and so the key. The model file is part of it: text
written by another GGUF (another file, even of the same name) is never served.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path

_HEAD_BYTES = 16 << 20
_TAIL_BYTES = 1 << 20


def model_identity(path: Path, lora: Path | None = None) -> str:
    """What wrote a text: the GGUF's identity, and the LoRA adapter's when one is applied,
    so text from the bare model is never served as the adapter's, nor the reverse."""
    identity = file_identity(path)
    return identity if lora is None else f"{identity}+{file_identity(lora)}"


def file_identity(path: Path) -> str:
    """A digest of a GGUF: its size and the SHA-256 of its first 16 MiB (the header,
    the metadata and the first tensors) and its last 1 MiB. Hashing a multi-GB file
    whole at every start would cost seconds; a different quantisation, fine-tune or
    truncation changes these bytes."""
    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with path.open("rb") as handle:
        digest.update(handle.read(_HEAD_BYTES))
        if size > _HEAD_BYTES:
            handle.seek(max(_HEAD_BYTES, size - _TAIL_BYTES))
            digest.update(handle.read())
    return f"{path.name}@{digest.hexdigest()[:16]}"


def prompt_bytes(messages: Sequence[dict[str, str]], prefix: str) -> bytes:
    return json.dumps(
        {"messages": list(messages), "answer_prefix": prefix}, ensure_ascii=False, sort_keys=True
    ).encode()


def explanation_key(
    model: str, messages: Sequence[dict[str, str]], prefix: str, sampling: str
) -> str:
    """SHA-256 (hex) of the model identity, the prompt's bytes and the sampling policy."""
    digest = hashlib.sha256()
    for part in (model.encode(), prompt_bytes(messages, prefix), sampling.encode()):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()
