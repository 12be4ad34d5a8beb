"""MkDocs hooks: the reference parts that the code owns, generated at build time.

A page asks for a generated part with a marker comment on a line of its own:

* ``<!-- xlrag:cli -->``: every command and option of the typer app (``xlrag.cli.app``), with the
  help text, metavars and defaults that ``--help`` prints;
* ``<!-- xlrag:config -->``: every key of ``XlragConfig`` with its type, default, bounds and
  description;
* ``<!-- xlrag:errors -->``: the exceptions of ``xlrag.errors`` with their message templates;
* ``<!-- xlrag:api PACKAGE -->``: a mkdocstrings ``:::`` entry for every name of the package's
  ``__all__``, grouped by the module that defines it;
* ``<!-- xlrag:languages -->``: the per-language table of the many-language test bed, from the
  committed ``benchmarks/results/languages.json`` and ``testbed_answers.json``.

Nothing here is copied by hand, so a new option, setting or error cannot go undocumented. An
unknown marker stops the build. ``tests/test_docs.py`` renders each part and checks it
against the code.
"""

from __future__ import annotations

import html
import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from enum import Enum
from pathlib import Path
from types import NoneType, UnionType
from typing import Annotated, Any, Literal, Union, get_args, get_origin

ROOT = Path(__file__).resolve().parent.parent
# The site documents the checkout it is built from, whatever xlrag the virtualenv has installed.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MARKER = re.compile(r"^<!-- xlrag:(?P<name>[a-z-]+)(?: (?P<arg>[\w.]+))? -->$", re.MULTILINE)


def _cell(text: object) -> str:
    """Text for a Markdown table cell: no HTML, no column breaks, no emphasis."""
    out = html.escape(" ".join(str(text).split()), quote=False)
    return out.replace("|", "&#124;").replace("*", r"\*")


def _code(text: object) -> str:
    """A code span for a table cell (Python-Markdown's tables leave pipes inside code spans alone)."""
    return f"`{' '.join(str(text).split())}`"


# -- the command line --------------------------------------------------------------------------


def cli_commands(app: Any = None) -> Iterator[tuple[list[str], Any, Any]]:
    """Every visible command of the typer app as (path, click command, click context), depth first,
    in the order ``--help`` lists them."""
    import typer.main

    if app is None:
        from xlrag.cli import app
    root = typer.main.get_command(app)

    def walk(cmd: Any, path: list[str], parent: Any) -> Iterator[tuple[list[str], Any, Any]]:
        ctx = cmd.context_class(cmd, info_name=path[-1], parent=parent, **cmd.context_settings)
        yield path, cmd, ctx
        for name in getattr(cmd, "list_commands", lambda _: [])(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                yield from walk(sub, [*path, name], ctx)

    yield from walk(root, ["xlrag"], None)


def cli_anchor(path: list[str]) -> str:
    return "-".join(path)


def render_cli(app: Any = None) -> str:
    parts = []
    for path, cmd, ctx in cli_commands(app):
        name = " ".join(path)
        level = "#" * min(len(path) + 1, 4)
        parts.append(f"{level} `{name}` {{ #{cli_anchor(path)} }}\n")
        if cmd.help:
            parts.append(inspect.cleandoc(cmd.help).replace("<", "&lt;") + "\n")
        usage = " ".join(cmd.collect_usage_pieces(ctx))
        parts.append(f"```text\n{name} {usage}\n```\n")
        subs = getattr(cmd, "list_commands", lambda _: [])(ctx)
        if subs:
            rows = [f"| [`{name} {s}`](#{cli_anchor([*path, s])}) | {_cell(cmd.get_command(ctx, s).get_short_help_str(200))} |"
                    for s in subs if not cmd.get_command(ctx, s).hidden]
            parts.append("| command | what it does |\n| --- | --- |\n" + "\n".join(rows) + "\n")
        params = [p for p in cmd.get_params(ctx) if not getattr(p, "hidden", False)]
        rows = []
        for p in params:
            record = p.get_help_record(ctx)
            if record is None:
                continue
            names, help_text = record
            kind = "argument" if p.param_type_name == "argument" else "option"
            rows.append(f"| {_code(names)} | {kind} | {_cell(help_text)} |")
        if rows:
            parts.append("| name | kind | description |\n| --- | --- | --- |\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)


# -- the configuration -------------------------------------------------------------------------


def _type_name(ann: Any) -> str:
    origin = get_origin(ann)
    if origin is Annotated:
        return _type_name(get_args(ann)[0])
    if origin is Literal:
        return " | ".join(repr(a) for a in get_args(ann))
    if origin in (Union, UnionType):
        return " | ".join(_type_name(a) for a in get_args(ann))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in get_args(ann))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if ann is NoneType:
        return "None"
    if isinstance(ann, type) and issubclass(ann, Enum):
        return " | ".join(repr(m.value) for m in ann)
    return getattr(ann, "__name__", str(ann))


def _models_in(ann: Any) -> list[type]:
    """The pydantic models an annotation holds (``list[AgentRule]``, ``LLMConfig | None``)."""
    from pydantic import BaseModel

    if isinstance(ann, type) and issubclass(ann, BaseModel):
        return [ann]
    return [m for a in get_args(ann) for m in _models_in(a)]


def _bounds(field: Any) -> str:
    signs = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<", "min_length": "at least", "max_length": "at most"}
    out = []
    for meta in field.metadata:
        for attr, sign in signs.items():
            value = getattr(meta, attr, None)
            if value is not None:
                out.append(f"{sign} {value}" + (" items" if "length" in attr else ""))
    return ", ".join(out)


def _default(field: Any) -> str:
    from pydantic_core import PydanticUndefined

    if field.default_factory is not None:
        value = field.default_factory()
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, Enum):
        value = value.value
    if isinstance(value, Path):
        value = str(value)
    return _code(repr(value) if isinstance(value, str) else value)


