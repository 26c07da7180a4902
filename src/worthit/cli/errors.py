"""Mistakes a user can make that end in a message and exit code 2, never a traceback.

Every command can be pointed at a file that is not a worthit database, a PostgreSQL that
does not answer, a database from a newer worthit, or a model file that is missing or that
llama.cpp cannot load; the message names what was wrong.
"""

from __future__ import annotations

import functools
import sqlite3
import sys
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import typer

from worthit.cli.progress import stderr
from worthit.db.migrations import SchemaTooNewError
from worthit.engine.errors import ModelLoadError
from worthit.engine.model_files import ModelNotFoundError

EXIT_USAGE = 2

P = ParamSpec("P")
R = TypeVar("R")


def user_errors(command: Callable[P, R]) -> Callable[P, R]:
    """The command, with the user's mistakes turned into `error: …` and exit code 2."""

    @functools.wraps(command)
    def guarded(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (SchemaTooNewError, ModelNotFoundError, ModelLoadError) as exc:
            stderr.print(f"[red]error:[/] {exc}")
        except Exception as exc:
            if not _database_error(exc):
                raise
            stderr.print(f"[red]error:[/] cannot use the --db database: {exc}")
        raise typer.Exit(EXIT_USAGE)

    return guarded


def _database_error(exc: Exception) -> bool:
    """sqlite3's, or psycopg's once a PostgreSQL --db imported it (never imported here)."""
    psycopg = sys.modules.get("psycopg")
    return isinstance(exc, sqlite3.DatabaseError) or (
        psycopg is not None and isinstance(exc, psycopg.Error)
    )
