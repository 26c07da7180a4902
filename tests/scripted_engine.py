"""An engine whose requests stream scripted text: a unit-test fake of `Engine.submit`.

Each request takes the next script (a tuple of pieces; the last one repeats, or with
`cycle` they all take turns), records what it was asked, then ends with `finish` ("stop"
unless a test says otherwise); `refuse`
makes submissions raise as a full engine would.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from worthit.engine.errors import AdmissionRefusedError
from worthit.engine.sequence import FinishReason
from worthit.engine.streams import Delta


class ScriptedStream:
    def __init__(self, pieces: tuple[str, ...], finish: FinishReason = FinishReason.STOP) -> None:
        self.pieces = list(pieces)
        self.finish = finish
        self.consumed = 0
        self.completion = None
        self.aborted = False

    def __aiter__(self) -> ScriptedStream:
        return self

    async def __anext__(self) -> Delta:
        if self.consumed < len(self.pieces):
            self.consumed += 1
            return Delta("r", self.pieces[self.consumed - 1], ())
        if self.consumed == len(self.pieces):
            self.consumed += 1
            return Delta("r", "", (), self.finish)
        raise StopAsyncIteration

    def abort(self) -> None:
        self.aborted = True


Script = tuple[str, ...] | Callable[[dict[str, Any]], tuple[str, ...]]
"""Pieces to stream, or a function of the request that makes them."""


def restating(request: dict[str, Any]) -> tuple[str, ...]:
    """A faithful answer for any product: the prompt's first reason, restated after the
    answer's prefix ("Worth buying now because at $242.20 it is within 0.1% of …"), in two
    pieces so the flow sees a stream. The strict checker accepts it wherever the reason is
    the verdict's strongest, which is what the prompt leads with."""
    lines = request["messages"][-1]["content"].splitlines()
    first = next(line[2:] for line in lines if line.startswith("- "))
    zh = "\u4e00" <= request["answer_prefix"][-1] <= "\u9fff"
    text = first if zh else " " + first[0].lower() + first[1:]
    middle = len(text) // 2
    return text[:middle], text[middle:]


class ScriptedEngine:
    model_id = "scripted-model"

    def __init__(
        self,
        *scripts: Script,
        refuse: bool = False,
        cycle: bool = False,
        finish: FinishReason = FinishReason.STOP,
    ) -> None:
        self.finish = finish
        self.scripts = list(scripts)
        self.calls: list[dict[str, Any]] = []
        self.streams: list[ScriptedStream] = []
        self.refuse = refuse
        self.cycle = cycle

    def submit(self, **request: Any) -> ScriptedStream:
        self.calls.append(request)
        if self.refuse:
            raise AdmissionRefusedError("r", "deadline", 5.0, 0.7)
        if self.cycle:
            script = self.scripts[(len(self.calls) - 1) % len(self.scripts)]
        else:
            script = self.scripts.pop(0) if len(self.scripts) > 1 else self.scripts[0]
        pieces = script(request) if callable(script) else script
        stream = ScriptedStream(pieces, self.finish)
        self.streams.append(stream)
        return stream
