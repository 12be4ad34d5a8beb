"""Helpers shared by the benchmarks (not part of the package)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

# The one seeded bootstrap (mean, low, high); the benchmarks import it from here.
from xlrag.evals.stats import bootstrap_ci

__all__ = ["CACHE", "RESULTS", "SHARED", "bootstrap_ci", "provenance", "read_jsonl", "support_rates", "write_json"]

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache"
RESULTS = HERE / "results"
SHARED = HERE.parent.parent / "shared" / "data"


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def provenance(root: Path = HERE.parent) -> dict:
    """Which code a run measures: the checkout's commit and the code files that differed from
    it (``xlrag/`` and ``benchmarks/``, results aside: a run rewrites those itself). A committed
    figure that no longer reproduces can then be traced to its code."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30,
                              check=True).stdout

    try:
        commit = git("rev-parse", "--short=12", "HEAD").strip()
        changed = git("status", "--porcelain", "--untracked-files=no", "--", "xlrag", "benchmarks",
                      ":(exclude)benchmarks/results")
        modified = sorted(line[3:] for line in changed.splitlines() if line.strip())
    except (OSError, subprocess.SubprocessError):
        commit, modified = "unknown (not a git checkout)", []
    return {"commit": commit, "modified": modified}


# Taken as the run starts, when it loads the code: a run of hours may end after a commit.
_CODE = provenance()


def write_json(name: str, payload: dict, results: Path = RESULTS) -> Path:
    """Write ``results/<name>`` stamped with the :func:`provenance` of the code this run
    started with, and the time. A script that merges its arms into the file it read
    (``rerank_methods``, ``channels``) hands back the old stamp; when it came from other code
    (another commit, or modified files), it is kept under ``earlier``, so a file that mixes
    runs of two versions says so."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / name
    stamp = {**_CODE, "written": datetime.now(UTC).isoformat(timespec="seconds")}
    old = payload.get("provenance")
    if isinstance(old, dict):
        earlier = [*old.get("earlier", []), {k: v for k, v in old.items() if k != "earlier"}]
        earlier = [e for e in earlier
                   if (e.get("commit"), e.get("modified")) != (stamp["commit"], stamp["modified"])]
        if earlier:
            stamp["earlier"] = earlier
    # The stamp goes first so it is the first thing a reader of the file sees.
    body = {"provenance": stamp, **{k: v for k, v in payload.items() if k != "provenance"}}
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


def support_rates(results: list[dict], rules: tuple[str, ...]) -> dict[str, dict]:
    """The support check's rates on answers of known truth, per source (all, Travel read by
    hand, XQuAD judged): right answers supported and wrong ones caught under each rule (a
    result's ``rules`` keys hold its verdict: True for supported)."""
    def rate(sel: list[dict], key: str, want: bool) -> dict:
        hits = [float(x[key] is want) for x in sel]
        mean, lo, hi = bootstrap_ci(hits) if hits else (None, None, None)
        return {"mean": mean, "ci95": [lo, hi], "n": len(hits)}

    out = {}
    for name, sel in (("all", results), ("travel_by_hand", [x for x in results if x["by"] == "hand"]),
                      ("xquad_judged", [x for x in results if x["by"] == "judge"])):
        right, wrong = [x for x in sel if x["truth"]], [x for x in sel if not x["truth"]]
        out[name] = {"translated": sum(x["translated"] for x in sel),
                     "right_supported": {k: rate(right, k, True) for k in rules},
                     "wrong_unsupported": {k: rate(wrong, k, False) for k in rules}}
    return out


def memory_status() -> dict[str, int]:
    """This process's resident memory (bytes): total, its peak, and the file-backed part (mapped
    files, which the kernel can drop and other processes share) apart from the anonymous part."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) * 1024
    return out


def run_child(script: str, *args: str, checkout: Path | None = None) -> dict:
    """``script`` run with ``args`` in a fresh Python process (its memory its own); the JSON
    object its last line of output prints. With ``checkout``, the child runs in that folder
    and imports its ``xlrag`` (a worktree of another commit)."""
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    if checkout is not None:
        env["PYTHONPATH"] = str(checkout)
    out = subprocess.run([sys.executable, script, *args], capture_output=True, text=True, env=env, cwd=checkout,
                         check=False)
    if out.returncode:
        where = f" in {checkout}" if checkout is not None else ""
        raise SystemExit(f"{args[:2]} failed{where}:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def unique_word(i: int) -> str:
    """A word of passage ``i``'s own, letters only: one term of any analyzer's own kind, never
    split or stemmed away, so a synthetic corpus's vocabulary grows with it."""
    word = ""
    while True:
        i, r = divmod(i, 26)
        word += chr(97 + r)
        if i == 0:
            return "qz" + word
