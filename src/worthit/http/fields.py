"""Field types shared by the request bodies.

JSON may carry an unpaired UTF-16 surrogate (``"\\ud800"``); Python decodes it into a
`str` that cannot be encoded back to UTF-8, so it would fail deep inside the tokenizer or
the response writer as a 500. `Text` refuses it at validation, naming the field.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator


def _encodable(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"contains an unpaired surrogate (\\u{ord(value[exc.start]):04x}) at {exc.start}"
        ) from None
    return value


ENCODABLE = AfterValidator(_encodable)
Text = Annotated[str, ENCODABLE]
"""A string that is valid Unicode text. A bounded one is
``Annotated[str, StringConstraints(...), ENCODABLE]``: with the constraints before the
check, pydantic states a limit as a string's ("at most 500 characters"); after it, as a
generic value's ("at most 500 items after validation")."""
