"""llama.cpp threads against the cores they run on: why a local model's default thread count is
the cores its process may use (``usable_cores``), and why ``make test`` gives each worker its own.

Each scenario runs processes that each load the default model and answer the same three prompts
(about 330 tokens each, 48 tokens written, a different first word per call and per process, so
no prefix state is restored), all processes at once; the figure is a process's seconds for its
three answers, from after a warm-up call:

* ``alone``: one process, with as many threads as the machine has cores, and with one;
* ``two at once``: two processes on the same cores, both with that many threads, and both with one;
* ``two pinned``: two processes, each held to its own share of the cores (``os.sched_setaffinity``,
  as tests/conftest.py holds each xdist worker), the thread count left to the default.

    python benchmarks/threads.py [--model qwen2.5-coder-1.5b-instruct]

Writes benchmarks/results/threads.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_json

TEXT = ("The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading "
        "the NFL in interceptions with 24 and boasting four Pro Bowl selections. ") * 8
CALLS = 3


def answer(model: str, threads: int | None, tag: str, cores: list[int] | None) -> None:
    """One process's run (``--child``): prints its seconds for ``CALLS`` answers as JSON."""
    if cores is not None:
        os.sched_setaffinity(0, cores)
    from langchain_core.messages import HumanMessage

    from xlrag.chains.llms import build_llm
    from xlrag.chains.local.loaded import usable_cores
    from xlrag.config import LLMConfig

    llm = build_llm(LLMConfig(model=model, max_tokens=48, n_threads=threads))
    llm.invoke([HumanMessage(f"warm up {tag}")])
    t0 = time.perf_counter()
    for i in range(CALLS):
        llm.invoke([HumanMessage(f"{tag} {i}. Read this and say in one sentence what it is about:\n{TEXT}")])
    print(json.dumps({"seconds": time.perf_counter() - t0, "threads": threads or usable_cores(),
                      "cores": sorted(os.sched_getaffinity(0))}))


def run(model: str, specs: list[tuple[int | None, list[int] | None]]) -> list[dict]:
    """The processes of one scenario, started together; each one's report."""
    procs = [subprocess.Popen([sys.executable, __file__, "--child", "--model", model, "--tag", f"p{i}",
                               "--threads", str(threads or 0), "--cores", json.dumps(cores)],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
             for i, (threads, cores) in enumerate(specs)]
    out = []
    for p in procs:
        stdout, _ = p.communicate(timeout=1800)
        if p.returncode:
            sys.exit(f"a child process failed (exit {p.returncode})")
        out.append(json.loads(stdout.strip().splitlines()[-1]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-1.5b-instruct")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--tag", default="p0", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--cores", default="null", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        answer(args.model, args.threads or None, args.tag, json.loads(args.cores))
        return
    cores = sorted(os.sched_getaffinity(0))
    n, half = len(cores), len(cores) // 2
    if half < 1:
        sys.exit("this benchmark needs at least two cores")
    scenarios = {
        f"alone, {n} threads": [(n, None)],
        "alone, 1 thread": [(1, None)],
        f"two at once, {n} threads each": [(n, None), (n, None)],
        "two at once, 1 thread each": [(1, None), (1, None)],
        "two pinned, default threads": [(None, cores[:half]), (None, cores[half:2 * half])],
    }
    figures = {}
    for name, specs in scenarios.items():
        reports = run(args.model, specs)
        figures[name] = {"seconds": [round(r["seconds"], 2) for r in reports],
                         "mean_seconds": round(statistics.fmean(r["seconds"] for r in reports), 2),
                         "threads": [r["threads"] for r in reports], "cores": [r["cores"] for r in reports]}
        print(f"{name:34s} {figures[name]['seconds']}", flush=True)
    shared = figures[f"two at once, {n} threads each"]["mean_seconds"]
    result = {"benchmark": "threads", "model": args.model, "cores": n, "calls_per_process": CALLS,
              "scenarios": figures,
              # the cost of threads beyond the cores: the same two processes, n threads each against one
              "shared_cores_n_threads_over_1_thread": round(shared / figures["two at once, 1 thread each"]
                                                            ["mean_seconds"], 2),
              "shared_cores_n_threads_over_pinned": round(shared / figures["two pinned, default threads"]
                                                          ["mean_seconds"], 2)}
    print(json.dumps(result, indent=1))
    print(f"written {write_json('threads.json', result)}")


if __name__ == "__main__":
    main()