def config_keys(model: Any = None, prefix: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Every setting of ``model`` (default ``XlragConfig``) as (dotted key, field, owning model),
    sections first-level first; a section's own fields before its subsections'."""
    if model is None:
        from xlrag.config import XlragConfig as model
    nested = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        inner = _models_in(field.annotation)
        if inner and field.annotation is inner[0]:
            nested.append((key, inner[0]))
            continue
        yield key, field, model
        for m in inner:  # a list of sections (agent.rules) or an optional one (answer.attribution_checker)
            nested.append((f"{key}[]" if get_origin(field.annotation) is list else key, m))
    seen = set()
    for key, m in nested:
        if (key, m) not in seen:
            seen.add((key, m))
            yield from config_keys(m, f"{key}.")


def render_config(model: Any = None) -> str:
    if model is None:
        from xlrag.config import XlragConfig as model
    sections: dict[str, list[str]] = {}
    intro: dict[str, str] = {}
    for key, field, owner in config_keys(model):
        section = key.rsplit(".", 1)[0] if "." in key else ""
        if section not in intro and owner is not model and owner.__doc__ and owner.__module__ == model.__module__:
            intro[section] = inspect.cleandoc(owner.__doc__).split("\n\n")[0]
        env = "XLRAG_" + key.replace(".", "__").upper() if "[]" not in key else ""
        description = field.description or ""
        bounds = _bounds(field)
        rows = sections.setdefault(section, [])
        rows.append(f"| {_code(key)} | {_code(_type_name(field.annotation))}{' (' + _cell(bounds) + ')' if bounds else ''} "
                    f"| {_default(field)} | {_cell(description)} | {_code(env) if env else ''} |")
    parts = []
    for section, rows in sections.items():
        title = f"`{section}`" if section else "top level"
        parts.append(f"### {title}\n")
        if section in intro:
            parts.append(_cell(intro[section]) + "\n")
        parts.append("| key | type | default | description | environment |\n| --- | --- | --- | --- | --- |\n"
                     + "\n".join(rows) + "\n")
    return "\n".join(parts)


# -- the errors --------------------------------------------------------------------------------


def _message_template(cls: type) -> str | None:
    """The message an exception class builds, with its required arguments as ``{name}``."""
    if "__init__" not in cls.__dict__:
        return None
    sig = inspect.signature(cls.__init__, eval_str=True)
    kwargs = {n: [f"{{{n}}}"] if get_origin(p.annotation) is list else f"{{{n}}}"
              for n, p in list(sig.parameters.items())[1:]
              if p.default is inspect.Parameter.empty and p.kind is not p.VAR_KEYWORD}
    return str(cls(**kwargs))


def error_classes(module: Any = None) -> list[type]:
    if module is None:
        module = importlib.import_module("xlrag.errors")
    return [obj for name in module.__all__ if isinstance(obj := getattr(module, name), type)]


def render_errors(module: Any = None) -> str:
    if module is None:
        module = importlib.import_module("xlrag.errors")
    rows = []
    for cls in error_classes(module):
        bases = ", ".join(b.__name__ for b in cls.__bases__ if b is not object)
        doc = inspect.cleandoc(cls.__doc__).split("\n\n")[0] if cls.__doc__ else ""
        template = _message_template(cls)
        rows.append(f"| `{cls.__name__}` | {_cell(bases)} | {_cell(doc)} | {_code(template) if template else ''} |")
    return ("| exception | is a | when | message |\n| --- | --- | --- | --- |\n" + "\n".join(rows) + "\n")


# -- the Python API ----------------------------------------------------------------------------


def api_members(package: str) -> dict[str, list[str]]:
    """The package's public names, as {defining module: [names]}: from the package's table of
    lazy names (``_LAZY``), else from the object itself."""
    pkg = importlib.import_module(package)
    table = getattr(pkg, "_LAZY", {})
    groups: dict[str, list[str]] = {}
    for name in pkg.__all__:
        if name.startswith("__"):
            continue
        module = table.get(name) or getattr(getattr(pkg, name), "__module__", package)
        groups.setdefault(module, []).append(name)
    return dict(sorted(groups.items()))


def render_api(package: str) -> str:
    """mkdocstrings entries for ``package.__all__``; names that ``xlrag`` itself exports are
    documented there once and only linked from a subpackage."""
    top = {(m, n) for m, names in api_members("xlrag").items() for n in names} if package != "xlrag" else set()
    parts = []
    for module, names in api_members(package).items():
        parts.append(f"## `{module}`\n")
        for name in names:
            if (module, name) in top:
                parts.append(f"`{name}`: see [`xlrag.{name}`][{module}.{name}].\n")
            else:
                parts.append(f"::: {module}.{name}\n    options:\n      heading_level: 3\n")
    return "\n".join(parts)


# -- the hook ----------------------------------------------------------------------------------

def render_languages() -> str:
    """One row per test bed language: same-language Hit@1 of dense, lexical and the default,
    cross-language Hit@1/Hit@5 of the default over English's and another language's store, and
    the agent's number answers where benchmarks/testbed_answers.py asked them."""
    import json

    results = ROOT / "benchmarks" / "results"
    tb = json.loads((results / "languages.json").read_text(encoding="utf-8"))
    answers_path = results / "testbed_answers.json"
    answers = json.loads(answers_path.read_text(encoding="utf-8")).get("summary", {}).get("by_lang", {}) \
        if answers_path.exists() else {}
    default = tb["default"]
    same, cross_en, cross_next = (tb["testbed"][c] for c in ("same", "cross_en", "cross_next"))
    rows = ["| language | same Hit@1: dense / lexical / default | cross Hit@1 / Hit@5: English's store | "
            "cross Hit@1 / Hit@5: another's | agent: in language / correct / verified wrong |",
            "| --- | --- | --- | --- | --- |"]
    from xlrag.languages import normalize_code

    for lang in tb["testbed"]["languages"]:
        def h(arm: dict, m: str, store: str = normalize_code(lang)) -> str:
            # the cells are the stores' languages: simplified and traditional Chinese share one
            return f"{arm['by_lang'][store][m]:.2f}"

        a = answers.get(lang)
        agent = (f"{a['in_language'] + a['no_language']} / {a['correct']} / {a['verified_wrong']} of {a['n']}"
                 if a else "")
        rows.append(f"| {lang} | {h(same['dense'], 'hit@1')} / {h(same['lexical'], 'hit@1')} / "
                    f"**{h(same[default], 'hit@1')}** | {h(cross_en[default], 'hit@1')} / {h(cross_en[default], 'hit@5')} | "
                    f"{h(cross_next[default], 'hit@1')} / {h(cross_next[default], 'hit@5')} | {agent} |")
    return "\n".join(rows)


RENDERERS = {"cli": render_cli, "config": render_config, "errors": render_errors, "languages": render_languages}


def expand(markdown: str) -> str:
    def one(m: re.Match[str]) -> str:
        name, arg = m["name"], m["arg"]
        if name == "api" and arg:
            return render_api(arg)
        if name in RENDERERS and not arg:
            return RENDERERS[name]()
        from mkdocs.exceptions import PluginError

        raise PluginError(f"unknown marker {m[0]!r}; known: {', '.join(RENDERERS)}, api PACKAGE")

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    return expand(markdown)
