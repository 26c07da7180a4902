"""Opening a database by where it is: a SQLite file path, or a ``postgresql://`` URL."""

from __future__ import annotations

import re
from pathlib import Path

from worthit.db.connection import Setup, Store
from worthit.db.sqlite import Database

POSTGRES_SCHEMES = ("postgresql", "postgres")
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+):/")
"""A URL's scheme (two characters at least, so a Windows drive is still a path). A Path
folds "postgresql://host/db" into "postgresql:/host/db", so one slash is enough."""


def url_scheme(target: str | Path) -> str | None:
    """The scheme of a database URL, None for a file path."""
    match = _URL.match(str(target))
    return match.group(1).lower() if match else None


def is_postgres(target: str | Path) -> bool:
    return url_scheme(target) in POSTGRES_SCHEMES


def open_database(target: str | Path, setup: Setup | None = None) -> Store:
    """The database at `target`: a SQLite file path, or a ``postgresql://`` URL.

    psycopg is imported only for a URL, so the embedded default never pays for it."""
    if is_postgres(target):
        from worthit.db.postgres import PostgresDatabase

        return PostgresDatabase(str(target), setup)
    return Database(target, setup)
