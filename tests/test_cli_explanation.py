"""``--explanation/--no-explanation``: the command line's door to ``answer.explanation``, on the
commands that answer in the citation format, above the file and the environment."""

from __future__ import annotations

import json

import pytest
import typer

from tests.clitools import error_line, run
from xlrag.cli import app
from xlrag.cli._app import _config

ANSWERING = ("ask", "chat", "serve")


@pytest.mark.parametrize("command", ANSWERING)
def test_every_command_that_answers_takes_the_flag(command):
    cmd = typer.main.get_command(app).commands[command]
    (opt,) = [p for p in cmd.params if p.name == "explanation"]
    assert opt.opts == ["--explanation"] and opt.secondary_opts == ["--no-explanation"]
    assert opt.default is None  # unset: the config decides
    assert "answer.explanation from config, true" in opt.help


def test_the_flag_beats_the_file_and_the_environment(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _config(None).answer.explanation is True
    assert _config(None, explanation=False).answer.explanation is False
    (tmp_path / "xlrag.yaml").write_text("answer:\n  explanation: false\n  post_hoc_citations: false\n")
    assert _config(None).answer.explanation is False
    on = _config(None, explanation=True).answer
    assert on.explanation is True and on.post_hoc_citations is False  # the rest of the section stays the file's
    monkeypatch.setenv("XLRAG_ANSWER__EXPLANATION", "true")
    assert _config(None).answer.explanation is True
    assert _config(None, explanation=False).answer.explanation is False


@pytest.mark.parametrize("flag", ["--explanation", "--no-explanation"])
def test_the_flag_outside_the_citation_format_is_a_one_line_error(xquad_index, flag):
    line = error_line(run("ask", "--index-dir", xquad_index, "--format", "answer", flag, "Who?"))
    assert f"{flag} goes with --format citation" in line and f"drop {flag} or --format answer" in line


@pytest.mark.slow
def test_ask_without_the_explanation_stops_at_its_header(xquad_index, monkeypatch):
    monkeypatch.setenv("XLRAG_LLM__MAX_TOKENS", "96")
    monkeypatch.setenv("XLRAG_LLM__N_THREADS", "1")
    res = run("ask", "--index-dir", xquad_index, "--mode", "qlang_en", "-k", "2", "--json", "--no-explanation",
              "How many points did the Panthers defense surrender?")
    assert res.exit_code == 0, res.output
    answer = json.loads(res.output)
    assert answer["answer"].strip() and answer["explanation"] is None
    assert "Explanation" not in answer["raw_output"] and "truncated" not in answer["flags"]
