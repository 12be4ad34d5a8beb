"""Running the CLI in-process in tests, and reading its one-line errors."""

from __future__ import annotations

from typer.testing import CliRunner

from xlrag.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


def error_line(result):
    lines = [x for x in result.output.strip().splitlines() if x.strip()]
    assert result.exit_code != 0, result.output
    assert len(lines) == 1, result.output  # one line, no traceback
    assert lines[0].startswith("error:")
    return lines[0]
