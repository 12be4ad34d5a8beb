"""Every notebook in notebooks/ runs top to bottom, so none can rot: here the short ones, each
long one in a test file of its own (tests/test_notebook_<file>.py, tests/notebook_run.py)."""

from __future__ import annotations

from pathlib import Path

from tests.notebook_run import NOTEBOOKS, OWN_FILE, notebook_test, shard

HERE = Path(__file__).resolve().parent


def test_there_are_notebooks_and_each_runs_in_exactly_one_file():
    assert NOTEBOOKS
    assert set(OWN_FILE) <= {p.name for p in NOTEBOOKS}  # a renamed notebook cannot drop out of the suite
    assert sorted(p for f in (None, *OWN_FILE.values()) for p in shard(f)) == NOTEBOOKS
    for own in OWN_FILE.values():  # and each long one's file runs its shard
        assert f'notebook_test("{own}")' in (HERE / f"test_notebook_{own}.py").read_text(encoding="utf-8"), own


test_notebook_runs = notebook_test(None)
