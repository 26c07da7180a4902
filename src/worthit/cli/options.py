"""Options every command shares, and where the database lives by default."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Annotated

import typer

from worthit.decide.as_of import parse_as_of

DB_ENV = "WORTHIT_DB"


def default_db() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "worthit" / "worthit.db"


DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        envvar=DB_ENV,
        help="SQLite database of the market (default: $XDG_DATA_HOME/worthit/worthit.db).",
        show_default=False,
    ),
]

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object for machines.")]


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")
"""A URL's scheme (two characters at least, so a Windows drive is still a path). A Path
folds "postgresql://host/db" into "postgresql:/host/db", so one slash is enough."""


def db_path(db: Path | None, create: bool = True) -> Path:
    """The database path; its folder is made only for commands that may create the file.

    A URL is refused, not taken as a relative path: `--db postgresql://…` used to create a
    SQLite file under a folder named `postgresql:`."""
    if db is not None and _URL.match(str(db)):
        scheme = str(db).split(":", 1)[0]
        raise typer.BadParameter(
            f"{scheme}: URLs are not a store worthit can use; give the path of a SQLite file",
            param_hint="--db",
        )
    path = db or default_db()
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    return path


AsOfOption = Annotated[
    str | None,
    typer.Option(
        "--as-of",
        help="Answer as worthit would have at this moment, from data stamped up to it: "
        "an ISO 8601 time (2026-11-30T18:00:00Z; no zone means UTC) or a day (its end).",
        show_default=False,
    ),
]


def as_of_ms(text: str | None) -> int | None:
    """The --as-of moment in epoch ms (`decide.as_of.parse_as_of`, which the API's `as_of`
    shares), or None.

    Raises typer.BadParameter naming the option for anything else.
    """
    if text is None:
        return None
    try:
        return parse_as_of(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--as-of") from None
