"""Run a command's asyncio program while the engine owns the process's main thread.

llama.cpp's OpenMP build decodes markedly faster when `llama_decode` is called from the
initial thread (`Engine.claim_current_thread`), so a command that uses the model runs its
event loop on a second thread, as `worthit serve` runs uvicorn (service/runtime.py).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # llama.cpp's import is seconds: commands without a model skip it
    from worthit.engine.engine import Engine

T = TypeVar("T")


def run_with_engine(
    engine: Engine | None, main: Callable[[], Coroutine[Any, Any, T]], calibrate: bool = False
) -> T:
    """`asyncio.run(main())` beside `engine` (engine on this thread); closes the engine.

    `calibrate`: time a few steps first, which only deadlines need (admission decides
    from the measured step time).
    """
    if engine is None:
        return asyncio.run(main())
    outcome: list[T] = []
    failure: list[BaseException] = []

    def program() -> None:
        try:
            outcome.append(asyncio.run(main()))
        except BaseException as exc:  # re-raised on the calling thread
            failure.append(exc)
        finally:
            engine.stop()

    engine.claim_current_thread(calibrate=calibrate)
    thread = threading.Thread(target=program, name="worthit-cli")
    thread.start()
    try:
        engine.run_here()
    finally:
        engine.stop()
        thread.join()
        engine.close()
    if failure:
        raise failure[0]
    return outcome[0]
