"""The seed studies' reports (issue #10): run one file of experiments/ with the local models.

The run folder lives in benchmarks/.cache/experiments/<name> (resumable: run the script again
after a kill). The reports, records and model-call cache are copied to
benchmarks/results/experiments/<name>/, and a new machine resumes from that copy.

    python benchmarks/experiments.py bordirlines [--set territories=../shared/data/borderlines]
    python benchmarks/experiments.py xrag --publish   # the reports of a killed run, published
"""

from __future__ import annotations

import argparse
import shutil
import sqlite3
import sys
import time
from collections.abc import Callable
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, HERE, RESULTS

from xlrag.evals.run_folder import RECORDS

EXPERIMENTS = HERE.parent / "experiments"
CALLS = "cache.sqlite"


def main() -> None:
    names = sorted(p.stem for p in EXPERIMENTS.glob("*.yaml"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("name", choices=names)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override a top-level key of the YAML (the value is read as YAML)")
    ap.add_argument("--publish", action="store_true",
                    help="only rebuild and publish the reports of the run folder (after a run was killed)")
    args = ap.parse_args()
    overrides = {}
    for item in args.set:
        key, _, value = item.partition("=")
        overrides[key] = yaml.safe_load(value)  # paths in them are taken from the current folder
    run_dir, dest = CACHE / "experiments" / args.name, RESULTS / "experiments" / args.name
    if args.publish:
        from xlrag.evals.studies import write_reports

        if not (run_dir / RECORDS).exists():
            sys.exit(f"error: no run in {run_dir}; run `python benchmarks/experiments.py {args.name}` first")
        publish_run(run_dir, dest, write_reports)
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    if not (run_dir / RECORDS).exists() and (dest / RECORDS).exists():
        for name in (RECORDS, CALLS):
            if (dest / name).exists():
                shutil.copy2(dest / name, run_dir / name)
        print(f"resuming from {dest}")
    run(EXPERIMENTS / f"{args.name}.yaml", overrides, run_dir, dest)


def run(path: Path, overrides: dict, run_dir: Path, dest: Path) -> None:
    from xlrag.evals.studies import load_run_config, make_runner, write_reports

    cfg = load_run_config(path)
    if overrides:
        cfg = type(cfg).model_validate({**cfg.model_dump(), **overrides})
        if hasattr(cfg, "resolved"):  # a study's paths; a grid's datasets keep theirs
            cfg = cfg.resolved(Path.cwd())
    t0 = time.perf_counter()

    def progress(_: str, done: int, total: int) -> None:
        print(f"\rrecords {done}/{total} {time.perf_counter() - t0:.0f}s", end="", flush=True)

    runner = make_runner(cfg, run_dir, progress)
    try:
        print(f"\n{runner.run()} in {time.perf_counter() - t0:.0f}s")
    finally:
        runner.close()
        publish_run(run_dir, dest, write_reports)


def publish_run(run_dir: Path, dest: Path, write: Callable[[Path], dict[str, Path]]) -> None:
    """Write the reports and copy them, the records, the call cache and what rebuilds them to ``dest``."""
    with sqlite3.connect(run_dir / CALLS) as conn:  # calls left in the write-ahead log belong in the copy
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    paths = write(run_dir)
    dest.mkdir(parents=True, exist_ok=True)
    # the inventories hold each index's document languages and counts: without them a report
    # rebuilt from dest would have no retrieval metrics
    inventories = [p.name for p in run_dir.glob("inventory-*.json")]
    for name in (RECORDS, CALLS, "experiment.yaml", "versions.json", *inventories, *(p.name for p in paths.values())):
        shutil.copy2(run_dir / name, dest / name)
    print(f"reports in {dest}")


if __name__ == "__main__":
    main()
