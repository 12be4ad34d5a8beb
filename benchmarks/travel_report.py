"""The Travel report (issue #8): benchmarks/experiments/travel_offline.yaml run with the local models.

Retrieval in four modes, answers in `balanced` by the local instruct model, a panel of three
local judges, Ragas faithfulness and answer relevancy, all on a stratified 200-query sample.
The run folder lives in benchmarks/.cache/travel_report (resumable: run the script again
after a kill); the reports, records and model-call cache are copied to
benchmarks/results/travel_report/ as they are, and a new machine resumes from that copy:
a run of several CPU-hours can span sessions without redoing a record or a model call.

    python benchmarks/travel_report.py [--experiment benchmarks/experiments/travel_offline.yaml]
        [--per-lang N]   # a smaller sample, for a trial run
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, HERE, RESULTS

from xlrag.evals.experiment import load_experiment
from xlrag.evals.run_folder import RECORDS
from xlrag.evals.runner import ExperimentRunner
from xlrag.evals.studies import write_reports

CALLS = "cache.sqlite"  # every model call of the run: a resumed run makes none of them again


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--experiment", type=Path, default=HERE / "experiments" / "travel_offline.yaml")
    ap.add_argument("--per-lang", type=int, default=None, help="override the sample size (trial runs)")
    ap.add_argument("--out", default="travel_report", help="folder name under benchmarks/results")
    args = ap.parse_args()
    cfg = load_experiment(args.experiment)
    if not cfg.datasets[0].queries.exists():
        sys.exit(f"{cfg.datasets[0].queries} is missing")
    if args.per_lang:
        for ds in cfg.datasets:
            ds.sample.per_lang = args.per_lang
    run_dir = CACHE / args.out
    dest = RESULTS / args.out
    if not (run_dir / RECORDS).exists() and (dest / RECORDS).exists():
        run_dir.mkdir(parents=True, exist_ok=True)
        for name in (RECORDS, CALLS):
            if (dest / name).exists():
                shutil.copy2(dest / name, run_dir / name)
        print(f"resuming from {dest}")
    t0 = time.perf_counter()
    runner = ExperimentRunner(cfg, run_dir, progress=lambda what, done, total: print(
        f"\r{what} {done}/{total} {time.perf_counter() - t0:.0f}s", end="", flush=True))
    try:
        summary = runner.run()
        print(f"\n{dict(summary)} in {time.perf_counter() - t0:.0f}s")
    finally:  # a stopped run still leaves its records and calls to resume from
        runner.close()
        publish(run_dir, dest)


def publish(run_dir: Path, dest: Path) -> None:
    from experiments import publish_run

    publish_run(run_dir, dest, write_reports)


if __name__ == "__main__":
    main()
