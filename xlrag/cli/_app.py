"""Shared pieces of the ``xlrag`` command line: the typer app, consoles, common options."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from xlrag.config import AnswerConfig, LLMConfig, XlragConfig, load_config
from xlrag.errors import XlragWarning
from xlrag.modes import IRMode
from xlrag.registry import available
from xlrag.schema import CHANNELS, QueryFields
from xlrag.text import strip_controls

# the help of the root and of each group names every one of its commands (tests/test_cli_surface.py)
ROOT_HELP = ("Cross-lingual RAG: index a corpus into language stores (info, check and delete manage it), "
             "retrieve passages, ask and chat for cited answers in the question's language, serve them over "
             "HTTP, eval retrieval and answers; demo builds a sample index and answers over it; models and "
             "prompts list the local models and the prompt templates.")

def _flag_has_no_type(self: Any, ctx: Any) -> str | None:
    # typer 0.29 labels every option with its type, switches too ("--json <bool>"), which reads as
    # if the switch took a value; a switch shows none, an option with a value keeps its label
    return None if self.is_flag else _typed(self, ctx)


_typed = typer.core.TyperOption.display_type_rich
typer.core.TyperOption.display_type_rich = _flag_has_no_type  # type: ignore[method-assign]

app = typer.Typer(add_completion=False, no_args_is_help=True, context_settings={"help_option_names": ["-h", "--help"]},
                  help=ROOT_HELP)


def _version(value: bool) -> None:
    if value:
        from xlrag import __version__

        typer.echo(f"xlrag {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="print the version and exit")] = False) -> None:
    pass  # the group's help is ROOT_HELP: a docstring here would replace it


out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)


def config_default(setting: str) -> str:
    """``(default: retrieval.k from config, 5)``: where an option left unset takes its value.
    ``setting`` is the dotted path in :class:`~xlrag.config.XlragConfig`, the value its default
    there (one owner: the help cannot drift from the config model)."""
    value: Any = XlragConfig.model_construct()
    for part in setting.split("."):
        value = getattr(value, part)
    if isinstance(value, list):
        value = ",".join(map(str, value))
    if isinstance(value, bool):
        value = str(value).lower()  # as the YAML file spells it
    # parentheses: typer reads [...] in help as rich markup
    return f"(default: {setting} from config, {value})"


# Option names used by several commands, each with one meaning everywhere (tests/test_cli_surface.py)
TOP_K = ("--top-k", "-k")
OUT = ("--out", "-o")
ConfigOpt = Annotated[Path | None, typer.Option("--config", help=(
    "xlrag.yaml to read (default: ./xlrag.yaml if present); XLRAG_* variables override it, options override both"))]
IndexDirOpt = Annotated[Path | None,
                        typer.Option("--index-dir", "-i", help=f"index directory {config_default('index_dir')}")]
# the IR modes, as the help lists them (from the one owner, xlrag.modes)
MODE_NAMES = ", ".join(m.value for m in IRMode)
EmbedderOpt = Annotated[str | None, typer.Option(
    "--embedder", help=f"embedder name: local, openai, cohere, mistral {config_default('embedder.name')}")]
LLMOpt = Annotated[str | None, typer.Option(
    "--llm", help=f"provider:model, e.g. local, openai:gpt-4o-mini {config_default('llm.provider')}")]
def _fusions() -> list[str]:
    return available("fusion")  # the registry is the one list of fusion methods


FusionOpt = Annotated[str | None, typer.Option(
    "--fusion", help=f"how the rankings of several language stores merge: {', '.join(_fusions())} "
                     f"{config_default('retrieval.fusion')}")]
ChannelsOpt = Annotated[str | None, typer.Option(
    "--channels", help=f"comma-separated, how each store is searched: {', '.join(CHANNELS)} "
                       f"{config_default('retrieval.channels')}")]
# a question's fields, their help from the one owner (xlrag.schema.QueryFields)
_QF = QueryFields.model_fields
LangOpt = Annotated[str | None, typer.Option("--lang", help=_QF["lang"].description)]
RelevantLangsOpt = Annotated[str | None, typer.Option(
    "--relevant-langs", help=f"comma-separated: {_QF['relevant_langs'].description}")]
TargetLangOpt = Annotated[str | None, typer.Option("--target-lang", help=_QF["target_lang"].description)]
# its help from the one owner of the setting (AnswerConfig.explanation)
ExplanationOpt = Annotated[bool | None, typer.Option(
    "--explanation/--no-explanation",
    help=f"{AnswerConfig.model_fields['explanation'].description} {config_default('answer.explanation')}")]


def _fail(e: Exception) -> NoReturn:
    # escape(): messages carry pip extras like 'xlrag[openai]' that rich would eat as markup.
    err.print(f"[bold red]error:[/] {shown(str(e))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code=2)


def warn(message: str, label: str = "warning") -> None:
    """One line on stderr; ``message`` is printed verbatim (corpus rows and notes hold ``[...]``)."""
    err.print(f"[yellow]{escape(label)}:[/] {shown(message)}", highlight=False, soft_wrap=True)


@contextmanager
def shown_warnings() -> Iterator[None]:
    """xlrag's warnings (e.g. a question cut to the embedder's window) as one line each."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", XlragWarning)
        yield
    for w in caught:
        if issubclass(w.category, XlragWarning):
            warn(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def fit(text: str, cells: int) -> str:
    """``text`` cut to ``cells`` terminal cells with an ellipsis: Chinese and Arabic characters
    can take two cells each, so counting characters overflows a table and squeezes its columns."""
    from rich.cells import cell_len, set_cell_size

    return text if cell_len(text) <= cells else set_cell_size(text, cells - 1) + "…"


def shown(text: str) -> str:
    """Corpus or model text for a rich-markup line: controls stripped, markup escaped. Every
    rendering of such text goes through here (or :func:`terminal_text` where markup is off)."""
    return escape(terminal_text(text))


def terminal_text(text: str) -> str:
    """``text`` without control characters, for printing a model's tokens as they come."""
    return strip_controls(text)


def echo(message: str) -> None:
    """One line of dynamic text on stdout, verbatim: no markup, no highlighting."""
    out.print(terminal_text(message), markup=False, highlight=False, soft_wrap=True)


def _config(config: Path | None, *, index_dir: Path | None = None, mode: str | None = None, k: int | None = None,
            fusion: str | None = None, embedder: str | None = None, llm: str | None = None,
            chunk_size: int | None = None, channels: str | None = None, explanation: bool | None = None):
    """The config every command runs with: ``--config`` (or ``xlrag.yaml``), the environment,
    then the command's options, in that order of strength; one style for every command."""
    retrieval: dict[str, Any] = {key: v for key, v in (("mode", mode), ("fusion", fusion), ("channels", channels))
                                 if v}
    if k is not None:  # -k 0 must reach validation, not fall back to the default
        retrieval["k"] = k
    overrides: dict[str, Any] = {"index_dir": index_dir, "retrieval": retrieval,
                                 "embedder": {"name": embedder} if embedder else None,
                                 "splitter": {"chunk_size": chunk_size} if chunk_size else None,
                                 # None: the config's; False is a setting, not an absent one
                                 "answer": {"explanation": explanation} if explanation is not None else None}
    with shown_warnings():  # an unknown XLRAG_* variable, an old setting name: one line each
        cfg = load_config(config, **{key: v for key, v in overrides.items() if v})
    # provider:model on top of the llm section the file and environment gave
    return cfg.model_copy(update={"llm": LLMConfig.parse_spec(llm, cfg.llm)}) if llm else cfg


def _csv(value: str | None) -> list[str]:
    return [x.strip() for x in value.split(",") if x.strip()] if value else []

