"""Which GGUF and which LoRA adapter a command loads (`--model`, `--lora`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from worthit.engine.model_files import (
    NO_LORA,
    ModelNotFoundError,
    bundled_model_path,
    resolve_lora_path,
)


@pytest.fixture
def adapter(tmp_path: Path) -> Path:
    path = tmp_path / "explain-lora.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 16)
    return path


def test_the_bundled_adapter_goes_with_the_bundled_model_only(
    adapter: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("WORTHIT_LORA", raising=False)
    bundled = bundled_model_path()
    assert bundled is not None
    assert resolve_lora_path(None, bundled, adapter) == adapter
    foreign = tmp_path / "other.gguf"
    foreign.write_bytes(b"GGUF")
    assert resolve_lora_path(None, foreign, adapter) is None
    assert resolve_lora_path(None, bundled, None) is None


def test_none_turns_it_off_and_a_path_is_checked(
    adapter: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = bundled_model_path()
    assert bundled is not None
    assert resolve_lora_path(NO_LORA, bundled, adapter) is None
    monkeypatch.setenv("WORTHIT_LORA", NO_LORA)
    assert resolve_lora_path(None, bundled, adapter) is None
    assert resolve_lora_path(str(adapter), tmp_path / "any.gguf", None) == adapter
    text = tmp_path / "notes.txt"
    text.write_text("not a model")
    with pytest.raises(ModelNotFoundError, match="not a GGUF LoRA adapter"):
        resolve_lora_path(str(text), bundled, None)
    with pytest.raises(ModelNotFoundError, match="LoRA adapter file not found"):
        resolve_lora_path(str(tmp_path / "missing.gguf"), bundled, None)
