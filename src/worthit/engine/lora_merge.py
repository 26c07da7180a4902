"""A LoRA adapter folded into the model's weights, once, instead of applied at every step.

llama.cpp applies an adapter at run time as two extra matrix products beside each adapted
projection (`scale · B(A x)`): for the bundled 135M model and its rank-16 adapter on all
seven projections that is 15 % of prefill time and 11 % of decode (`bench/weights.py`,
2 threads, 8 sequences). Folding `scale · B A` into the base weights gives the same
function, up to rounding, for none of that cost.

The merged file is written with the `gguf` package (ggml's own reader and writer): every
tensor the adapter touches is dequantized, given its `B A` and quantized to Q8_0, the types
without repacked CPU kernels are upcast to Q8_0 as `engine.weights` does for a bare model,
and every other tensor and every metadata key is copied as it is. The adapter's SHA-256
is written into the metadata, so a file merged with another adapter has another identity
(`explain.store_key.file_identity` reads the header).

What cannot be merged is left to run time, with a warning: an adapter for another
architecture or with tensors the model lacks, a model over `MERGE_MAX_BYTES` (merging
reads every tensor into memory), a tensor type `gguf` cannot dequantize.
"""

from __future__ import annotations

import hashlib
import logging
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter, quants
from gguf.gguf_reader import ReaderField, ReaderTensor

log = logging.getLogger(__name__)

MERGE_MAX_BYTES = 2 << 30
"""Largest model merged: the writer holds every merged tensor until it writes the file."""
UPCAST_TYPES = frozenset(
    {GGMLQuantizationType.Q4_1, GGMLQuantizationType.Q5_0, GGMLQuantizationType.Q5_1}
)
"""Tensor types llama.cpp's CPU backend has no repacked kernels for (`engine.weights`)."""
FLOAT_TYPES = frozenset({GGMLQuantizationType.F32, GGMLQuantizationType.F16})
Q8_0_BLOCK = 32
ADAPTER_KEY = "worthit.merged_lora.sha256"
ALPHA_KEY = "adapter.lora.alpha"
MOSTLY_Q8_0 = 7
"""`llama_ftype` of a file whose quantized tensors are all Q8_0."""


class MergeError(ValueError):
    """The adapter cannot be folded into this model (it still applies at run time)."""


def merge_lora(source: Path, adapter: Path, target: Path) -> None:
    """Write `target`: `source` with `adapter` folded into its weights (see the module)."""
    if source.stat().st_size > MERGE_MAX_BYTES:
        raise MergeError(f"{source.name} is over {MERGE_MAX_BYTES >> 30} GiB")
    base = GGUFReader(source)
    lora = GGUFReader(adapter)
    arch = _string(base, "general.architecture")
    if arch is None:
        raise MergeError(f"{source.name} names no architecture")
    if _string(lora, "general.architecture") != arch:
        raise MergeError(f"the adapter is not for a {arch} model")
    if _string(lora, "adapter.type") != "lora":
        raise MergeError("not a LoRA adapter")
    pairs = _lora_pairs(lora)
    tensors = {tensor.name: tensor for tensor in base.tensors}
    missing = sorted(set(pairs) - set(tensors))
    if missing:
        raise MergeError(f"the model has no tensor {missing[0]}")
    alpha_field = lora.get_field(ALPHA_KEY)
    alpha = float(alpha_field.contents()) if alpha_field is not None else 0.0

    writer = GGUFWriter(target, arch)
    types: set[GGMLQuantizationType] = set()
    for tensor in base.tensors:
        delta = None
        if tensor.name in pairs:
            a, b = pairs[tensor.name]
            rank = a.shape[0]
            scale = alpha / rank if alpha else 1.0
            delta = scale * (b @ a)
        kind = _add_tensor(writer, tensor, delta)
        types.add(kind)
    for field in base.fields.values():
        _copy_field(writer, field, all_q8_0=types <= FLOAT_TYPES | {GGMLQuantizationType.Q8_0})
    writer.add_string(ADAPTER_KEY, _sha256(adapter))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def _lora_pairs(lora: GGUFReader) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Base tensor name -> (A, B) as float32 matrices: A is rank × inputs, B outputs × rank."""
    halves: dict[str, dict[str, np.ndarray]] = {}
    for tensor in lora.tensors:
        name, _, half = tensor.name.rpartition(".lora_")
        if half not in ("a", "b") or not name:
            raise MergeError(f"unexpected adapter tensor {tensor.name}")
        halves.setdefault(name, {})[half] = _floats(tensor)
    pairs = {}
    for name, found in halves.items():
        if set(found) != {"a", "b"}:
            raise MergeError(f"{name} has only one of lora_a and lora_b")
        a, b = found["a"], found["b"]
        if a.shape[0] != b.shape[1]:
            raise MergeError(f"{name}: lora_a and lora_b disagree on the rank")
        pairs[name] = (a, b)
    return pairs


def _add_tensor(
    writer: GGUFWriter, tensor: ReaderTensor, delta: np.ndarray | None
) -> GGMLQuantizationType:
    kind = GGMLQuantizationType(tensor.tensor_type)
    if delta is None and kind not in UPCAST_TYPES:
        writer.add_tensor(tensor.name, np.asarray(tensor.data), raw_dtype=kind)
        return kind
    weights = _floats(tensor)
    if delta is not None:
        if delta.shape != weights.shape:
            raise MergeError(
                f"{tensor.name}: the adapter's shape {delta.shape} is not {weights.shape}"
            )
        weights = weights + delta
    if kind in FLOAT_TYPES:
        writer.add_tensor(tensor.name, weights.astype(_numpy_type(kind)))
        return kind
    if weights.shape[-1] % Q8_0_BLOCK:
        writer.add_tensor(tensor.name, weights.astype(np.float32))
        return GGMLQuantizationType.F32
    packed = quants.quantize(weights.astype(np.float32), GGMLQuantizationType.Q8_0)
    writer.add_tensor(tensor.name, packed, raw_dtype=GGMLQuantizationType.Q8_0)
    return GGMLQuantizationType.Q8_0


def _floats(tensor: ReaderTensor) -> np.ndarray:
    kind = GGMLQuantizationType(tensor.tensor_type)
    try:
        values = quants.dequantize(np.asarray(tensor.data), kind)
    except NotImplementedError as error:
        raise MergeError(f"{tensor.name}: cannot read {kind.name} ({error})") from error
    return np.asarray(values, dtype=np.float32).reshape(
        tuple(int(n) for n in reversed(tensor.shape.tolist()))
    )


def _numpy_type(kind: GGMLQuantizationType) -> type[np.floating]:
    return np.float16 if kind is GGMLQuantizationType.F16 else np.float32


def _copy_field(writer: GGUFWriter, field: ReaderField, *, all_q8_0: bool) -> None:
    """Copy a metadata key; the header's own keys are the writer's to write."""
    if field.name.startswith("GGUF.") or field.name == "general.architecture":
        return
    vtype = field.types[0]
    value = field.contents()
    if field.name == "general.file_type" and all_q8_0:
        value = MOSTLY_Q8_0
    if field.name == "general.alignment":
        writer.data_alignment = int(value)
    sub_type = field.types[-1] if vtype is GGUFValueType.ARRAY else None
    writer.add_key_value(field.name, value, vtype, sub_type)


def _string(reader: GGUFReader, key: str) -> str | None:
    field = reader.get_field(key)
    return None if field is None else str(field.contents())


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()
