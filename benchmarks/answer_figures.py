"""The answer benchmark's figures, read from its rows (``benchmarks/answers.py`` makes the
rows; ``benchmarks/answer_arms.py`` owns the arms, the questions and their gold): each arm's
summary with 95% bootstrap intervals, issue #33's paired comparisons, the reruns that must
reproduce earlier answers, the hand-labelled Travel check and where answers are lost.
Everything here is a pure function of the rows, so the committed figures rebuild from the
committed rows (tests/evals/test_committed_reports.py)."""

from __future__ import annotations

import random
import statistics
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import bootstrap_ci, read_jsonl
from answer_arms import ARMS, HAND_LABELS, gold_pages


def _ci(vals: list[float]) -> dict:
    mean, lo, hi = bootstrap_ci(vals)
    return {"mean": mean, "ci95": [lo, hi], "n": len(vals)}


def summarize(rows: list[dict]) -> dict:
    out: dict = {}
    for arm in ARMS:
        rs = [r for r in rows if r["arm"] == arm]
        if not rs:
            continue
        out[arm] = {}
        for source in ("all", "xquad", "travel"):
            sub = [r for r in rs if source in ("all", r["source"])]
            if not sub:
                continue
            fig = {
                "n": len(sub),
                "lang_correct": _ci([float(r["lang_correct"]) for r in sub if r["lang_correct"] is not None]),
                "non_answer": _ci([float(r["non_answer"]) for r in sub]),
                "non_answer_presented_as_verified": sum(r["non_answer_verified"] for r in sub),
                "char3": _ci([r["char3"] for r in sub]),
                "char3_response": _ci([r["char3_response"] for r in sub]),
                "f1": _ci([r["f1"] for r in sub]),
                "model_cited": _ci([float(r["model_cited"]) for r in sub]),
                "seconds": _ci([r["seconds"] for r in sub]),
                "seconds_median": round(statistics.median(r["seconds"] for r in sub), 2),
                "template_copies": sum("prompt_echo" in r["flags"] for r in sub),
                "invalid_citation": sum(bool(r["invalid_citation"]) for r in sub),
            }
            used = [r["usage"] for r in sub if r.get("usage")]
            if used:
                for key in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens"):
                    fig[key] = _ci([float(u[key]) for u in used if u.get(key) is not None])
                ttft = [u["time_to_first_token"] for u in used if u.get("time_to_first_token") is not None]
                if ttft:
                    fig["time_to_first_token"] = _ci(ttft)
                    fig["time_to_first_token_median"] = round(statistics.median(ttft), 2)
            judged = [r for r in sub if r.get("panel") in ("correct", "incorrect")]
            if judged:
                fig["panel_accuracy"] = _ci([float(r["panel_final"] == "correct") for r in judged])
                fig["panel_no_majority"] = sum(r.get("panel") not in ("correct", "incorrect") for r in sub)
            if source == "all":
                fig["per_lang_char3"] = {lang: round(sum(r["char3"] for r in sub if r["lang"] == lang)
                                                     / max(1, sum(r["lang"] == lang for r in sub)), 3)
                                         for lang in sorted({r["lang"] for r in sub})}
            if judged and source == "all":
                # "no language below today's figure" (#33): judged correct per stratum, as counts
                strata: dict[str, list[bool]] = defaultdict(list)
                for r in judged:
                    strata[r["lang"] if r["source"] == "xquad" else f"travel:{r['lang']}"].append(
                        r["panel_final"] == "correct")
                fig["per_lang_judged"] = {k: f"{sum(v)}/{len(v)}" for k, v in sorted(strata.items())}
            out[arm][source] = fig
        if rs[0]["repairs"] is not None and ARMS[arm].driver == "agent":
            out[arm]["all"]["repairs"] = dict(sorted(defaultdict(int, {
                k: sum(k in r["repairs"] for r in rs) for k in {x for r in rs for x in r["repairs"]}}).items()))
            out[arm]["all"]["unrepaired"] = sum(bool(r["unrepaired"]) for r in rs)
    return out


