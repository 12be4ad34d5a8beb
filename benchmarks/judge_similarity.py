"""The lexical judge's cross-lingual threshold, fixed on answers no calibration item uses.

A response in another language than the gold answers is judged by the cosine of their
multilingual-e5 embeddings (:mod:`xlrag.judges.lexical`). This sweeps that cosine on
XQuAD parallel answers, leaving out every (gold, response) pair a calibration item
(:func:`build_items`) holds: positives are a question's gold in language A against its
parallel gold in language B; negatives are the gold of another question on the same passage,
in B. The calibration's cross-lingual items are 84 of these ~2,900 pairs; the answers are the
same XQuAD answers, so this is held out by pair, not by passage (every passage has items).
Only pairs the judge would route to the embedding (:func:`in_other_language`) count. The threshold with the best
balanced accuracy is the judge's ``DEFAULT_SIMILARITY``.

    python benchmarks/judge_similarity.py    # writes benchmarks/results/judge_similarity.json
"""

from __future__ import annotations

import sys
from collections import defaultdict
from itertools import permutations
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import HERE, read_jsonl, write_json

from xlrag.evals.calibration_items import build_items
from xlrag.judges.lexical import DEFAULT_SIMILARITY, _Similarity, in_other_language


def pairs() -> list[tuple[str, str, str, bool]]:
    """``(lang of the gold, gold, response, truth)`` that no calibration item holds."""
    queries = read_jsonl(HERE.parent / "xlrag" / "data" / "xquad" / "queries.jsonl")
    base = {q["id"]: q["id"].rsplit("-", 1)[0] for q in queries}
    doc_of = {base[q["id"]]: q["gold_doc_id"].rsplit("-", 1)[0] for q in queries}
    used = {(i.gold[0], i.answer) for i in build_items() if i.dataset == "xquad"}
    parallel: dict[str, dict[str, str]] = defaultdict(dict)
    for q in queries:
        parallel[base[q["id"]]][q["lang"]] = q["answers"][0]
    by_doc: dict[str, list[str]] = defaultdict(list)
    for b in sorted(parallel):
        by_doc[doc_of[b]].append(b)
    out = []
    for _, bases in sorted(by_doc.items()):
        for b in bases:
            others = [o for o in bases if o != b]
            for la, lb in permutations(sorted(parallel[b]), 2):
                gold, same = parallel[b][la], parallel[b][lb]
                if (gold, same) not in used and in_other_language(same, [gold], la):
                    out.append((la, gold, same, True))
                for o in others[:1]:
                    wrong = parallel[o].get(lb)
                    if wrong and wrong != same and (gold, wrong) not in used and in_other_language(wrong, [gold], la):
                        out.append((la, gold, wrong, False))
    return out


def main() -> None:
    rows = pairs()
    sims = [_Similarity.best(resp, [gold])[0] for _, gold, resp, _ in rows]
    pos = [s for s, r in zip(sims, rows, strict=True) if r[3]]
    neg = [s for s, r in zip(sims, rows, strict=True) if not r[3]]

    def balanced(t: float) -> float:
        return (sum(s >= t for s in pos) / len(pos) + sum(s < t for s in neg) / len(neg)) / 2

    sweep = {round(t / 200, 3): round(balanced(t / 200), 4) for t in range(150, 195)}
    best = max(sweep, key=lambda t: (sweep[t], -abs(t - 0.85)))
    result = {"benchmark": "judge_similarity", "pairs": len(rows), "positives": len(pos), "negatives": len(neg),
              "best_threshold": best, "best_balanced_accuracy": sweep[best],
              "default_similarity": DEFAULT_SIMILARITY, "default_balanced_accuracy": balanced(DEFAULT_SIMILARITY),
              "sweep": sweep}
    print({k: v for k, v in result.items() if k != "sweep"})
    print(f"written {write_json('judge_similarity.json', result)}")


if __name__ == "__main__":
    main()
