"""The trained PEFT adapter as a GGUF LoRA that llama.cpp applies at run time.

The conversion is llama.cpp's own `convert_lora_to_gguf.py`, from the llama.cpp that the
installed llama-cpp-python was built from, so the file's layout (tensor names, the q/k
row permutation of LLaMA, the adapter keys) is the one the loader expects. It is not kept
in this repository: the llama-cpp-python sdist carries it (vendor/llama.cpp), and
`converter_dir` takes the script, its `conversion/` package and `gguf-py/` out of that
sdist into build/llama.cpp-<version>/ once. The sdist comes from pip's cache when
`make install` built llama-cpp-python here (it is the file pip compiled), else from the
package index: `pip download --no-deps --no-binary :all: llama-cpp-python==<version>`.
`--llama-cpp DIR` (or $WORTHIT_LLAMA_CPP) points at a llama.cpp checkout instead.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

from transformers import PretrainedConfig

CONVERTER = "convert_lora_to_gguf.py"
_MEMBERS = (CONVERTER, "conversion/", "gguf-py/", "LICENSE")
LLAMA_CPP_ENV = "WORTHIT_LLAMA_CPP"


class ExportError(RuntimeError):
    """The adapter could not be written as GGUF; the message says which step failed."""


def llama_cpp_python_version() -> str:
    return importlib.metadata.version("llama-cpp-python")


def converter_dir(build_root: Path, explicit: Path | None = None) -> Path:
    """A directory holding convert_lora_to_gguf.py and what it imports."""
    from_env = os.environ.get(LLAMA_CPP_ENV)
    chosen = explicit or (Path(from_env) if from_env else None)
    if chosen is not None:
        if not (chosen / CONVERTER).is_file():
            raise ExportError(f"{chosen} has no {CONVERTER}")
        return chosen
    version = llama_cpp_python_version()
    target = build_root / f"llama.cpp-{version}"
    if (target / CONVERTER).is_file():
        return target
    with tempfile.TemporaryDirectory() as tmp:
        command = [
            sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
            "--no-binary", ":all:", "--dest", tmp, f"llama-cpp-python=={version}",
        ]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        sdists = list(Path(tmp).glob("llama_cpp_python-*.tar.gz"))
        if done.returncode != 0 or not sdists:
            raise ExportError(
                f"could not get the llama-cpp-python {version} sdist for {CONVERTER} "
                f"({' '.join(command)}): {done.stderr.strip()[-500:]}"
            )
        _extract_converter(sdists[0], target)
    return target


def _extract_converter(sdist: Path, target: Path) -> None:
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    with tarfile.open(sdist) as archive:
        for member in archive.getmembers():
            parts = member.name.split("/", 3)  # <sdist>/vendor/llama.cpp/<path>
            if len(parts) < 4 or parts[1:3] != ["vendor", "llama.cpp"]:
                continue
            inner = parts[3]
            if not any(inner == m or inner.startswith(m) for m in _MEMBERS):
                continue
            if member.isfile():
                destination = staging / inner
                destination.parent.mkdir(parents=True, exist_ok=True)
                source = archive.extractfile(member)
                if source is not None:
                    destination.write_bytes(source.read())
    if not (staging / CONVERTER).is_file():
        raise ExportError(f"{sdist.name} has no vendor/llama.cpp/{CONVERTER}")
    shutil.rmtree(target, ignore_errors=True)
    staging.rename(target)


def write_base_config(config: PretrainedConfig, architecture: str, directory: Path) -> None:
    """The base model's config.json, all the converter reads of the base (it never needs
    its weights). A config read from a GGUF names no architecture class, which the
    converter picks its tensor mapping by, so `architecture` (the loaded model's class,
    LlamaForCausalLM) is written in. The GGUF quantization note is dropped: the converter
    would take it for a quantized checkpoint to undo."""
    plain = config.to_dict()
    plain["architectures"] = [architecture]
    plain.pop("quantization_config", None)
    type(config).from_dict(plain).save_pretrained(directory)


def convert(
    peft_dir: Path, base_dir: Path, out_file: Path, llama_cpp_dir: Path, outtype: str = "f16"
) -> None:
    """Run llama.cpp's converter with this interpreter (it needs torch, transformers,
    safetensors and numpy, all in the train extra; gguf comes from its own gguf-py)."""
    out_file.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, str(llama_cpp_dir / CONVERTER), str(peft_dir),
        "--base", str(base_dir), "--outfile", str(out_file), "--outtype", outtype,
    ]
    env = {k: v for k, v in os.environ.items() if k != "NO_LOCAL_GGUF"}
    env["HF_HUB_OFFLINE"] = "1"  # the base config is local; never ask the hub
    done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if done.returncode != 0 or not out_file.is_file():
        raise ExportError(f"{CONVERTER} failed ({done.returncode}): {done.stderr[-2000:]}")
