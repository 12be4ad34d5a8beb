"""Which commits change the passages the answer benchmarks show, above the noise of HNSW.

A local index's HNSW graph is rebuilt in part by every process that opens it (the vectors written
after Chroma's last sync are inserted again on load; ``benchmarks/hnsw_processes.py``), so one
question's top k can differ between two runs of one commit. To place a change in a commit, each
commit here runs ``--runs`` times, each run in a fresh process in a git worktree of that commit,
all over one copy of the index. A question whose hits differ between two runs of any commit is a
*flapper*; a step from one commit to the next *changes* a question when their first runs differ
on it and it is not a flapper.

The questions are ``benchmarks/xquad_heldout.py``'s (``--questions heldout``, ``--per-lang`` a
language, seeded) or the answer benchmark's 100 (``--questions answers``: 60 XQuAD, 40 Travel),
through the retriever of their chain: ``balanced``, k = 3, the answer benchmark's share margin,
the default channels, over the answer benchmark's index (``benchmarks/.cache/agent-index``, which
``answers.py`` builds). Every commit must have ``xquad_heldout.py`` (28 Nov on).

    python benchmarks/retrieval_commits.py --commits b3eefb1,d78b138^,d78b138,HEAD [--runs 2]
                                           [--questions heldout|answers] [--out retrieval_commits.json]

Writes benchmarks/results/retrieval_commits.json (or ``--out``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def child(index: Path, questions: str, per_lang: int) -> None:
    """One run at the checkout in the working directory: every question's hit ids, as JSON."""
    sys.path.insert(0, str(Path.cwd() / "benchmarks"))  # the commit's own benchmark helpers
    import answer_arms
    from xquad_heldout import MARGIN, held_out

    from xlrag.demo import demo_embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores
    from xlrag.schema import make_query

    embedder = demo_embedder()
    stores = LanguageStores.open(index, embedder.name, embedder.dim)
    retriever = CrossLingualRetriever(stores, embedder, "balanced", k=3, share_margin=MARGIN)
    hits = {q["id"]: [h.id for h in retriever.retrieve(make_query(q["question"], lang=q["lang"])).hits]
            for q in (held_out(answer_arms.XQUAD_LANGS, per_lang) if questions == "heldout"
                      else answer_arms.questions())}
    retriever.close()
    print(json.dumps(hits))


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()


def resolve(rev: str) -> str:
    try:
        return git("rev-parse", "--short=12", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError:
        raise SystemExit(f"--commits: {rev!r} names no commit of this repository (git rev-parse)") from None


def steps(commits: list[str], runs: dict[str, list[dict[str, list[str]]]]) -> tuple[list[str], list[dict]]:
    """The flappers, and per step between consecutive commits the questions whose first runs
    differ, and those of them that are not flappers."""
    questions = list(runs[commits[0]][0])
    flappers = sorted(q for q in questions
                      if any(len({tuple(r[q]) for r in rs}) > 1 for rs in runs.values()))
    out = []
    for a, b in itertools.pairwise(commits):
        differ = [q for q in questions if runs[a][0][q] != runs[b][0][q]]
        out.append({"from": a, "to": b, "differ": len(differ),
                    "changed": [q for q in differ if q not in flappers]})
    return flappers, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", default="", help="comma-separated revisions, oldest first")
    ap.add_argument("--runs", type=int, default=2, help="fresh processes per commit")
    ap.add_argument("--questions", choices=["heldout", "answers"], default="heldout")
    ap.add_argument("--per-lang", type=int, default=20, help="with --questions heldout")
    ap.add_argument("--index", type=Path, default=HERE / ".cache" / "agent-index")
    ap.add_argument("--out", default="retrieval_commits.json", help="file name under benchmarks/results/")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.index, args.questions, args.per_lang)
        return
    sys.path.insert(0, str(HERE))
    from _common import run_child, write_json

    if args.runs < 1:
        raise SystemExit(f"--runs {args.runs}: give 1 or more (2 or more to tell a change from run-to-run noise)")
    if not args.index.is_dir():
        raise SystemExit(f"no index at {args.index}: run benchmarks/answers.py once to build it, or pass --index")
    revs = [r.strip() for r in args.commits.split(",") if r.strip()]
    # two revisions may name one commit (d01c2ef^ is 0567c39): each commit once, in order
    commits = list(dict.fromkeys(resolve(r) for r in revs))
    if len(commits) < 2:
        raise SystemExit("--commits needs two commits or more, oldest first (e.g. b3eefb1,HEAD)")
    runs: dict[str, list[dict[str, list[str]]]] = {}
    with tempfile.TemporaryDirectory(prefix="xlrag-commits-") as tmp:
        # one copy of the index for every commit, so no run writes to the user's
        index = Path(tmp) / "index"
        shutil.copytree(args.index, index)
        for commit in commits:
            worktree = Path(tmp) / commit
            git("worktree", "add", "--detach", str(worktree), commit)
            try:
                runs[commit] = [run_child(__file__, "--child", "--index", str(index), "--questions", args.questions,
                                          "--per-lang", str(args.per_lang), checkout=worktree)
                                for _ in range(args.runs)]
            finally:
                git("worktree", "remove", "--force", str(worktree))
            print(f"{commit}: {args.runs} runs", flush=True)
    flappers, changes = steps(commits, runs)
    for s in changes:
        print(f"{s['from']} -> {s['to']}: {s['differ']} differ, {len(s['changed'])} changed")
    result = {"benchmark": "retrieval_commits", "questions": len(runs[commits[0]][0]), "question_set": args.questions,
              "per_lang": args.per_lang if args.questions == "heldout" else None,
              "retriever": "balanced, k = 3, the answer benchmark's share margin, default channels",
              "runs_per_commit": args.runs,
              "commits": [{"commit": c, "subject": git("log", "-1", "--format=%s", c)[:160]} for c in commits],
              "flappers": flappers, "steps": changes,
              "first_run_hits": {c: runs[c][0] for c in commits}}
    print(f"written {write_json(args.out, result)}")


if __name__ == "__main__":
    main()
