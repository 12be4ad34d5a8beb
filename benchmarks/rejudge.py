"""Judge the answers of a finished grid run again, with its experiment's panel as it is now.

When a judge changes (a new rule of the lexical judge, a recalibrated panel), the answers
need not be generated again: every record that holds an answer is judged again on the same
text ``eval run`` judged (the answer and explanation, or nothing when the reply held no
answer), with XRAG's language rule on the record's own language verdict, and the reports
are rebuilt. The records file is replaced in one move, so a kill leaves the old one whole.

    python benchmarks/rejudge.py benchmarks/results/experiments/travel_retrieval
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from pathlib import Path

from xlrag.evals.experiment import load_experiment
from xlrag.evals.run_folder import RECORDS
from xlrag.evals.studies import write_reports
from xlrag.judges.panel import JudgePanel


async def rejudge(run_dir: Path) -> tuple[int, int]:
    cfg = load_experiment(run_dir / "experiment.yaml")
    if cfg.judges is None:
        sys.exit(f"{run_dir}/experiment.yaml has no judges: nothing to judge again")
    panel = JudgePanel(cfg.judges)
    rows = [json.loads(line) for line in (run_dir / RECORDS).read_text(encoding="utf-8").splitlines() if line.strip()]
    changed = judged = 0
    for r in rows:
        if "judges" not in r:
            continue
        text = "\n".join(p for p in (r.get("answer"), r.get("explanation")) if p and p.strip()) or r["raw_output"]
        pv = await panel.ajudge(r["question"], r["golds"], text if r["answered"] else "", r["lang"])
        status = r["language"]["status"]  # LanguageVerdict.correct, from the stored verdict
        new = pv.model_dump() | {"final": pv.final(None if status == "not_applicable" else status == "correct")}
        changed += new["final"] != r["judges"].get("final")
        judged += 1
        r["judges"] = new
    tmp = run_dir / f"{RECORDS}.tmp"
    with tmp.open("w", encoding="utf-8") as fh:
        fh.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(run_dir / RECORDS)
    return judged, changed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_dir", type=Path)
    args = ap.parse_args()
    judged, changed = asyncio.run(rejudge(args.run_dir))
    paths = write_reports(args.run_dir)
    print(f"{judged} answers judged again, {changed} final verdicts changed; reports: "
          f"{', '.join(map(str, paths.values()))}")


if __name__ == "__main__":
    main()
