"""A GGUF LoRA adapter back as a PEFT adapter, to go on training it (`--resume FILE.gguf`).

The GGUF is what ships (src/worthit/explain/adapters/); the PEFT directory a run trains is
scratch under build/ and gone on a fresh clone. The GGUF keeps all a PEFT adapter is:
each target module's A and B matrices (`blk.N.attn_q.weight.lora_a`, shapes as PEFT's),
and alpha. The one change `convert_lora_to_gguf.py` makes is LLaMA's q/k row order for
llama.cpp's rotary embedding, on B (its rows are the projection's outputs); `unpermute`
undoes it. Converting the result again gives the shipped file back bit for bit (f16 in,
f16 out). Needs only numpy and gguf, as the service does; writing the PEFT files needs
safetensors, from the train extra.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from gguf import GGUFReader

_MODULES = {
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_HALVES = {"lora_a": "lora_A", "lora_b": "lora_B"}


class GgufAdapterError(ValueError):
    """The file is not a LoRA adapter this can read back; the message says why."""


@dataclass(frozen=True)
class PeftAdapter:
    tensors: dict[str, np.ndarray]
    """PEFT's names (`base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight`),
    fp32."""
    rank: int
    alpha: float
    target_modules: tuple[str, ...]


def unpermute(rows: np.ndarray, heads: int) -> np.ndarray:
    """The inverse of the converter's `LlamaModel.permute` on a matrix's rows: within each
    head, the rows of the two rotary halves were interleaved."""
    n = rows.shape[0]
    return (
        rows.reshape(heads, n // heads // 2, 2, *rows.shape[1:]).swapaxes(1, 2).reshape(rows.shape)
    )


def read_adapter(gguf_file: Path, heads: int, kv_heads: int) -> PeftAdapter:
    """The adapter in `gguf_file` as PEFT holds it, for a LLaMA base with `heads`
    attention heads and `kv_heads` key/value heads."""
    reader = GGUFReader(gguf_file)
    fields = {name: field.contents() for name, field in reader.fields.items()}
    if fields.get("general.type") != "adapter" or fields.get("adapter.type") != "lora":
        raise GgufAdapterError(f"{gguf_file} is not a LoRA adapter GGUF")
    alpha = fields.get("adapter.lora.alpha")
    permuted = {"attn_q": heads, "attn_k": kv_heads}
    tensors: dict[str, np.ndarray] = {}
    modules: set[str] = set()
    ranks: set[int] = set()
    for tensor in reader.tensors:
        block, layer, module, weight, half = (tensor.name.split(".") + [""] * 5)[:5]
        if block != "blk" or weight != "weight" or module not in _MODULES or half not in _HALVES:
            raise GgufAdapterError(f"{gguf_file}: unexpected tensor {tensor.name!r}")
        values = np.array(tensor.data, dtype=np.float32)
        if half == "lora_b" and module in permuted:
            values = unpermute(values, permuted[module])
        ranks.add(values.shape[0] if half == "lora_a" else values.shape[1])
        target = _MODULES[module]
        modules.add(target.split(".")[1])
        tensors[f"base_model.model.model.layers.{layer}.{target}.{_HALVES[half]}.weight"] = values
    if len(ranks) != 1 or not isinstance(alpha, (int, float)):
        raise GgufAdapterError(f"{gguf_file}: ranks {sorted(ranks)}, alpha {alpha!r}")
    return PeftAdapter(tensors, ranks.pop(), float(alpha), tuple(sorted(modules)))


def peft_from_gguf(
    gguf_file: Path, out_dir: Path, heads: int, kv_heads: int, dropout: float = 0.05
) -> Path:
    """Write `out_dir` (adapter_config.json, adapter_model.safetensors) from `gguf_file`;
    returns `out_dir`. `dropout` is a training setting the file does not keep."""
    from safetensors.numpy import save_file  # the train extra; reading needs none

    adapter = read_adapter(gguf_file, heads, kv_heads)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(adapter.tensors, str(out_dir / "adapter_model.safetensors"))
    config = {
        "peft_type": "LORA",
        "task_type": "CAUSAL_LM",
        "r": adapter.rank,
        "lora_alpha": adapter.alpha,
        "lora_dropout": dropout,
        "target_modules": list(adapter.target_modules),
        "bias": "none",
        "inference_mode": False,
    }
    (out_dir / "adapter_config.json").write_text(json.dumps(config, indent=2) + "\n")
    return out_dir


def same_adapter(one: Path, other: Path) -> bool:
    """Whether two adapter GGUFs hold the same tensors, bit for bit: the read-back adapter,
    converted again, must give the file it was read from, or `unpermute` no longer
    matches the converter."""
    first = {t.name: np.array(t.data) for t in GGUFReader(one).tensors}
    second = {t.name: np.array(t.data) for t in GGUFReader(other).tensors}
    return first.keys() == second.keys() and all(
        np.array_equal(first[name], second[name]) for name in first
    )


_OUTTYPES = {"F32": "f32", "F16": "f16", "Q8_0": "q8_0"}


def outtype_of(gguf_file: Path) -> str:
    """The converter's --outtype that wrote `gguf_file` (its tensors' type)."""
    types = {t.tensor_type.name for t in GGUFReader(gguf_file).tensors}
    if len(types) != 1 or (kind := types.pop()) not in _OUTTYPES:
        raise GgufAdapterError(f"{gguf_file}: tensor types {sorted(types)}")
    return _OUTTYPES[kind]
