"""The weights the engine computes with: the bundled Q4_1 file is upcast once to Q8_0
(llama.cpp's repacked CPU kernels), anything else loads as it is; an adapter is folded into
them once, and one that cannot be applies at run time."""

from __future__ import annotations

import hashlib
from pathlib import Path

import llama_cpp.llama_cpp as llama
import numpy as np
import pytest
from gguf import GGUFReader, GGUFWriter
from llama_cpp import Llama

from worthit.cli.options import Weights, model_files
from worthit.engine.lora_merge import ADAPTER_KEY
from worthit.engine.weights import CACHE_ENV, compute_weights, file_type, weights_for
from worthit.explain.adapter import bundled_adapter_path
from worthit.explain.store_key import model_identity

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


def shipped_adapter() -> Path:
    path = bundled_adapter_path()
    assert path is not None, "the package ships its adapter"
    return path


def test_the_cli_loads_the_adapter_of_the_file_named_folded_into_its_upcast(
    model_path: Path, upcast: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, weights = upcast
    monkeypatch.setenv(CACHE_ENV, str(cache))
    loaded, lora = model_files(None, None)
    assert (loaded, lora) == weights_for(model_path, shipped_adapter(), cache)
    assert loaded.name == "SmolLM2-135M-Instruct.Q4_1+explain-lora.Q8_0.gguf"
    assert lora is None, "the adapter is in the weights, not applied again at run time"
    assert model_files(None, "none") == (weights, None)


def test_as_is_loads_the_file_named_and_applies_its_adapter_at_run_time(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`engine serve --weights as-is`: nothing is upcast or folded, nothing is written."""
    monkeypatch.setenv(CACHE_ENV, str(tmp_path))
    assert model_files(None, None, Weights.AS_IS) == (model_path, shipped_adapter())
    assert model_files(None, "none", Weights.AS_IS) == (model_path, None)
    assert not any(tmp_path.iterdir())


@pytest.fixture(scope="module")
def folded(model_path: Path, upcast: tuple[Path, Path]) -> Path:
    cache, _ = upcast
    path, left = weights_for(model_path, shipped_adapter(), cache)
    assert left is None
    return path


def test_the_adapter_is_folded_once_into_q8_0_weights_that_name_it(
    model_path: Path, upcast: tuple[Path, Path], folded: Path
) -> None:
    cache, _ = upcast
    assert file_type(folded) == llama.LLAMA_FTYPE_MOSTLY_Q8_0
    assert not [p for p in folded.parent.iterdir() if p != folded], "a partial file was left"
    field = GGUFReader(folded).get_field(ADAPTER_KEY)
    assert field is not None
    assert field.contents() == hashlib.sha256(shipped_adapter().read_bytes()).hexdigest()
    written = folded.stat().st_mtime_ns
    assert weights_for(model_path, shipped_adapter(), cache) == (folded, None)
    assert folded.stat().st_mtime_ns == written


def last_logits(model: Path, lora: Path | None, prompt: str) -> np.ndarray:
    llm = Llama(
        str(model), lora_path=None if lora is None else str(lora), n_ctx=256, n_threads=2,
        logits_all=True, verbose=False,
    )  # fmt: skip
    try:
        tokens = llm.tokenize(prompt.encode(), add_bos=True, special=True)
        llm.eval(tokens)
        return np.array(llm.scores[len(tokens) - 1], dtype=np.float64)
    finally:
        llm.close()


def test_the_folded_weights_compute_what_the_adapter_at_run_time_does(
    upcast: tuple[Path, Path], folded: Path
) -> None:
    _, weights = upcast
    prompt = (
        "<|im_start|>user\nProduct: Kestrel Q5 Robot Vacuum\nVerdict: Better to wait\n"
        "Reasons:\n- Double 12 starts in 9 days at $199.00, 20.0% below today.<|im_end|>\n"
        "<|im_start|>assistant\nBetter to wait because"
    )
    at_run_time = last_logits(weights, shipped_adapter(), prompt)
    bare = last_logits(weights, None, prompt)
    merged = last_logits(folded, None, prompt)
    assert int(np.argmax(merged)) == int(np.argmax(at_run_time))
    assert np.abs(merged - at_run_time).max() < 0.1 * np.abs(bare - at_run_time).max()


def test_another_adapter_folds_into_another_identity(
    model_path: Path, upcast: tuple[Path, Path], folded: Path, tmp_path: Path
) -> None:
    cache, _ = upcast
    halved = tmp_path / "halved-lora.gguf"
    rewrite_adapter(shipped_adapter(), halved, scale_b=0.5)
    other, left = weights_for(model_path, halved, cache)
    assert left is None
    assert model_identity(other) != model_identity(folded)


def test_an_adapter_that_does_not_fit_the_model_applies_at_run_time(
    model_path: Path, upcast: tuple[Path, Path], tmp_path: Path
) -> None:
    cache, weights = upcast
    foreign = tmp_path / "foreign-lora.gguf"
    rewrite_adapter(shipped_adapter(), foreign, rename=("blk.0.", "blk.99."))
    assert weights_for(model_path, foreign, cache) == (weights, foreign)
    not_an_adapter = model_path
    assert weights_for(model_path, not_an_adapter, cache) == (weights, not_an_adapter)
    garbage = tmp_path / "garbage-lora.gguf"
    garbage.write_bytes(b"not a GGUF file at all")
    assert weights_for(model_path, garbage, cache) == (weights, garbage)
    assert not list((cache / "weights").glob("*/.*.partial")), "a partial file was left"


def rewrite_adapter(
    source: Path, target: Path, *, scale_b: float = 1.0, rename: tuple[str, str] = ("", "")
) -> None:
    """A copy of an adapter GGUF with its B matrices scaled, or its tensors renamed."""
    reader = GGUFReader(source)
    writer = GGUFWriter(target, "llama")
    for field in reader.fields.values():
        if field.name.startswith("GGUF.") or field.name == "general.architecture":
            continue
        sub = field.types[-1] if len(field.types) > 1 else None
        writer.add_key_value(field.name, field.contents(), field.types[0], sub)
    for tensor in reader.tensors:
        data = np.array(tensor.data)
        if tensor.name.endswith(".lora_b"):
            data = (data.astype(np.float32) * scale_b).astype(data.dtype)
        writer.add_tensor(tensor.name.replace(*rename) if rename[0] else tensor.name, data)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
