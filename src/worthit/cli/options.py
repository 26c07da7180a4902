"""Options every command shares, and where the database lives by default."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path
from typing import Annotated
from urllib.parse import urlsplit, urlunsplit

import typer

from worthit.audit.store import AuditPaths
from worthit.db.open import POSTGRES_SCHEMES, is_postgres, url_scheme
from worthit.decide.as_of import check_as_of, parse_as_of
from worthit.engine.model_files import LORA_ENV, resolve_lora_path, resolve_model_path
from worthit.explain.adapter import bundled_adapter_path
from worthit.market.store import MarketStore
from worthit.text.time import now_ms

DB_ENV = "WORTHIT_DB"


def default_db() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "worthit" / "worthit.db"


DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        envvar=DB_ENV,
        help="The market's database: a SQLite file (default: "
        "$XDG_DATA_HOME/worthit/worthit.db) or a postgresql:// URL.",
        show_default=False,
    ),
]

JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object for machines.")]

LoraOption = Annotated[
    str | None,
    typer.Option(
        "--lora",
        envvar=LORA_ENV,
        help="A LoRA adapter (GGUF) trained on --model, or 'none'. Default: the bundled "
        "explanation adapter with the bundled model, none with any other model.",
        show_default=False,
    ),
]


class Weights(StrEnum):
    """What llama.cpp computes with (`engine serve --weights`)."""

    UPCAST = "upcast"
    """A Q4_1 or Q5 file upcast to Q8_0, an adapter folded in (`engine.weights`): prompts
    and batches of eight compute 1.2-1.7x faster."""
    AS_IS = "as-is"
    """The file as named, an adapter applied at run time: one or two answers decoding
    together read fewer bytes a step, 1.1-1.2x faster where memory bounds them."""


WeightsOption = Annotated[
    Weights,
    typer.Option(
        "--weights",
        help="upcast: Q4_1/Q5 files computed as Q8_0, an adapter folded in (faster "
        "prompts and large batches); as-is: the file as named (faster lone answers, "
        "e.g. a deadline-bound server on 2 cores). The explanation store keys on what "
        "is loaded, so write and serve it with the same choice.",
    ),
]


def model_files(
    model: Path | None, lora: str | None, weights: Weights = Weights.UPCAST
) -> tuple[Path, Path | None]:
    """The GGUF to load and the adapter to apply to it at run time (`--model`, `--lora`):
    the adapter is chosen for the file the user named and, with `Weights.UPCAST`, folded
    into the weights where it can be, which are upcast where that computes faster
    (`engine.weights`)."""
    path = resolve_model_path(model)
    adapter = resolve_lora_path(lora, path, bundled_adapter_path())
    if weights is Weights.AS_IS:
        return path, adapter
    from worthit.engine.weights import weights_for  # llama.cpp: only where a model loads

    return weights_for(path, adapter)


def db_path(db: str | Path | None, create: bool = True) -> Path:
    """The SQLite file's path; its folder is made only for commands that may create it.

    A URL is refused, not taken as a relative path: `--db postgresql://…` used to create a
    SQLite file under a folder named `postgresql:`. Commands that take a PostgreSQL URL
    too call :func:`market_db`."""
    scheme = url_scheme(db) if db is not None else None
    if scheme is not None:
        known = " or a postgresql:// URL" if scheme not in POSTGRES_SCHEMES else ""
        raise typer.BadParameter(
            f"{scheme}: URLs are not a store this command can use; give the path of a "
            f"SQLite file{known}",
            param_hint="--db",
        )
    path = Path(db) if db is not None else default_db()
    if create:
        path.parent.mkdir(parents=True, exist_ok=True)
    return path


def market_db(db: str | Path | None, create: bool = True) -> str | Path:
    """The market's database: a ``postgresql://`` URL as given (its stores open the same
    tables there), else the SQLite file's path (:func:`db_path`)."""
    if db is not None and is_postgres(db):
        from psycopg.conninfo import conninfo_to_dict

        url = str(db)
        try:
            conninfo_to_dict(url)
        except Exception as exc:  # psycopg says ProgrammingError for a malformed URL
            raise typer.BadParameter(f"not a PostgreSQL URL: {exc}", param_hint="--db") from None
        return url
    return db_path(db, create)


def shown(target: str | Path) -> str:
    """The database as a message names it: a URL without its password."""
    if isinstance(target, Path):
        return str(target)
    parts = urlsplit(target)
    if parts.password is None:
        return target
    netloc = f"{parts.username or ''}:***@{parts.hostname or ''}"
    netloc += f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=netloc))


def db_exists(target: str | Path) -> bool:
    """Whether there is a market to read: a file that exists, or any PostgreSQL URL (its
    database is made when missing, and then holds no products)."""
    return isinstance(target, str) or target.exists()


def audit_paths(target: str | Path, audit_db: Path | None = None) -> AuditPaths:
    """Where the audit log is: `audit_db` when given, beside a SQLite market file, and for
    a PostgreSQL market a file named for its database in worthit's data folder
    (``$XDG_DATA_HOME/worthit/<dbname>.audit.db``): the log stays SQLite, on local disk."""
    if audit_db is not None:
        return AuditPaths.of_log(audit_db)
    if isinstance(target, Path):
        return AuditPaths.beside(target)
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(target)
    name = str(params.get("dbname") or params.get("user") or "postgres")
    folder = default_db().parent
    folder.mkdir(parents=True, exist_ok=True)
    return AuditPaths.of_log(folder / f"{name}.audit.db")


AuditDbOption = Annotated[
    Path | None,
    typer.Option(
        "--audit-db",
        help="The audit log's SQLite file (default: beside a SQLite --db; for a PostgreSQL "
        "--db, $XDG_DATA_HOME/worthit/<dbname>.audit.db).",
        show_default=False,
    ),
]


StalePriceOption = Annotated[
    float,
    typer.Option(
        "--stale-price-days",
        min=1.0,
        help="A product whose last price is older than this many days gets no price "
        "verdict (INSUFFICIENT_DATA, stale_price): its feed stopped or fell behind.",
    ),
]


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


def refuse_unanswerable(moment: int | None, store: MarketStore) -> None:
    """Refuse an --as-of moment the API's `as_of` refuses (`decide.as_of.check_as_of`, the
    one definition): one still to come, or one before the market's first price.

    Raises typer.BadParameter naming the option.
    """
    if moment is None:
        return
    span = store.price_span()
    try:
        check_as_of(moment, now_ms(), None if span is None else span[0])
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--as-of") from None
