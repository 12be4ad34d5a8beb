"""Running the notebooks of notebooks/: one list, split over test files so that
``--dist loadfile`` can run the long notebooks on both workers at once (in one file, four
notebooks took 503 s on one worker, the suite's last 8 minutes with the other idle)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# the long notebooks (146 to 228 s in the last full run), each run by tests/test_notebook_<file>.py;
# tests/test_notebooks.py runs the others
OWN_FILE = {"experiments.ipynb": "experiments", "chat_and_agent.ipynb": "chat", "perspectives.ipynb": "perspectives"}


def shard(own_file: str | None) -> list[Path]:
    """The notebooks tests/test_notebook_<own_file>.py runs; None: those of tests/test_notebooks.py."""
    return [p for p in NOTEBOOKS if OWN_FILE.get(p.name) == own_file]


def notebook_test(own_file: str | None) -> Callable[[Path, Path], None]:
    """The test that runs ``shard(own_file)``, for a test module to bind as ``test_notebook_runs``."""

    @pytest.mark.slow
    @pytest.mark.parametrize("path", shard(own_file), ids=lambda p: p.name)
    def test_notebook_runs(path: Path, tmp_path: Path) -> None:
        run_notebook(path, tmp_path)

    return test_notebook_runs


def run_notebook(path: Path, tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # Run in a scratch folder: notebooks write their indexes beside themselves.
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
