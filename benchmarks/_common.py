"""Helpers shared by the benchmarks (not part of the package)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
RESULTS = HERE / "results"
SHARED = HERE.parent.parent / "shared" / "data"


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def bootstrap_ci(values: Sequence[float], n: int = 1000, seed: int = 13) -> tuple[float, float, float]:
    """Mean and 95% percentile-bootstrap interval."""
    vals = list(values)
    if not vals:
        return (float("nan"),) * 3
    rng = random.Random(seed)
    means = sorted(sum(rng.choices(vals, k=len(vals))) / len(vals) for _ in range(n))
    return sum(vals) / len(vals), means[int(0.025 * n)], means[int(0.975 * n) - 1]


def write_json(name: str, payload: dict) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / name
    path.write_text(json.dumps(payload, indent=2, ensure_ascii=False), encoding="utf-8")
    return path
