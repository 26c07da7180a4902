"""The weights the engine computes with: the bundled Q4_1 file is upcast once to Q8_0
(llama.cpp's repacked CPU kernels), anything else loads as it is."""

from __future__ import annotations

from pathlib import Path

import llama_cpp.llama_cpp as llama
import pytest

from worthit.cli.options import model_files
from worthit.engine.weights import CACHE_ENV, compute_weights, file_type

from engine_fixtures import model_path

__all__ = ["model_path"]  # the fixture, imported for pytest to find


@pytest.fixture(scope="module")
def upcast(model_path: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    cache = tmp_path_factory.mktemp("cache")
    return cache, compute_weights(model_path, cache)


def test_the_bundled_q4_1_file_is_upcast_to_q8_0_in_the_cache(
    model_path: Path, upcast: tuple[Path, Path]
) -> None:
    cache, weights = upcast
    assert file_type(model_path) == llama.LLAMA_FTYPE_MOSTLY_Q4_1
    assert file_type(weights) == llama.LLAMA_FTYPE_MOSTLY_Q8_0
    assert weights.is_relative_to(cache)
    assert weights.name == "SmolLM2-135M-Instruct.Q4_1.Q8_0.gguf"
    assert not [p for p in weights.parent.iterdir() if p != weights], "a partial file was left"


def test_the_upcast_is_written_once(model_path: Path, upcast: tuple[Path, Path]) -> None:
    cache, weights = upcast
    written = weights.stat().st_mtime_ns
    assert compute_weights(model_path, cache) == weights
    assert weights.stat().st_mtime_ns == written


def test_a_file_with_repacked_kernels_loads_as_it_is(upcast: tuple[Path, Path]) -> None:
    cache, weights = upcast
    assert compute_weights(weights, cache) == weights


def test_where_the_cache_cannot_be_written_the_source_loads(
    model_path: Path, tmp_path: Path
) -> None:
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    assert compute_weights(model_path, blocked) == model_path


def test_the_cli_loads_the_upcast_and_keeps_the_adapter_of_the_file_named(
    upcast: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, weights = upcast
    monkeypatch.setenv(CACHE_ENV, str(cache))
    loaded, lora = model_files(None, None)
    assert loaded == weights
    assert lora is not None and lora.name == "explain-lora.gguf"