BASELINE = "chain/balanced"


def paired(rows: list[dict]) -> dict:
    """Each arm against the baseline on the questions both answered (the variants ran on a
    prefix of the questions): ``{arm: {"n", "arm": figures, "baseline": figures}}``."""
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by[r["arm"]][r["id"]] = r
    out = {}
    for arm in ARMS:
        if arm == BASELINE or arm not in by:
            continue
        ids = sorted(set(by[arm]) & set(by[BASELINE]))
        if not ids:
            continue
        figs = {}
        for name, rs in (("arm", [by[arm][i] for i in ids]), ("baseline", [by[BASELINE][i] for i in ids])):
            lang = [float(r["lang_correct"]) for r in rs if r["lang_correct"] is not None]
            figs[name] = {k: round(sum(float(r[k]) for r in rs) / len(rs), 3)
                          for k in ("non_answer", "char3", "char3_response", "f1", "model_cited")}
            figs[name]["lang_correct"] = round(sum(lang) / len(lang), 3) if lang else None
        out[arm] = {"n": len(ids), **figs}
    return out


# issue #33: the candidate default against the configuration before it, on the same questions
COMPARED = (("chain/after", "chain/before"), ("agent/after", "agent/before"), ("chain/form", "chain/before"),
            ("agent/form", "agent/before"), ("chain/static", "chain/before"),
            # the agent against the chain it checks and repairs, made in one run on one machine
            ("agent/before", "chain/before/again"),
            # the third run: decoding with prompt-lookup drafts, and the agent's own clock
            ("chain/before/lookup", "chain/before/now"), ("agent/before/own", "chain/before/now"),
            # the fourth: the reply stopped at its explanation header, the chain's and the agent's
            ("chain/before/brief", "chain/before/clock"), ("agent/before/brief", "chain/before/clock"),
            # the fifth: the explanation opened in the user's language
            ("chain/before/opener", "chain/before/noopener"),
            # the sixth: the explanation opened after the answer line (answer.explanation_opener)
            ("chain/before/opened", "chain/before/unopened"),
            # the seventh: today's default agent against today's default chain; the eighth:
            # the chain over qlang_en
            ("agent/now", "chain/now"), ("chain/now/qlang_en", "chain/now"),
            # the ninth: balanced with a share margin, the chain and the agent, on this run's clock
            # (the agent against the seventh run's agent, which the clock ties to this run)
            ("chain/now/shares", "chain/now/again"), ("agent/now/shares", "agent/now"),
            # the tenth: five passages with the margin, against the ninth run's clock
            ("chain/now/shares/k5", "chain/now/again"))


def _median_ratio(old: list[float], new: list[float], n: int = 1000, seed: int = 13) -> dict:
    """median(old) / median(new) over paired questions, with a 95% bootstrap interval."""
    rng = random.Random(seed)
    idx = range(len(old))
    ratios = []
    for _ in range(n):
        pick = rng.choices(idx, k=len(old))
        ratios.append(statistics.median(old[i] for i in pick) / statistics.median(new[i] for i in pick))
    ratios.sort()
    return {"ratio": round(statistics.median(old) / statistics.median(new), 3),
            "ci95": [round(ratios[int(0.025 * n)], 3), round(ratios[int(0.975 * n) - 1], 3)],
            "old_median": round(statistics.median(old), 2), "new_median": round(statistics.median(new), 2)}


def _paired(rows: list[dict], old: str, new: str) -> list[tuple[dict, dict]]:
    """``(old row, new row)`` for each question both arms answered, by question id."""
    by: dict[str, dict[str, dict]] = defaultdict(dict)
    for r in rows:
        by[r["arm"]][r["id"]] = r
    return [(by[old][i], by[new][i]) for i in sorted(set(by[new]) & set(by[old]))]


