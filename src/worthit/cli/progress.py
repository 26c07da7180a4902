"""Progress bars on stderr, so `--json` output on stdout stays clean."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

stderr = Console(stderr=True, soft_wrap=True)  # a long error stays one line in a log


@contextmanager
def bar(description: str, total: int | None) -> Iterator[Callable[[int], None]]:
    """Yields `update(done)`. On a terminal, a bar with the time left; otherwise (a log, a
    pipe) one line when the work starts and one when it ends, so a long run is never
    silent and a log is not filled with redraws."""
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("left"),
        TimeRemainingColumn(),
        console=stderr,
        transient=False,
        disable=not stderr.is_terminal,
    )
    if progress.disable:
        of = "" if total is None else f" ({total:,})"
        stderr.print(f"{description}{of}…", highlight=False)
    started = time.monotonic()
    latest = 0
    with progress:
        task = progress.add_task(description, total=total)

        def update(done: int) -> None:
            nonlocal latest
            latest = done
            progress.update(task, completed=done)

        yield update
    if progress.disable:
        took = time.monotonic() - started
        stderr.print(f"{description}: {latest:,} done in {took:.1f} s", highlight=False)
