"""`worthit keys create|list|revoke`: who may call the server, how often, how urgently.

A plain key asks, reads and watches; `--scope events --source NAME` makes a key that only
writes market events, as source NAME. A name registered as a webhook source
(`worthit sources add`) signs with its own secret and gets no key.

The plaintext key exists only in `create`'s output: the store keeps its hash, so a
lost key is revoked and replaced, never recovered.
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
from worthit.market.ingest.webhook_sources import SourceStore
from worthit.service.tenants import (
    ID_HEX_CHARS,
    KEY_PREFIX,
    MAX_PER_MINUTE,
    ApiKeyInfo,
    KeyNotFoundError,
    KeyScope,
    PriorityClass,
    TenantStore,
)

DEFAULT_RPM = 600
DEFAULT_TPM = 20_000

keys_app = typer.Typer(
    name="keys",
    help="API keys: create, list and revoke them (stored hashed beside the market).",
    no_args_is_help=True,
)


@keys_app.command("create")
@user_errors
def create_command(
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Tenant the key belongs to (events keys: the source)."),
    ] = None,
    priority: Annotated[
        PriorityClass | None,
        typer.Option(
            "--priority",
            case_sensitive=False,
            help="Scheduling class of its requests (events keys: medium).",
        ),
    ] = None,
    scope: Annotated[
        KeyScope,
        typer.Option(
            "--scope",
            case_sensitive=False,
            help="ask: asks, reads and watches; events: writes market events as --source.",
        ),
    ] = KeyScope.ASK,
    source: Annotated[
        str | None,
        typer.Option("--source", help="The event source an events key writes as."),
    ] = None,
    rpm: Annotated[
        int, typer.Option("--rpm", min=1, max=MAX_PER_MINUTE, help="Requests per minute.")
    ] = DEFAULT_RPM,
    tpm: Annotated[
        int, typer.Option("--tpm", min=1, max=MAX_PER_MINUTE, help="LLM tokens per minute.")
    ] = DEFAULT_TPM,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Issue a key and print it once: only its hash is stored."""
    path = market_db(db)
    if scope is KeyScope.EVENTS:
        if source is None:
            stderr.print("[red]error:[/] a key of scope events needs --source NAME")
            raise typer.Exit(2)
        tenant = tenant or source
        priority = priority or PriorityClass.MEDIUM
    if tenant is None or priority is None:
        stderr.print("[red]error:[/] a key of scope ask needs --tenant and --priority")
        raise typer.Exit(2)
    if source is not None and SourceStore(path).secret(source) is not None:
        stderr.print(
            f"[red]error:[/] {source!r} is a webhook source: it signs with its own secret "
            "(worthit sources), so no key writes as it",
            highlight=False,
        )
        raise typer.Exit(2)
    store = TenantStore(path)
    try:
        key_id, key = store.create(tenant, priority, rpm, tpm, scope=scope, source=source)
    except ValueError as error:
        stderr.print(f"[red]error:[/] {error}", highlight=False)
        raise typer.Exit(2) from None
    info = store.get(key_id)
    assert info is not None  # just written
    if as_json:
        print(json.dumps({**info.to_dict(), "key": key}))
    else:
        print(key)
    what = f"writes events as source {source!r}" if scope is KeyScope.EVENTS else "asks"
    stderr.print(
        f"[yellow]Created {key_id} for tenant {tenant!r} ({what}; {priority.value}, {rpm} "
        f"req/min, {tpm} LLM tokens/min). Store the key now: it will not be shown again.[/]",
        highlight=False,
    )


@keys_app.command("list")
@user_errors
def list_command(db: DbOption = None, as_json: JsonOption = False) -> None:
    """Every key, revoked ones included (never the key itself)."""
    keys = _store(db).list()
    if as_json:
        print(json.dumps([k.to_dict() for k in keys]))
        return
    if not keys:
        stderr.print("no API keys yet (create one with `worthit keys create`)")
        return
    Console(highlight=False).print(_table(keys))


@keys_app.command("revoke")
@user_errors
def revoke_command(
    key_id: Annotated[str, typer.Argument(help="The key id (wk_…) from `keys list`.")],
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a key; a running server refuses it (403) within a few seconds."""
    try:
        info = _store(db).revoke(key_id)
    except KeyNotFoundError as error:
        stderr.print(f"[red]error:[/] {error}", highlight=False)
        raise typer.Exit(1) from None
    if as_json:
        print(json.dumps(info.to_dict()))
    else:
        print(f"revoked {info.key_id} (tenant {info.tenant}) at {info.revoked_at}")


def _store(db: DbOption) -> TenantStore:
    path = market_db(db)
    if not db_exists(path):
        stderr.print(f"[red]error:[/] no database at {path}")
        raise typer.Exit(2)
    return TenantStore(path)


def _table(keys: list[ApiKeyInfo]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, padding=(0, 1, 0, 0))
    table.add_column("key id", no_wrap=True, min_width=len(KEY_PREFIX) + ID_HEX_CHARS)
    table.add_column("tenant", overflow="fold", min_width=6)
    table.add_column("scope", no_wrap=True)
    table.add_column("priority", no_wrap=True)
    table.add_column("rpm", justify="right", no_wrap=True)
    table.add_column("tpm", justify="right", no_wrap=True)
    table.add_column("created", no_wrap=True)
    table.add_column("status (UTC)", min_width=16)
    for k in keys:
        status = f"revoked {_minute(k.revoked_at)}" if k.revoked_at else "active"
        table.add_row(
            k.key_id,
            k.tenant,
            k.scope.value if k.source is None else f"events:{k.source}",
            k.priority.value,
            str(k.requests_per_minute),
            str(k.llm_tokens_per_minute),
            k.created[:10],
            status,
            style="dim" if k.revoked else None,
        )
    return table


def _minute(timestamp: str) -> str:
    """`2026-11-30T04:55:49Z` → `2026-11-30 04:55`, so the table fits 80 columns."""
    return timestamp[:16].replace("T", " ")
