"""Every notebook in notebooks/ runs top to bottom, so none can rot: the ones sharing a worker
(tests/test_notebooks_alone.py runs the longest on its own)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebook_run import ALONE, NOTEBOOKS, run_notebook, shard


def test_there_are_notebooks_and_each_runs_in_exactly_one_file():
    assert NOTEBOOKS
    assert ALONE <= {p.name for p in NOTEBOOKS}  # a renamed notebook cannot drop out of the suite
    assert sorted(shard(True) + shard(False)) == NOTEBOOKS


@pytest.mark.slow
@pytest.mark.parametrize("path", shard(False), ids=lambda p: p.name)
def test_notebook_runs(path: Path, tmp_path: Path):
    run_notebook(path, tmp_path)
