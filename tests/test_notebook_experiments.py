"""The experiments notebook, in a test file of its own so that ``--dist loadfile`` runs it beside the
other long ones (tests/notebook_run.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebook_run import run_notebook, shard


@pytest.mark.slow
@pytest.mark.parametrize("path", shard("experiments"), ids=lambda p: p.name)
def test_notebook_runs(path: Path, tmp_path: Path):
    run_notebook(path, tmp_path)
