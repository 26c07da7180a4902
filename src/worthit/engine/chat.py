"""Chat messages to prompt text with the model's own template, and fitting a long
conversation into the context.

The template is the Jinja ``tokenizer.chat_template`` stored in the GGUF, rendered in a
sandbox (it is data from a file, not code we wrote). A conversation that does not fit
keeps its system messages and its newest turns: the system prompt carries the product
facts and the newest turn carries the question, and dropping whole turns never cuts a
token or a character in half. ``PromptBuilder`` turns a request's raw prompt or chat
messages into the token ids the engine runs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from worthit.engine.errors import PromptTooLongError

ChatMessage = Mapping[str, str]
"""{"role": "system" | "user" | "assistant", "content": "..."}"""

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
"""Used when the GGUF carries no template."""


def _raise(message: str) -> None:
    from jinja2.exceptions import TemplateError

    raise TemplateError(message)


class ChatTemplate:
    def __init__(self, source: str | None, bos_token: str = "", eos_token: str = "") -> None:
        # jinja2 only where a template is compiled: a command that answers without the
        # model (`ask --no-llm`) imports this module but never builds one
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        self.source = source or CHATML
        self._template = env.from_string(self.source)
        self._bos = bos_token
        self._eos = eos_token

    def render(self, messages: Sequence[ChatMessage], add_generation_prompt: bool = True) -> str:
        context: dict[str, Any] = {
            "messages": [dict(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self._bos,
            "eos_token": self._eos,
        }
        return self._template.render(**context)


def validate_messages(messages: Sequence[ChatMessage]) -> None:
    if not messages:
        raise ValueError("messages must not be empty")
    for i, message in enumerate(messages):
        if message.get("role") not in ("system", "user", "assistant"):
            raise ValueError(f"messages[{i}].role must be system, user or assistant")
        if not isinstance(message.get("content"), str):
            raise ValueError(f"messages[{i}].content must be a string")


def fit_messages(
    messages: Sequence[ChatMessage],
    count_tokens: Callable[[Sequence[ChatMessage]], int],
    limit: int,
) -> tuple[list[ChatMessage], int]:
    """Drop the oldest non-system turns until the prompt fits in limit tokens.

    Returns the kept messages and how many were dropped. The last message is never
    dropped; if it cannot fit with the system messages, PromptTooLongError says so.
    """
    kept = list(messages)
    dropped = 0
    n = count_tokens(kept)
    while n > limit:
        first = next((i for i, m in enumerate(kept) if m["role"] != "system"), None)
        if first is None or first == len(kept) - 1:
            raise PromptTooLongError(n, limit)
        del kept[first]
        dropped += 1
        n = count_tokens(kept)
    return kept, dropped


class PromptBuilder:
    """A request's prompt as token ids that fit the context (``limit`` tokens)."""

    def __init__(
        self, tokenize: Callable[[str], list[int]], template: ChatTemplate, limit: int
    ) -> None:
        self._tokenize = tokenize
        self._template = template
        self.limit = limit

    def count(self, messages: Sequence[ChatMessage], answer_prefix: str = "") -> int:
        return len(self._tokenize(self._template.render(messages) + answer_prefix))

    def tokens(
        self,
        prompt: str | Sequence[int] | None,
        messages: Sequence[ChatMessage] | None,
        max_tokens: int,
        answer_prefix: str = "",
    ) -> tuple[list[int], int]:
        """The prompt's tokens and how many old turns were dropped for them. Messages
        leave room for min(max_tokens, half the context) of answer."""
        if (prompt is None) == (messages is None):
            raise ValueError("give exactly one of prompt or messages")
        if messages is not None:
            validate_messages(messages)
            reserve = min(max_tokens, self.limit // 2)
            kept, dropped = fit_messages(
                messages, lambda m: self.count(m, answer_prefix), self.limit - reserve
            )
            return self._tokenize(self._template.render(kept) + answer_prefix), dropped
        tokens = self._tokenize(prompt) if isinstance(prompt, str) else list(prompt or ())
        if not tokens:
            raise ValueError("prompt must not be empty")
        if len(tokens) >= self.limit:
            raise PromptTooLongError(len(tokens), self.limit - 1)
        return tokens, 0
