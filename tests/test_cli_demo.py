"""`xlrag demo` end to end with the default local model: it builds the index every command opens
by default, its answers finish, and the commands it prints next run as printed."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from tests.clitools import run


@pytest.mark.slow
def test_the_demo_answers_in_full_and_its_next_commands_run(tmp_path, monkeypatch):
    for key in [k for k in os.environ if k.upper().startswith("XLRAG_")]:
        monkeypatch.delenv(key)
    monkeypatch.chdir(tmp_path)  # no xlrag.yaml here: the index goes to the config's default, .xlrag-index
    res = run("demo")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert sum(x.startswith("answer:") for x in lines) == 5
    # a cut-off answer is flagged 'truncated' (the demo's 96 tokens cut 3 of the 5)
    assert not [x for x in lines if x.startswith("flags:") and "truncated" in x], res.output
    assert (tmp_path / ".xlrag-index" / "xlrag-index.json").is_file()

    from xlrag.cli.demo import next_commands

    tail = res.output.split("try next", 1)[1].splitlines()[1:]
    printed = [x.strip() for x in tail if x.strip()]
    assert printed == next_commands(Path(".xlrag-index"), Path(".xlrag-index"))
    assert not any(" -i " in x for x in printed)  # the demo's index is where every command looks
    ran = 0
    for line in printed:  # the ones without a model call run here, exactly as printed
        args = shlex.split(line)
        if args[:2] in (["xlrag", "retrieve"], ["xlrag", "eval"]):
            done = run(*args[1:])
            assert done.exit_code == 0, (line, done.output)
            ran += 1
    assert ran == 2

    # the demo again: its own index is accepted, and nothing is added twice
    from xlrag.demo import build_demo_index

    assert sum(r.added for r in build_demo_index(tmp_path / ".xlrag-index")) == 0
