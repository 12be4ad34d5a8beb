"""The calibrated judge on real Travel answers, against labels read by hand (issue #20).

The calibration items (``xlrag eval calibrate``) are made from the data; the Travel report
judges what a model wrote. ``benchmarks/data/travel/answer_labels.jsonl`` holds the 34
answers of the report's ``balanced`` cell (Qwen2.5-Coder-1.5B, ``benchmarks/results/
experiments/travel_retrieval``), each labelled by a maintainer who read the answer against
the gold answer: correct when it gives what the gold says and contradicts none of it (a
partial or misleading answer is incorrect; a "no data" where the gold has no answer either is
correct). The note says why, for the incorrect ones.

The judge votes on two texts: what the report judges (the answer and the explanation, as
``eval run`` passes them) and the answer line alone. Accuracy, Cohen's kappa and the
confusion counts come per text and language.

    python benchmarks/judge_travel.py

Writes benchmarks/results/judge_travel.json.
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import HERE, bootstrap_ci, read_jsonl, write_json

from xlrag.evals.agreement import cohen_kappa
from xlrag.judges.lexical import LexicalJudge, LexicalJudgeConfig

LABELS = HERE / "data" / "travel" / "answer_labels.jsonl"


def figures(rows: list[dict], votes: list[bool]) -> dict:
    truth = [r["label"] == "correct" for r in rows]
    right = [float(v == t) for v, t in zip(votes, truth, strict=True)]
    mean, lo, hi = bootstrap_ci(right)
    counts = Counter((("correct" if t else "incorrect"), ("correct" if v else "incorrect"))
                     for v, t in zip(votes, truth, strict=True))
    return {"n": len(rows), "accuracy": {"mean": mean, "ci95": [lo, hi]},
            "kappa": cohen_kappa([str(v) for v in votes], [str(t) for t in truth]),
            "judged_correct": sum(votes), "labelled_correct": sum(truth),
            "confusion": {f"label {a}, vote {b}": n for (a, b), n in sorted(counts.items())}}


def main() -> None:
    rows = read_jsonl(LABELS)
    judge = LexicalJudge(LexicalJudgeConfig(kind="lexical"))
    texts = {"answer_and_explanation": lambda r: "\n".join(x for x in (r["answer"], r["explanation"]) if x),
             "answer_line": lambda r: r["answer"] or ""}
    out: dict = {"benchmark": "judge_travel", "judge": judge.config.label,
                 "labels": str(LABELS.relative_to(HERE.parent)),
                 "figures": {}, "rows": []}
    votes: dict[str, list[bool]] = {}
    for name, text in texts.items():
        votes[name] = [judge.vote(r["question"], r["gold"], text(r), r["lang"])[0] for r in rows]
        out["figures"][name] = {"all": figures(rows, votes[name])}
        for lang in sorted({r["lang"] for r in rows}):
            idx = [i for i, r in enumerate(rows) if r["lang"] == lang]
            out["figures"][name][lang] = figures([rows[i] for i in idx], [votes[name][i] for i in idx])
    out["rows"] = [{"key": r["key"], "label": r["label"], **{name: votes[name][i] for name in texts}}
                   for i, r in enumerate(rows)]
    path = write_json("judge_travel.json", out)
    for name, fig in out["figures"].items():
        a = fig["all"]
        print(f"{name}: accuracy {a['accuracy']['mean']:.2f} {a['accuracy']['ci95']}, kappa {a['kappa']:.2f}, "
              f"judged correct {a['judged_correct']} / labelled {a['labelled_correct']} of {a['n']}; {a['confusion']}")
    print(f"written {path}")


if __name__ == "__main__":
    main()