def compare(rows: list[dict], new: str, old: str) -> dict | None:
    """``new`` against ``old`` on the questions both answered: each figure's mean in both arms and
    the paired difference with its 95% bootstrap interval; per language, the judged accuracy;
    the speed-up of the median seconds and time to first token."""
    pairs = _paired(rows, old, new)
    if not pairs:
        return None
    ids = [a["id"] for a, _ in pairs]

    def correct(r: dict) -> float | None:
        return None if r.get("panel_final") is None else float(r["panel_final"] == "correct")

    figures = {
        "correct": correct,
        "lang_correct": lambda r: None if r["lang_correct"] is None else float(r["lang_correct"]),
        "non_answer": lambda r: float(r["non_answer"]),
        "char3": lambda r: r["char3"],
        "char3_response": lambda r: r["char3_response"],
        "f1": lambda r: r["f1"],
        "model_cited": lambda r: float(r["model_cited"]),
    }
    out: dict = {"n": len(ids), "new": new, "old": old}
    for source in ("all", "xquad", "travel"):
        sub = [(a, b) for a, b in pairs if source in ("all", a["source"])]
        fig = {}
        for name, get in figures.items():
            both = [(get(a), get(b)) for a, b in sub if get(a) is not None and get(b) is not None]
            if not both:
                continue
            mean, lo, hi = bootstrap_ci([y - x for x, y in both])
            fig[name] = {"old": round(sum(x for x, _ in both) / len(both), 3),
                         "new": round(sum(y for _, y in both) / len(both), 3),
                         "difference": round(mean, 3), "ci95": [round(lo, 3), round(hi, 3)], "n": len(both)}
        for name in ("template_copies", "invalid_citation", "non_answer_verified"):
            def count(r: dict, name: str = name) -> int:
                return int("prompt_echo" in r["flags"]) if name == "template_copies" else int(bool(r[name]))
            fig[name] = {"old": sum(count(a) for a, _ in sub), "new": sum(count(b) for _, b in sub)}
        out[source] = fig
    per_lang: dict[str, dict] = {}
    for source, lang in sorted({(a["source"], a["lang"]) for a, _ in pairs}):
        ps = [(correct(a), correct(b)) for a, b in pairs if (a["source"], a["lang"]) == (source, lang)]
        ps = [(x, y) for x, y in ps if x is not None and y is not None]
        if ps:
            per_lang[f"{source}:{lang}"] = {"old": round(sum(x for x, _ in ps) / len(ps), 3),
                                            "new": round(sum(y for _, y in ps) / len(ps), 3), "n": len(ps)}
    out["per_lang_correct"] = per_lang
    out["seconds_speedup"] = _median_ratio([a["seconds"] for a, _ in pairs], [b["seconds"] for _, b in pairs])
    timed = [(a["usage"], b["usage"]) for a, b in pairs if a.get("usage") and b.get("usage")
             and a["usage"].get("time_to_first_token") and b["usage"].get("time_to_first_token")]
    if timed:
        out["time_to_first_token_speedup"] = _median_ratio([a["time_to_first_token"] for a, _ in timed],
                                                           [b["time_to_first_token"] for _, b in timed])
        for key in ("prompt_tokens", "prompt_tokens_evaluated", "completion_tokens"):
            out[key] = {"old": round(statistics.mean(a[key] for a, _ in timed), 1),
                        "new": round(statistics.mean(b[key] for _, b in timed), 1)}
    return out


def reproduced(rows: list[dict], again: str = "chain/before/again", before: str = "chain/before") -> dict | None:
    """How many of ``again``'s replies equal ``before``'s on the same questions: after a change
    that must not change what the default answers (greedy decoding, the same prompt), all."""
    pairs = _paired(rows, before, again)
    if not pairs:
        return None
    same = {key: sum(a.get(key) == b.get(key) for a, b in pairs)
            for key in ("answer", "explanation", "model_cited", "panel_final")}
    return {"arm": again, "against": before, "n": len(pairs), "same": same,
            "differing": [a["id"] for a, b in pairs if a.get("answer") != b.get("answer")]}


