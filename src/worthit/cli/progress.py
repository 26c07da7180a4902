"""Progress bars on stderr, so `--json` output on stdout stays clean."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

stderr = Console(stderr=True, soft_wrap=True)  # a long error stays one line in a log


@contextmanager
def bar(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """Yields `update(done)`; the bar disappears when stderr is not a terminal."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=stderr,
        transient=False,
        disable=not stderr.is_terminal,
    )
    with progress:
        task = progress.add_task(description, total=total)

        def update(done: int) -> None:
            progress.update(task, completed=done)

        yield update
