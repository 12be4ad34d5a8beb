"""Shared pieces of the ``xlrag`` command line: the typer app, consoles, common options."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from xlrag.modes import IRMode

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Cross-lingual RAG: index, retrieve, inspect.")
out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)

ConfigOpt = Annotated[Path | None, typer.Option("--config", help="xlrag.yaml to read (default: ./xlrag.yaml if present)")]
IndexDirOpt = Annotated[Path | None, typer.Option("--index-dir", "-i", help="index directory")]
# the IR modes, as the help lists them (from the one owner, xlrag.modes)
MODE_NAMES = ", ".join(m.value for m in IRMode)
EmbedderOpt = Annotated[str | None, typer.Option("--embedder", help="embedder name: local, openai, cohere, mistral")]


def _fail(e: Exception) -> NoReturn:
    # escape(): messages carry pip extras like 'xlrag[openai]' that rich would eat as markup.
    err.print(f"[bold red]error:[/] {escape(str(e))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def warn(message: str, label: str = "warning") -> None:
    """One line on stderr; ``message`` is printed verbatim (corpus rows and notes hold ``[...]``)."""
    err.print(f"[yellow]{escape(label)}:[/] {escape(message)}", highlight=False, soft_wrap=True)


def echo(message: str) -> None:
    """One line of dynamic text on stdout, verbatim: no markup, no highlighting."""
    out.print(message, markup=False, highlight=False, soft_wrap=True)


def _config(config: Path | None, **overrides: Any):
    from xlrag.config import load_config

    return load_config(config, **{k: v for k, v in overrides.items() if v})


def _csv(value: str | None) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()] if value else []