def hand_check(rows: list[dict], labels: list[dict] | None = None) -> dict:
    """The calibrated panel on this benchmark's Travel answers, against labels read by hand
    (``answers_hand_labels.jsonl``: ``chain/before`` and ``chain/form``, every Travel row).
    Per arm: accuracy by hand and by the panel on the same rows, their agreement, the panel's
    misses each way, each with its 95% interval; then the arms' paired difference by hand.

    A label was read against the gold answer: *correct* when the answer line gives the gold's
    facts (a part of a list counts, a wrong figure, currency or country does not), *incorrect*
    otherwise; a row whose answer changed since it was labelled is left out, not guessed."""
    labels = read_jsonl(HAND_LABELS) if labels is None else labels
    by = {(r["arm"], r["id"]): r for r in rows}
    out: dict = {}
    for arm in dict.fromkeys(lab["arm"] for lab in labels):
        pairs = [(lab, by[arm, lab["query_id"]]) for lab in labels if lab["arm"] == arm
                 and (arm, lab["query_id"]) in by and by[arm, lab["query_id"]]["answer"] == lab["answer"]]
        pairs = [(lab, r) for lab, r in pairs if r.get("panel_final") in ("correct", "incorrect")]
        if not pairs:
            continue
        hand = [lab["label"] == "correct" for lab, _ in pairs]
        panel = [r["panel_final"] == "correct" for _, r in pairs]
        out[arm] = {"n": len(pairs), "hand": _ci(hand), "panel": _ci(panel),
                    "agreement": _ci([h == p for h, p in zip(hand, panel, strict=True)]),
                    "panel_said_correct_hand_incorrect": sum(p and not h for h, p in zip(hand, panel, strict=True)),
                    "panel_said_incorrect_hand_correct": sum(h and not p for h, p in zip(hand, panel, strict=True))}
    arms = list(out)
    if len(arms) == 2:
        old, new = arms
        lab = {(x["arm"], x["query_id"]): x["label"] == "correct" for x in labels}
        both = sorted({q for a, q in lab if a == old} & {q for a, q in lab if a == new})
        diff = [lab[new, q] - lab[old, q] for q in both]
        mean, lo, hi = bootstrap_ci(diff)
        out["paired"] = {"old": old, "new": new, "n": len(diff), "difference": mean, "ci95": [lo, hi]}
    return out


def evidence(rows: list[dict], labels: list[dict] | None = None) -> dict:
    """Where the answers are lost, per source and arm: how often a gold page was among the
    passages shown (a retrieval miss otherwise), and how often the answer was judged right with
    it shown and without; by hand too, on the Travel rows whose answer a hand label read (the
    label of the same answer to the same question, whichever arm it was made in)."""
    gold = gold_pages()
    labels = read_jsonl(HAND_LABELS) if labels is None else labels
    by_answer = {(lab["query_id"], lab["answer"]): lab["label"] == "correct" for lab in labels}
    out: dict = {}
    for source in ("travel", "xquad"):
        for arm in ARMS:
            rs = [r for r in rows if r["arm"] == arm and r["source"] == source and r.get("shown_ids")]
            if not rs:
                continue
            shown = [any(i.split("#")[0] in gold[r["id"]] for i in r["shown_ids"]) for r in rs]
            fig: dict = {"n": len(rs), "gold_shown": _ci([float(x) for x in shown])}
            for name, want in (("when_shown", True), ("when_not_shown", False)):
                sub = [r for r, x in zip(rs, shown, strict=True) if x is want]
                judged = [float(r["panel_final"] == "correct") for r in sub
                          if r.get("panel_final") in ("correct", "incorrect")]
                hand = [float(by_answer[r["id"], r["answer"]]) for r in sub if (r["id"], r["answer"]) in by_answer]
                fig[name] = {"n": len(sub), "judged_correct": _ci(judged) if judged else None,
                             "hand_correct": _ci(hand) if hand else None}
            out.setdefault(source, {})[arm] = fig
    return out


