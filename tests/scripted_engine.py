"""An engine whose requests stream scripted text: a unit-test fake of `Engine.submit`.

Each request takes the next script (a tuple of pieces; the last one repeats, or with
`cycle` they all take turns), records what it was asked, then ends with `finish` ("stop"
unless a test says otherwise); `refuse`
makes submissions raise as a full engine would.
"""

from __future__ import annotations

from typing import Any

from worthit.engine.engine import Delta
from worthit.engine.errors import AdmissionRefusedError
from worthit.engine.sequence import FinishReason


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


class ScriptedEngine:
    model_id = "scripted-model"

    def __init__(
        self,
        *scripts: tuple[str, ...],
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
        stream = ScriptedStream(script, self.finish)
        self.streams.append(stream)
        return stream
