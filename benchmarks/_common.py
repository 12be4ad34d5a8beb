"""Helpers shared by the benchmarks (not part of the package)."""

from __future__ import annotations

import json
from pathlib import Path

# The one seeded bootstrap (mean, low, high); the benchmarks import it from here.
from xlrag.evals.stats import bootstrap_ci

__all__ = ["CACHE", "RESULTS", "SHARED", "bootstrap_ci", "read_jsonl", "write_json"]

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
RESULTS = HERE / "results"
SHARED = HERE.parent.parent / "shared" / "data"


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def write_json(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    return path
