"""The weights llama.cpp computes with: a Q4_1 or Q5 GGUF is upcast once to Q8_0.

llama.cpp's CPU backend repacks Q4_0, Q4_K, IQ4_NL and Q8_0 weights into interleaved
layouts that its matrix kernels read in one pass (the "extra buffer types",
`EngineConfig.extra_buffer_types`); Q4_1, Q5_0 and Q5_1 have no such layout and go
through the generic dot products. The bundled SmolLM2 is Q4_1. On the 2-core Xeon host,
one thread prefilled 12.5 ms a token of it as shipped and 7.1 ms as Q8_0, and decoded
eight sequences at 56 against 80 tokens a second (docs/engine.md, "Weights").

Q8_0 rather than Q4_0: Q8_0 keeps each Q4_1 weight of a block centred on zero to within
about a sixteenth of Q4_1's own step (eight bits over the block's largest weight against
four bits over its range), so the upcast adds almost nothing to the error the file
already has; Q4_0 would quantise it a second time. The greedy texts of the shipped
adapter on the upcast weights are kept by the checker as often as on the Q4_1 file.

The upcast file is a cache, written once into `$WORTHIT_CACHE`, else
`$XDG_CACHE_HOME/worthit`, else `~/.cache/worthit`, in a folder named by the source's path,
size and modification time, so a new model file is upcast again. It is
derived from the user's own file on this machine: nothing is downloaded. Where it cannot
be written, the source is loaded as it is, slower but the same model.

With a LoRA adapter, `weights_for` folds it into the weights instead (`engine.lora_merge`,
cached the same way under the source's and the adapter's stamps), so llama.cpp computes
no adapter at run time; where that cannot be done the adapter applies at run time on the
upcast.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
from pathlib import Path

import llama_cpp.llama_cpp as llama

from worthit.engine.runner import init_backend

log = logging.getLogger(__name__)

CACHE_ENV = "WORTHIT_CACHE"
UPCAST_FILE_TYPES = {
    llama.LLAMA_FTYPE_MOSTLY_Q4_1: "Q4_1",
    llama.LLAMA_FTYPE_MOSTLY_Q5_0: "Q5_0",
    llama.LLAMA_FTYPE_MOSTLY_Q5_1: "Q5_1",
}
"""Whole-file types without repacked CPU kernels, which Q8_0 holds to within rounding."""
TARGET = "Q8_0"


def cache_dir() -> Path:
    chosen = os.environ.get(CACHE_ENV)
    if chosen:
        return Path(chosen).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "worthit"


def file_type(path: Path) -> int | None:
    """The GGUF's `general.file_type` (a `llama_ftype`), read with the vocabulary only."""
    init_backend()
    params = llama.llama_model_default_params()
    params.vocab_only = True
    model = llama.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        return None
    try:
        buf = ctypes.create_string_buffer(32)
        n = llama.llama_model_meta_val_str(model, b"general.file_type", buf, len(buf))
        return int(buf.value) if n > 0 and buf.value.isdigit() else None
    finally:
        llama.llama_model_free(model)


def _stamp(*paths: Path) -> str:
    """Names a cached file by its sources' paths, sizes and modification times."""
    digest = hashlib.sha256()
    for path in paths:
        stat = path.stat()
        digest.update(f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|".encode())
    return digest.hexdigest()[:16]


def weights_for(
    source: Path, lora: Path | None, cache: Path | None = None
) -> tuple[Path, Path | None]:
    """The file the engine should load for `source` with `lora`, and the adapter still to
    apply at run time: the adapter folded into Q8_0 weights (written on first use), else
    `compute_weights(source)` with the adapter applied at run time."""
    if lora is None:
        return compute_weights(source, cache), None
    folder = (cache or cache_dir()) / "weights" / _stamp(source, lora)
    target = folder / f"{source.stem}+{lora.stem}.{TARGET}.gguf"
    if target.is_file():
        return target, None
    from worthit.engine.lora_merge import MergeError, merge_lora  # numpy and gguf: on merge

    partial = folder / f".{target.name}.{os.getpid()}.partial"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        merge_lora(source, lora, partial)
        os.replace(partial, target)
    except (OSError, ValueError, KeyError, MergeError) as error:  # gguf: a file it cannot read
        partial.unlink(missing_ok=True)
        log.warning("applying %s at run time (not folded into %s: %s)", lora, source, error)
        return compute_weights(source, cache), lora
    log.info("folded %s into %s, written as %s", lora.name, source.name, target)
    return target, None


def compute_weights(source: Path, cache: Path | None = None) -> Path:
    """The file the engine should load for `source`: its Q8_0 upcast when `source` is of a
    type without repacked kernels (written on first use), else `source` itself."""
    folder = (cache or cache_dir()) / "weights" / _stamp(source)
    target = folder / f"{source.stem}.{TARGET}.gguf"
    if target.is_file():
        return target  # written before: the source's type needs no reading (0.2 s)
    kind = UPCAST_FILE_TYPES.get(file_type(source) or -1)
    if kind is None:
        return source
    try:
        folder.mkdir(parents=True, exist_ok=True)
        partial = folder / f".{target.name}.{os.getpid()}.partial"
        params = llama.llama_model_quantize_default_params()
        params.ftype = llama.LLAMA_FTYPE_MOSTLY_Q8_0
        params.allow_requantize = True
        params.nthread = 0
        rc = llama.llama_model_quantize(
            str(source).encode(), str(partial).encode(), ctypes.byref(params)
        )
        if rc != 0:
            partial.unlink(missing_ok=True)
            raise OSError(f"llama_model_quantize returned {rc}")
        os.replace(partial, target)
    except OSError as error:
        log.warning("loading %s as %s (%s could not be written: %s)", source, kind, target, error)
        return source
    log.info("upcast %s (%s) to %s for llama.cpp's repacked kernels", source.name, kind, target)
    return target
