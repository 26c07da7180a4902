"""Options every command shares, and where the database lives by default."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

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


def db_path(db: Path | None, create: bool = True) -> Path:
    """The database path; its folder is made only for commands that may create the file."""
    path = db or default_db()
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    return path
