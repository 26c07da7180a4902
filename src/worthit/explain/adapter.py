"""The explanation adapter that ships in the package: a LoRA of the bundled SmolLM2 trained
for this one job (reasons → one or two sentences; `make adapter`, train/README.md).

It is applied to the bundled model by default (`worthit serve/ask/explain --lora`), and to no
other model: an adapter only fits the base it was trained on.
"""

from __future__ import annotations

from pathlib import Path

ADAPTER_FILE = Path(__file__).parent / "adapters" / "explain-lora.gguf"


def bundled_adapter_path() -> Path | None:
    """The shipped adapter, or None in a checkout where it was never trained."""
    return ADAPTER_FILE if ADAPTER_FILE.is_file() else None
