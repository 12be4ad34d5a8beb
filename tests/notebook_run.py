"""Running the notebooks of notebooks/: one list, split over two test files so that
``--dist loadfile`` can give the longest notebook a worker of its own (run one after another,
the five took 26 of the suite's 61 minutes on one worker while the other sat idle)."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# the longest (707 s in the last full run): its own test file, so its own worker
ALONE = frozenset({"perspectives.ipynb"})


def shard(alone: bool) -> list[Path]:
    return [p for p in NOTEBOOKS if (p.name in ALONE) is alone]


def run_notebook(path: Path, tmp_path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    # Run in a scratch folder: notebooks write their indexes beside themselves.
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors
