"""CLI messages print dynamic text verbatim: rich markup must not eat ``[...]``.

With a vendor extra missing, the error must say ``pip install 'xlrag[openai]'``;
rich once turned that into ``pip install 'xlrag'``. Each vendor integration is
made unimportable in-process (a ``None`` entry in ``sys.modules`` is how Python
marks a module as not importable), then the CLI runs the command that needs it.
"""

import os
import sys

import pytest
from typer.testing import CliRunner

from tests.conftest import TEST_DATA
from xlrag.cli import app
from xlrag.cli._app import echo, warn

runner = CliRunner()
QUESTION = "How many points did the Panthers defense surrender?"

# (extra, integration module that registry.require() checks, how the CLI reaches it)
LLMS = [
    ("openai", "langchain_openai", "openai:gpt-4o-mini"),
    ("anthropic", "langchain_anthropic", "anthropic:claude-3-5-haiku-latest"),
    ("cohere", "langchain_cohere", "cohere:command-r"),
    ("mistral", "langchain_mistralai", "mistral:mistral-small-latest"),
]
EMBEDDERS = [
    ("openai", "llama_index.embeddings.openai", "openai"),
    ("cohere", "llama_index.embeddings.cohere", "cohere"),
    ("mistral", "llama_index.embeddings.mistralai", "mistral"),
]


def one_error_line(result) -> str:
    lines = [x for x in result.output.strip().splitlines() if x.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output  # one line, no traceback
    assert lines[0].startswith("error:"), result.output
    return lines[0]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    # No ./xlrag.yaml or XLRAG_* variable of the caller's may change what runs.
    monkeypatch.chdir(tmp_path)
    for var in [v for v in os.environ if v.startswith("XLRAG_")]:
        monkeypatch.delenv(var)


@pytest.mark.parametrize(("extra", "module", "spec"), LLMS, ids=[x[0] for x in LLMS])
def test_missing_llm_extra_names_it(extra, module, spec, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)
    # no_ir needs no index, so the LLM is the first thing that can fail.
    line = one_error_line(runner.invoke(app, ["ask", "--mode", "no_ir", "--llm", spec, QUESTION]))
    assert f"pip install 'xlrag[{extra}]'" in line


@pytest.mark.parametrize(("extra", "module", "name"), EMBEDDERS, ids=[x[0] for x in EMBEDDERS])
def test_missing_embedder_extra_names_it(extra, module, name, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, module, None)
    res = runner.invoke(app, ["index", "--corpus", str(TEST_DATA / "bad" / "corpus.csv"),
                              "--index-dir", str(tmp_path / "ix"), "--embedder", name])
    assert f"pip install 'xlrag[{extra}]'" in one_error_line(res)


def test_missing_reranker_extra_names_it(xquad_index, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "llama_index.postprocessor.cohere_rerank", None)
    cfg = tmp_path / "xlrag.yaml"
    cfg.write_text("rerank:\n  name: cohere\n", encoding="utf-8")
    res = runner.invoke(app, ["retrieve", "--index-dir", str(xquad_index), "--config", str(cfg), QUESTION])
    assert "pip install 'xlrag[cohere]'" in one_error_line(res)


def test_helpers_print_brackets_verbatim(capsys):
    text = "line 3: [citation needed] [bold]x[/bold] pip install 'xlrag[openai]'"
    warn(text, label="skipped")
    echo(text)
    captured = capsys.readouterr()
    assert captured.err.strip() == f"skipped: {text}"
    assert captured.out.strip() == text


# Corpus text and row errors reach tables and warnings in the command modules.
# Corpus text and notes are printed verbatim, brackets and all.


@pytest.fixture(scope="module")
def bracket_index(tmp_path_factory):
    import json

    d = tmp_path_factory.mktemp("brackets")
    rows = [
        {"id": "d1", "lang": "en", "text": "[openai] The Panthers defense gave up 308 points."},
        {"id": "d2", "lang": "en", "text": "Kosovo declared independence in 2008 [citation needed]."},
        {"id": "d3", "lang": "xx[weird]", "text": "A row with a bad language code."},
    ]
    (d / "c.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    res = runner.invoke(app, ["index", "-c", str(d / "c.jsonl"), "-i", str(d / "ix"), "--skip-bad"])
    assert res.exit_code == 0, res.output
    return d / "ix", res.output


def test_skipped_row_keeps_brackets(bracket_index):
    _, output = bracket_index
    assert "xx[weird]" in output


def test_retrieve_table_keeps_brackets(bracket_index):
    res = runner.invoke(app, ["retrieve", "-i", str(bracket_index[0]), "-k", "2", "--mode", "qlang",
                              "--lang", "en", "How many points did the Panthers defense surrender?"])
    assert res.exit_code == 0, res.output
    assert "[openai]" in res.output


def test_version_has_one_source_and_the_cli_prints_it():
    import importlib.metadata
    import tomllib
    from pathlib import Path

    import xlrag

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    assert "version" not in project and "version" in project["dynamic"]  # read from xlrag.__version__
    assert importlib.metadata.version("xlrag") == xlrag.__version__
    res = runner.invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"xlrag {xlrag.__version__}"


@pytest.mark.parametrize("command", [[], ["ask"], ["eval", "run"], ["index"]])
def test_dash_h_is_help_everywhere(command):
    short, long = runner.invoke(app, [*command, "-h"]), runner.invoke(app, [*command, "--help"])
    assert short.exit_code == long.exit_code == 0 and short.output == long.output and "Usage:" in short.output
