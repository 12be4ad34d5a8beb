"""The docs site's generated reference (docs/hooks.py) against the code it is generated from.

`make docs` builds the site strictly; these tests prove that each generated part holds every
command, option, setting, exception and public name of the code, so that the site cannot fall
behind it, and that the pages ask for those parts.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
import typer.main
import yaml

from xlrag.validate import MAX_K

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


@pytest.fixture(scope="module")
def hooks():
    spec = importlib.util.spec_from_file_location("xlrag_docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page_with(marker: str) -> Path:
    pages = [p for p in DOCS.rglob("*.md") if marker in p.read_text(encoding="utf-8").splitlines()]
    assert len(pages) == 1, f"one page must hold {marker}, found {pages}"
    return pages[0]


def _walk(cmd, ctx, path):
    yield path, cmd, ctx
    for name in getattr(cmd, "commands", {}):
        sub = cmd.commands[name]
        if not sub.hidden:
            yield from _walk(sub, sub.context_class(sub, info_name=name, parent=ctx, **sub.context_settings),
                             [*path, name])


def test_the_cli_page_holds_every_command_and_option(hooks):
    from xlrag.cli import app

    page = hooks.expand(_page_with("<!-- xlrag:cli -->").read_text(encoding="utf-8"))
    root = typer.main.get_command(app)
    commands = list(_walk(root, root.context_class(root, info_name="xlrag", **root.context_settings), ["xlrag"]))
    assert len(commands) > 20
    for path, cmd, ctx in commands:
        heading = re.search(rf"^#+ `{' '.join(path)}` \{{ #{'-'.join(path)} \}}$", page, re.MULTILINE)
        assert heading, f"no section for {' '.join(path)}"
        section = page[heading.end():].split("\n#", 1)[0]
        if cmd.help:
            assert cmd.help.split("\n")[0].replace("<", "&lt;") in section
        for param in cmd.get_params(ctx):
            for name in (*param.opts, *param.secondary_opts):
                assert re.search(rf"`[^`]*(?<![\w-]){re.escape(name)}(?![\w-])", section), \
                    f"{' '.join(path)}: {name} is not in its section"
            if getattr(param, "help", None):
                assert hooks._cell(param.help.split("  [")[0])[:40] in section, (
                    f"{' '.join(path)}: help of {param.name}")
    assert "`-h, --help`" in page  # the help option comes from the app's context settings


def test_the_config_page_holds_every_key_with_its_default_and_description(hooks):
    from pydantic import BaseModel

    from xlrag.config import XlragConfig

    page = hooks.expand(_page_with("<!-- xlrag:config -->").read_text(encoding="utf-8"))
    rows = {m[1]: m[0] for m in re.finditer(r"^\| `([\w.\[\]]+)` \|.*$", page, re.MULTILINE)}

    def leaves(model, prefix=""):
        for name, f in model.model_fields.items():
            if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel):
                yield from leaves(f.annotation, f"{prefix}{name}.")
            else:
                yield f"{prefix}{name}", f

    keys = list(leaves(XlragConfig))
    assert len(keys) > 40
    for key, f in keys:
        row = rows.get(key)
        assert row, f"no row for {key}"
        assert f"`XLRAG_{key.replace('.', '__').upper()}`" in row
        if f.description:
            assert hooks._cell(f.description) in row, key
        if not f.is_required() and f.default_factory is None and isinstance(f.default, int | float | str):
            default = getattr(f.default, "value", f.default)
            assert f"`{default!r}`" in row, f"{key}: default {default!r}"
    # a nested section's own settings are documented too (a list of rules, an optional LLM)
    assert "agent.rules[].names" in rows and "answer.attribution_checker.provider" in rows
    assert "agent.attribution" not in rows and "answer.attribution_check" in rows
    assert f"(≥ 1, ≤ {MAX_K})" in rows["retrieval.k"]  # the one rule for k (xlrag.validate)


def test_the_errors_page_holds_every_exception_and_its_message(hooks):
    import xlrag.errors as errors

    page = hooks.expand(_page_with("<!-- xlrag:errors -->").read_text(encoding="utf-8"))
    classes = [getattr(errors, n) for n in errors.__all__ if isinstance(getattr(errors, n), type)]
    for cls in classes:
        row = re.search(rf"^\| `{cls.__name__}` \|.*$", page, re.MULTILINE)
        assert row, cls.__name__
        if cls.__doc__:
            assert hooks._cell(cls.__doc__.split("\n\n")[0].strip())[:50] in row[0]
    corrupt = re.search(r"^\| `IndexCorruptError` \|.*$", page, re.MULTILINE)[0]
    assert "index {path} is damaged ({why}); run 'xlrag check --repair --index-dir {path}'" in corrupt
    unknown = re.search(r"^\| `UnknownProviderError` \|.*$", page, re.MULTILINE)[0]
    assert "choose one of: {known}" in unknown


@pytest.mark.parametrize("package", ["xlrag", "xlrag.agents", "xlrag.evals", "xlrag.perspectives"])
def test_the_api_pages_document_every_public_name_once(hooks, package):
    import importlib

    pkg = importlib.import_module(package)
    page = _page_with(f"<!-- xlrag:api {package} -->")
    assert page.is_relative_to(DOCS / "reference" / "api")
    rendered = hooks.render_api(package)
    documented = {name: module for module, name in re.findall(r"^::: ([\w.]+)\.(\w+)$", rendered, re.MULTILINE)}
    linked = set(re.findall(r"^`(\w+)`: see ", rendered, re.MULTILINE))
    for name in pkg.__all__:
        if name.startswith("__"):
            continue
        assert name in documented or name in linked, f"{package}.{name} is not documented"
        if name in documented:  # the path the page documents is the public object itself
            assert getattr(importlib.import_module(documented[name]), name) is getattr(pkg, name), name
    # every name documented once across the API pages: mkdocstrings would warn of two primary URLs
    everything = re.findall(r"^::: ([\w.]+)$", "\n".join(
        hooks.expand(p.read_text(encoding="utf-8")) for p in (DOCS / "reference" / "api").glob("*.md")), re.MULTILINE)
    assert len(everything) == len(set(everything))


def test_an_unknown_marker_stops_the_build(hooks):
    from mkdocs.exceptions import PluginError

    with pytest.raises(PluginError, match="unknown marker"):
        hooks.expand("# x\n\n<!-- xlrag:clii -->\n")


def test_every_page_is_in_the_nav():
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))

    def pages(nav):
        for item in nav:
            for value in (item.values() if isinstance(item, dict) else [item]):
                yield from (pages(value) if isinstance(value, list) else [value])

    listed = set(pages(config["nav"]))
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert listed == on_disk
    assert "docs/hooks.py" in config["hooks"]


def test_the_languages_page_has_a_row_for_every_test_bed_language(hooks):
    from xlrag.evals import testbed

    table = hooks.render_languages()
    rows = [line.split("|")[1].strip() for line in table.splitlines()[2:]]
    assert rows == testbed.languages()
    assert "<!-- xlrag:languages -->" in (DOCS / "explanation" / "languages.md").read_text(encoding="utf-8")
