"""`worthit facts SKU`: the fact sheet a verdict is computed from."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from worthit.cli.options import (
    AsOfOption,
    DbOption,
    JsonOption,
    as_of_ms,
    db_exists,
    market_db,
    refuse_unanswerable,
)
from worthit.cli.progress import stderr
from worthit.cli.render import facts_table
from worthit.facts.builder import FactsBuilder
from worthit.market.store import MarketStore


def facts_command(
    sku: Annotated[str, typer.Argument(help="The product's SKU.")],
    db: DbOption = None,
    as_of: AsOfOption = None,
    as_json: JsonOption = False,
) -> None:
    """Print one product's fact sheet as of now (or as of --as-of)."""
    path = market_db(db, create=False)
    if not db_exists(path):
        stderr.print(f"[red]error:[/] no database at {path} (run `worthit simulate` first)")
        raise typer.Exit(2)
    moment = as_of_ms(as_of)
    store = MarketStore(path)
    refuse_unanswerable(moment, store)
    sheet = FactsBuilder(store).build(sku, at_ms=moment)
    if sheet is None:
        stderr.print(f"[red]error:[/] unknown sku {sku!r}")
        raise typer.Exit(3)
    if as_json:
        print(json.dumps(sheet.to_dict(), ensure_ascii=False))
    else:
        Console(highlight=False).print(facts_table(sheet))