def table(cmp: dict) -> str:
    """The comparison as the Markdown table of docs/how-to/answers.md."""
    def cell(f: dict | None) -> str:
        if not f:
            return "n/a"
        if "difference" not in f:
            return f"{f['old']} → {f['new']}"
        lo, hi = f["ci95"]
        return f"{f['old']:.2f} → {f['new']:.2f} ({f['difference']:+.2f} [{lo:+.2f}, {hi:+.2f}])"

    rows = [("judged correct (lexical judge), all", cmp["all"].get("correct")),
            ("judged correct, XQuAD", cmp.get("xquad", {}).get("correct")),
            ("judged correct, Travel", cmp.get("travel", {}).get("correct")),
            ("char 3-gram recall of the answer", cmp["all"].get("char3")),
            ("token F1 of the answer", cmp["all"].get("f1")),
            ("right language (answer and explanation)", cmp["all"].get("lang_correct")),
            ("non-answers", cmp["all"].get("non_answer")),
            ("non-answers shown as verified", cmp["all"].get("non_answer_verified")),
            ("template copies", cmp["all"].get("template_copies")),
            ("invalid citations", cmp["all"].get("invalid_citation")),
            ("model-made valid citation", cmp["all"].get("model_cited"))]
    lines = [f"| {cmp['old']} → {cmp['new']} (n = {cmp['n']}) | before → after (difference [95% CI]) |", "|---|---|"]
    lines += [f"| {name} | {cell(f)} |" for name, f in rows]
    for key, label in (("seconds_speedup", "median seconds per answer"),
                       ("time_to_first_token_speedup", "median time to first token")):
        sp = cmp.get(key)
        if sp:
            lo, hi = sp["ci95"]
            lines.append(f"| {label} | {sp['old_median']} s → {sp['new_median']} s "
                         f"({sp['ratio']}× faster [{lo}, {hi}]) |")
    for key, label in (("prompt_tokens", "prompt tokens"), ("prompt_tokens_evaluated", "prompt tokens read"),
                       ("completion_tokens", "completion tokens")):
        if key in cmp:
            lines.append(f"| {label} (mean) | {cmp[key]['old']} → {cmp[key]['new']} |")
    return "\n".join(lines)


# Runs that must give an earlier run's answers: each ``(key in answers.json, arm, the arm it
# must reproduce)``.
REPRODUCED = (
    ("reproduced", "chain/before/again", "chain/before"),
    # greedy decoding with prompt-lookup drafts must write what plain decoding writes
    ("reproduced_lookup", "chain/before/lookup", "chain/before/now"),
    # today's default made twice on this machine, in two runs with #35's changes between
    ("reproduced_this_machine", "chain/before/now", "chain/before/again"),
    # a reply stopped at its explanation header must keep the clock's answer line
    ("reproduced_brief", "chain/before/brief", "chain/before/clock"),
    # the fifth run's clock is today's default again: the fourth run's answers expected
    ("reproduced_noopener", "chain/before/noopener", "chain/before/clock"),
    # the sixth run's clock is today's default again; the opened arm must keep its answer lines
    ("reproduced_unopened", "chain/before/unopened", "chain/before/noopener"),
    ("reproduced_opened", "chain/before/opened", "chain/before/unopened"),
    # the seventh run's clock: nothing the chain does changed since the sixth
    ("reproduced_now", "chain/now", "chain/before/opened"),
    # the ninth run's clock: today's default chain again, the seventh run's answers expected
    ("reproduced_again", "chain/now/again", "chain/now"),
)


def figures(rows: list[dict]) -> dict:
    """Every figure of answers.json from its rows, in the file's order (all but the rows)."""
    return {"summary": summarize(rows), "paired_with_" + BASELINE.replace("/", "_"): paired(rows),
            "issue_33": {new: c for new, old in COMPARED if (c := compare(rows, new, old))},
            **{key: reproduced(rows, again, before) for key, again, before in REPRODUCED},
            "hand_check": hand_check(rows),
            "evidence": evidence(rows)}
