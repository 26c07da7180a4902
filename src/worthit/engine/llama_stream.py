"""The simplest real runner: one llama.cpp model in-process, one stream at a time.

It serialises requests behind a lock, which is fine for the CLI; the batching engine
serves many requests at once and replaces it in the server. The prompt is rendered with
the chat template stored in the GGUF, so an answer can be started for the model (an
`answer_prefix`), which keeps a small model on topic far better than instructions do.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from worthit.engine.chat import ChatTemplate
from worthit.engine.errors import ModelLoadError
from worthit.engine.model_files import resolve_model_path

DEFAULT_CONTEXT = 2048


class LlamaStreamer:
    def __init__(
        self,
        model_path: str | Path | None = None,
        n_ctx: int = DEFAULT_CONTEXT,
        n_threads: int | None = None,
        seed: int = 0,
    ) -> None:
        from llama_cpp import Llama

        self.model_path = resolve_model_path(model_path)
        try:
            self._llama: Any = Llama(
                model_path=str(self.model_path),
                n_ctx=n_ctx,
                n_threads=n_threads or min(4, os.cpu_count() or 1),
                seed=seed,
                flash_attn=True,  # as the engine runs it (EngineConfig.flash_attn)
                verbose=False,
            )
        except ValueError as exc:  # what llama-cpp-python raises for a file it cannot load
            raise ModelLoadError(f"llama.cpp could not load {self.model_path}: {exc}") from None
        self._lock = threading.Lock()
        self._template = _chat_template(self._llama)

    @property
    def model_id(self) -> str:
        return self.model_path.name

    def render(self, messages: list[dict[str, str]], answer_prefix: str = "") -> str:
        return self._template.render(messages) + answer_prefix

    def stream(
        self,
        messages: list[dict[str, str]],
        max_tokens: int = 64,
        temperature: float = 0.0,
        stop: list[str] | None = None,
        answer_prefix: str = "",
    ) -> Iterator[str]:
        """Yields the text after `answer_prefix`; stop iterating early to cut generation."""
        prompt = self.render(messages, answer_prefix)
        with self._lock:
            chunks = self._llama.create_completion(
                prompt=prompt,
                max_tokens=max_tokens,
                temperature=temperature,
                stop=stop,
                stream=True,
            )
            try:
                for chunk in chunks:
                    text = chunk["choices"][0]["text"]
                    if text:
                        yield text
            finally:
                chunks.close()

    def count_tokens(self, text: str) -> int:
        return len(self._llama.tokenize(text.encode(), add_bos=False, special=True))


def _chat_template(llama: Any) -> ChatTemplate:
    """The GGUF's own chat template (the engine's renderer; ChatML when there is none)."""
    eos = llama.detokenize([llama.token_eos()], special=True).decode(errors="ignore")
    bos = llama.detokenize([llama.token_bos()], special=True).decode(errors="ignore")
    return ChatTemplate(llama.metadata.get("tokenizer.chat_template"), bos, eos)
