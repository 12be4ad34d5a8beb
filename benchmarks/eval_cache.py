"""The experiment cache: a small grid run twice, the second time in a new folder sharing the cache.

The second run recomputes every record (retrieval, parsing, metrics, reports) but finds
every model call in the SQLite cache. Target: first-run time / rerun time >= 20, and zero
model calls in the rerun. Both runs use the same built index, so neither pays for indexing.

    python benchmarks/eval_cache.py [--per-lang 5] [--model qwen2.5-coder-1.5b-instruct]

Writes benchmarks/results/eval_cache.json.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, write_json

from xlrag.evals.experiment import ExperimentConfig
from xlrag.evals.runner import ExperimentRunner

TARGET = 20.0


def run(cfg: ExperimentConfig, out: Path) -> tuple[float, dict]:
    t0 = time.perf_counter()
    runner = ExperimentRunner(cfg, out)
    summary = runner.run()
    runner.close()
    return time.perf_counter() - t0, summary


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--per-lang", type=int, default=5)
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    args = ap.parse_args()
    root = CACHE / "eval-cache"
    shutil.rmtree(root, ignore_errors=True)
    cfg = ExperimentConfig.model_validate({
        "name": "eval-cache",
        "datasets": [{"name": "xquad", "sample": {"per_lang": args.per_lang, "langs": ["ar", "de", "zh"]},
                      "index_dir": str(CACHE / "gen-models-index")}],
        "modes": ["qlang_en"],
        "retrieval": {"k": 3},
        "llms": [{"provider": "local", "model": args.model, "max_tokens": 96}],
        "cache": str(root / "cache.sqlite"),
    })
    cfg.datasets = [d.resolved(Path.cwd()) for d in cfg.datasets]
    # warm the index and the model load outside the timings: both runs would pay them alike
    ExperimentRunner(cfg, root / "warm").retriever(cfg.datasets[0])
    first_s, first = run(cfg, root / "first")
    again_s, again = run(cfg, root / "again")
    ratio = first_s / again_s
    ok = ratio >= TARGET and again["llm_calls"] == 0 and again["written"] == first["written"]
    print(f"first run: {first['written']} records, {first['llm_calls']} model calls, {first_s:.1f}s")
    print(f"rerun:     {again['written']} records, {again['llm_calls']} model calls, {again_s:.2f}s")
    print(f"first / rerun = {ratio:.1f} (target >= {TARGET:.0f}), rerun model calls {again['llm_calls']} (must be 0): "
          f"{'OK' if ok else 'MISS'}")
    path = write_json("eval_cache.json", {"benchmark": "eval-cache", "model": args.model,
                                          "records": first["written"], "first_s": first_s, "rerun_s": again_s,
                                          "ratio": ratio, "target": TARGET, "first_llm_calls": first["llm_calls"],
                                          "rerun_llm_calls": again["llm_calls"], "ok": ok})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
