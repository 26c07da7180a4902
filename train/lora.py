"""The LoRA fine-tune itself: the bundled GGUF's weights in fp32, a plain torch loop.

Why this shape:
- The base is the bundled Q4_1 GGUF dequantized by transformers, not an fp16 original:
  it is the very weights llama.cpp serves, so the adapter learns to correct the quantized
  model it will be applied to (the QLoRA idea), and no weights are downloaded.
- A plain loop instead of HF Trainer: one process, two threads, and two savings Trainer
  does not make. Batches hold examples of similar length (little padding), and the output
  layer (49,152 x 576, a fifth of the model's multiply-adds per token) runs only at the
  positions that predict a completion token, since the loss is taken there alone.
- Everything random is seeded, and the thread count is fixed, so a run is repeatable.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, PreTrainedModel

from .examples import Example

TARGET_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
IGNORE = -100


@dataclass(frozen=True, slots=True)
class TrainConfig:
    rank: int = 16
    alpha: int = 32
    dropout: float = 0.05
    learning_rate: float = 3e-4
    warmup_share: float = 0.06
    weight_decay: float = 0.0
    batch_size: int = 8
    epochs: float = 1.0
    """Passes over the data; a fraction stops part-way through the last one."""
    max_steps: int | None = None
    """Caps the optimiser steps whatever `epochs` says."""
    max_minutes: float | None = None
    """Ends the run by then, the learning rate paced to decay by then (see `train`)."""
    seed: int = 20261202
    threads: int = 2
    bf16: bool = False
    """Autocast the matmuls to bfloat16 (fast only where the CPU has AMX/AVX512-BF16)."""


@dataclass(slots=True)
class TrainResult:
    planned_steps: int = 0
    steps: int = 0
    time_capped: bool = False
    examples_seen: int = 0
    seconds: float = 0.0
    losses: list[float] = field(default_factory=list)
    """Mean completion-token loss of each step."""

    @property
    def final_loss(self) -> float:
        """The mean of the last tenth of the steps' losses (one step's loss is noisy)."""
        tail = self.losses[-max(1, len(self.losses) // 10) :]
        return sum(tail) / len(tail) if tail else math.nan


def load_base(model_path: Path) -> PreTrainedModel:
    """The GGUF dequantized to fp32 (transformers reads GGUF through the gguf package)."""
    model = AutoModelForCausalLM.from_pretrained(
        str(model_path.parent), gguf_file=model_path.name, dtype=torch.float32
    )
    model.config.use_cache = False
    return model


def with_lora(base: PreTrainedModel, config: TrainConfig) -> PeftModel:
    lora = LoraConfig(
        r=config.rank,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=list(TARGET_MODULES),
        bias="none",
        task_type="CAUSAL_LM",
    )
    return get_peft_model(base, lora)


def length_batches(
    examples: Sequence[Example], batch_size: int, rng: random.Random
) -> list[list[Example]]:
    """Batches of one language and similar length, in a random order.

    One language per batch lets the batch share its system prompt (see `Batch`); sorting
    by length with a little random jitter keeps padding small while letting the batches
    differ from one epoch to the next."""
    batches: list[list[Example]] = []
    for language in sorted({e.language for e in examples}):
        keyed = sorted(
            (e for e in examples if e.language == language),
            key=lambda e: (e.length + rng.random() * 8, e.id),
        )
        batches += [list(keyed[i : i + batch_size]) for i in range(0, len(keyed), batch_size)]
    rng.shuffle(batches)
    return batches


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch split into the prompt tokens all its examples share and the rest.

    The shared part (the instructions, the same for every product in a language: 40 to
    90 tokens of a 100 to 250 token example) is run once, not once per example, and its
    keys and values are handed to every row. Gradients flow through them, so the loss and
    its gradient are the same as running each example whole."""

    prefix: torch.Tensor
    """(1, P) the shared tokens."""
    ids: torch.Tensor
    """(B, W) each example's tokens after the prefix, right-padded."""
    mask: torch.Tensor
    """(B, P + W) attention mask over prefix and rest."""
    labels: torch.Tensor
    """(B, W) the completion tokens, IGNORE elsewhere."""


def shared_prefix_length(batch: Sequence[Example]) -> int:
    """Tokens every prompt of the batch starts with, leaving each at least one of its own
    (the last prompt token predicts the first completion token)."""
    first = batch[0].prompt_ids
    limit = min(len(e.prompt_ids) for e in batch) - 1
    n = 0
    while n < limit and all(e.prompt_ids[n] == first[n] for e in batch):
        n += 1
    return n


def collate(batch: Sequence[Example], pad_id: int) -> Batch:
    shared = shared_prefix_length(batch)
    width = max(e.length for e in batch) - shared
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), shared + width), dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE, dtype=torch.long)
    mask[:, :shared] = 1
    for row, example in enumerate(batch):
        rest = [*example.prompt_ids[shared:], *example.completion_ids]
        ids[row, : len(rest)] = torch.tensor(rest)
        mask[row, shared : shared + len(rest)] = 1
        start = len(example.prompt_ids) - shared
        labels[row, start : len(rest)] = torch.tensor(example.completion_ids)
    prefix = torch.tensor([batch[0].prompt_ids[:shared]], dtype=torch.long)
    return Batch(prefix, ids, mask, labels)


def completion_loss(model: PeftModel, batch: Batch) -> torch.Tensor:
    """Cross-entropy on the completion tokens; the output layer runs only where needed."""
    causal_lm = model.get_base_model()
    cache = None
    if batch.prefix.shape[1]:
        cache = causal_lm.model(input_ids=batch.prefix, use_cache=True).cache
        cache.batch_repeat_interleave(batch.ids.shape[0])
    hidden = causal_lm.model(
        input_ids=batch.ids,
        attention_mask=batch.mask,
        cache=cache,
        use_cache=cache is not None,
    ).last_hidden_state
    targets = batch.labels[:, 1:]
    where = targets != IGNORE
    logits = causal_lm.lm_head(hidden[:, :-1][where])
    return torch.nn.functional.cross_entropy(logits.float(), targets[where])


def learning_rate_share(progress: float, warmup_share: float) -> float:
    """Share of the peak rate at `progress` (0..1 of the run): linear warm-up, then
    cosine decay to a tenth of the peak."""
    if progress < warmup_share:
        return max(progress / warmup_share, 0.02)
    rest = (progress - warmup_share) / max(1e-9, 1 - warmup_share)
    return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, rest)))


def planned_steps(n_examples: int, config: TrainConfig) -> int:
    per_epoch = math.ceil(n_examples / config.batch_size)
    steps = max(1, math.ceil(per_epoch * config.epochs))
    return min(steps, config.max_steps) if config.max_steps else steps


def train(
    model: PeftModel,
    examples: Sequence[Example],
    config: TrainConfig,
    pad_id: int,
    log: Callable[[str], None] = print,
) -> TrainResult:
    """Train in place. With `config.max_minutes` the run is also paced by the clock: its
    progress is the larger of the steps' share and the time's share, so the rate still
    decays to its floor and the run ends on time on a machine slower or busier than
    planned (such a run is not step-for-step repeatable; `TrainResult.time_capped` says
    so)."""
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    total = planned_steps(len(examples), config)
    budget_s = config.max_minutes * 60 if config.max_minutes else math.inf
    params = [p for p in model.parameters() if p.requires_grad]
    optimiser = torch.optim.AdamW(params, lr=config.learning_rate,
                                  weight_decay=config.weight_decay)
    model.train()
    result = TrainResult(planned_steps=total)
    started = time.monotonic()
    batches: list[list[Example]] = []
    progress = 0.0
    while progress < 1.0:
        if not batches:
            batches = length_batches(examples, config.batch_size, rng)
        batch = batches.pop()
        rate = config.learning_rate * learning_rate_share(progress, config.warmup_share)
        for group in optimiser.param_groups:
            group["lr"] = rate
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
            loss = completion_loss(model, collate(batch, pad_id))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimiser.step()
        optimiser.zero_grad(set_to_none=True)
        result.steps += 1
        result.examples_seen += len(batch)
        result.losses.append(float(loss.detach()))
        result.seconds = time.monotonic() - started
        time_share = result.seconds / budget_s
        result.time_capped = time_share > result.steps / total
        progress = max(result.steps / total, time_share)
        if result.steps == 1 or result.steps % 10 == 0 or progress >= 1.0:
            recent = result.losses[-10:]
            log(
                f"step {result.steps}/{total} loss {result.losses[-1]:.4f} "
                f"(last {len(recent)}: {sum(recent) / len(recent):.4f}) lr {rate:.2e} "
                f"{result.seconds / result.examples_seen:.2f} s/example "
                f"{result.seconds / 60:.1f} min"
            )
    model.eval()
    return result
