"""Every results file names the code that wrote it (``benchmarks/_common.py``)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.evals.benchmarks import load_benchmark


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for name in ("xlrag/a.py", "benchmarks/b.py", "benchmarks/results/r.json", "README.md"):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text("one\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-q", "-m", "one")
    return repo


def test_the_stamp_is_the_checkout_commit_and_names_the_code_that_differed_from_it(tmp_path):
    common = load_benchmark("_common")
    repo = _repo(tmp_path)
    head = _git(repo, "rev-parse", "--short=12", "HEAD")
    assert common.provenance(repo)["commit"] == head
    assert common.provenance(repo)["modified"] == []
    # a run rewrites its results and the docs quote them: neither is the code that measured
    (repo / "benchmarks/results/r.json").write_text("two\n")
    (repo / "README.md").write_text("two\n")
    assert common.provenance(repo)["modified"] == []
    (repo / "xlrag/a.py").write_text("two\n")
    (repo / "benchmarks/b.py").write_text("two\n")
    assert common.provenance(repo) == {"commit": head, "modified": ["benchmarks/b.py", "xlrag/a.py"]}
    outside = tmp_path / "not-a-checkout"
    outside.mkdir()
    assert common.provenance(outside)["commit"].startswith("unknown")


def test_a_merged_file_keeps_the_stamp_of_the_other_code_that_wrote_part_of_it(tmp_path):
    common = load_benchmark("_common")
    first = json.loads(common.write_json("r.json", {"arms": {"a": 1}}, tmp_path).read_text())
    assert next(iter(first)) == "provenance"
    now = first["provenance"]["commit"]
    # Written again by the same code: nothing earlier to keep.
    again = json.loads(common.write_json("r.json", {**first, "arms": {"a": 2}}, tmp_path).read_text())
    assert "earlier" not in again["provenance"]
    # One arm written by older code, then merged by today's: the older commit is kept.
    old = {**first, "provenance": {"commit": "0000000", "modified": [], "written": "2026-01-01T00:00:00+00:00"}}
    merged = json.loads(common.write_json("r.json", {**old, "arms": {"a": 3}}, tmp_path).read_text())
    assert merged["provenance"]["commit"] == now
    assert [e["commit"] for e in merged["provenance"]["earlier"]] == ["0000000"]
    assert merged["arms"] == {"a": 3}
