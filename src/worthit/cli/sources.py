"""`worthit sources add|list|remove`: who may post signed webhooks to /v1/webhooks/{name}.

Unlike an API key, a source's secret stays readable in the database: verifying an
HMAC signature needs the secret itself. `add` prints it for the sender's configuration;
a leaked copy of the database (or of the secret) is answered by removing the source and
adding it again, which draws a new secret.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich import box
from rich.console import Console
from rich.table import Table

from worthit.cli.errors import user_errors
from worthit.cli.options import DbOption, JsonOption, db_exists, market_db
from worthit.cli.progress import stderr
from worthit.market.ingest.webhook_sources import (
    SourceExistsError,
    SourceNotFoundError,
    SourceStore,
)
from worthit.service.tenants import TenantStore

sources_app = typer.Typer(
    name="sources",
    help="Webhook sources: add, list and remove them (each with its signing secret).",
    no_args_is_help=True,
)

NameArgument = Annotated[
    str, typer.Argument(help="The source's name: the {source} of /v1/webhooks/{source}.")
]


@sources_app.command("add")
@user_errors
def add_command(name: NameArgument, db: DbOption = None, as_json: JsonOption = False) -> None:
    """Register a source and print its new secret (whsec_…) for the sender to sign with."""
    bound = TenantStore(market_db(db)).bound_to(name)
    if bound:
        ids = ", ".join(k.key_id for k in bound)
        stderr.print(
            f"[red]error:[/] events keys write as {name!r} ({ids}): revoke them first, so "
            "the source's events are the signed ones only",
            highlight=False,
        )
        raise typer.Exit(2)
    store = SourceStore(market_db(db))
    try:
        secret = store.add(name)
    except ValueError as error:  # a bad name, or SourceExistsError
        stderr.print(f"[red]error:[/] {error}", highlight=False)
        raise typer.Exit(1 if isinstance(error, SourceExistsError) else 2) from None
    if as_json:
        print(json.dumps({"name": name, "secret": secret, "path": f"/v1/webhooks/{name}"}))
    else:
        print(secret)
    stderr.print(
        f"[yellow]Added source {name!r}: the sender signs POST /v1/webhooks/{name} with this "
        "secret (Standard Webhooks). It is stored readable in the database, so keep the "
        "file private.[/]",
        highlight=False,
    )


@sources_app.command("list")
@user_errors
def list_command(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Every source (never its secret)."""
    sources = _store(db).list()
    if as_json:
        print(json.dumps([source.to_dict() for source in sources]))
        return
    if not sources:
        stderr.print("no webhook sources yet (add one with `worthit sources add NAME`)")
        return
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("source", overflow="fold")
    table.add_column("webhook path", overflow="fold")
    table.add_column("created (UTC)", no_wrap=True)
    for source in sources:
        table.add_row(source.name, f"/v1/webhooks/{source.name}", source.created)
    Console(highlight=False).print(table)


@sources_app.command("remove")
@user_errors
def remove_command(name: NameArgument, db: DbOption = None) -> None:
    """Remove a source: its webhooks are refused (401) from the next request on."""
    try:
        _store(db).remove(name)
    except SourceNotFoundError as error:
        stderr.print(f"[red]error:[/] {error}", highlight=False)
        raise typer.Exit(1) from None
    print(f"removed source {name}")


def _store(db: DbOption) -> SourceStore:
    path = market_db(db)
    if not db_exists(path):
        stderr.print(f"[red]error:[/] no database at {path}")
        raise typer.Exit(2)
    return SourceStore(path)
