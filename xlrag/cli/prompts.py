"""`xlrag prompts list|show`: the localized prompt templates."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape
from rich.table import Table

from xlrag.cli._app import _fail, app, out
from xlrag.errors import XlragError
from xlrag.languages import normalize_code
from xlrag.text import first_line

prompts_app = typer.Typer(no_args_is_help=True, help="List and show the localized prompt templates.")
app.add_typer(prompts_app, name="prompts")
PromptsDirOpt = Annotated[Path | None, typer.Option("--overrides", help="folder of <lang>.yaml files overriding roles")]


@prompts_app.command("list")
def prompts_list(
    lang: Annotated[str | None, typer.Option("--lang", help="only this language")] = None,
    overrides: PromptsDirOpt = None,
) -> None:
    """Every (language, role) with where its template comes from."""
    from xlrag.prompts import PromptLibrary

    try:
        lib = PromptLibrary(overrides_dir=overrides)
        if lang:
            code = normalize_code(lang)
            rows = [(code, role, src, first_line(tmpl)) for role, src, tmpl in lib.entries(code)]
        else:
            rows = lib.rows()
    except XlragError as e:
        _fail(e)
    table = Table(title="prompt templates")
    for col, width in (("lang", 4), ("role", 15), ("source", 11)):
        table.add_column(col, no_wrap=True, min_width=width)
    table.add_column("first line", no_wrap=True)
    room = max(20, out.width - 45)
    for code, role, source, first in rows:
        table.add_row(code, role, escape(source), escape(first if len(first) <= room else first[: room - 1] + "…"))
    out.print(table)


@prompts_app.command("show")
def prompts_show(
    lang: Annotated[str, typer.Argument(help="language code, e.g. ar, zh-Hant, sw")],
    role: Annotated[str | None, typer.Option("--role", help="only this role")] = None,
    overrides: PromptsDirOpt = None,
) -> None:
    """The templates one language uses (falling back to English where it has none)."""
    from xlrag.prompts import PromptLibrary

    try:
        lib = PromptLibrary(overrides_dir=overrides)
        entries = lib.entries(lang)
        if role:
            lib.get(role, lang)  # unknown role → ConfigError listing the roles
            entries = [e for e in entries if e[0] == role]
    except XlragError as e:
        _fail(e)
    for name, source, template in entries:
        out.rule(f"[bold]{name}[/]  ({escape(source)})")
        out.print(template, highlight=False, markup=False)


