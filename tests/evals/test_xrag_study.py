"""The XRAG study: the language plan of every condition (pure), and one real run."""

from __future__ import annotations

import json

import pytest
import yaml

from xlrag.evals.run_folder import RECORDS, read_records
from xlrag.evals.studies import load_run_config, write_reports
from xlrag.evals.studies.xrag import ABLATIONS, SETTINGS, XRAGRunner, contexts

GEMMA = {"provider": "local", "model": "gemma-3-270m", "max_tokens": 32}


def _cfg(tmp_path, **over):
    data = {"study": "xrag", "name": "t", "llm": GEMMA, **over}
    path = tmp_path / "xrag.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_run_config(path)


def test_each_condition_changes_only_what_it_names():
    plan = contexts("de", 3)
    assert set(plan) == {*SETTINGS, *ABLATIONS}
    assert plan["monolingual"].model_dump() == {"question_lang": "de", "support_lang": "en",
                                                "distractor_langs": ["en", "en", "en"]}
    assert plan["multilingual"].model_dump() == {"question_lang": "de", "support_lang": "de",
                                                 "distractor_langs": ["en", "de", "en"]}
    # cumulative ablations: question, then the supporting passage, then the distractors
    assert (plan["+EQ"].question_lang, plan["+EQ"].support_lang, plan["+EQ"].distractor_langs) == \
        ("en", "de", ["en", "de", "en"])
    assert (plan["+ES"].support_lang, plan["+ES"].distractor_langs) == ("en", ["en", "de", "en"])
    assert plan["+ED"].model_dump() == {"question_lang": "en", "support_lang": "en",
                                        "distractor_langs": ["en", "en", "en"]}


def test_passages_are_parallel_across_conditions(tmp_path):
    runner = XRAGRunner(_cfg(tmp_path, langs=["zh", "ar"], per_lang=5, distractors=3), tmp_path / "run")
    assert len(runner.questions) == 10 and len({q["id"] for q in runner.questions}) == 10
    for q in runner.questions:
        english = runner.english[q["id"]]
        assert english["lang"] == "en" and english["parallel_id"] == q["parallel_id"]
        seen = {}
        for cond, ctx in contexts(q["lang"], 3).items():
            shown, at = runner.passages_for(q, ctx)
            assert len(shown) == 4 and shown[at].id == f"{q['parallel_id']}-{ctx.support_lang}"
            assert [p.lang for i, p in enumerate(shown) if i != at] == ctx.distractor_langs
            # the same paragraphs in the same places: only their languages change
            seen[cond] = [p.id.rsplit("-", 1)[0] for p in shown]
            distractors = [p for i, p in enumerate(shown) if i != at]
            assert all(p.metadata["gold_parallel_id"] == q["parallel_id"] for p in distractors)
        assert len({tuple(v) for v in seen.values()}) == 1


@pytest.mark.slow
def test_a_run_is_judged_reported_and_free_to_rerun(tmp_path):
    cfg = _cfg(tmp_path, langs=["es"], per_lang=1, conditions=["monolingual", "+ED"],
               judges={"judges": [{**GEMMA, "max_tokens": 48}]})
    runner = XRAGRunner(cfg, tmp_path / "run")
    try:
        first, again = runner.run(), runner.run()
    finally:
        runner.close()
    assert (first["written"], first["failed"]) == (2, 0)
    assert (again["written"], again["llm_calls"]) == (0, 0)
    recs = {r["condition"]: r for r in read_records(tmp_path / "run" / RECORDS)}
    mono, ed = recs["monolingual"], recs["+ED"]
    assert {p["lang"] for p in mono["shown"]} == {"en"} and mono["question"] != ed["question"]
    assert mono["judges"]["final"] in ("correct", "incorrect", "invalid")
    assert mono["language"]["status"] in ("correct", "wrong", "undetected", "not_applicable")
    report = json.loads(write_reports(tmp_path / "run")["json"].read_text(encoding="utf-8"))
    assert report["conditions"]["+ED"]["es"]["n"] == 1 and report["conditions"]["+ED"]["all"]["n"] == 1
    assert "Response-language error rate" in (tmp_path / "run" / "report.md").read_text(encoding="utf-8")


def test_the_report_names_its_sizes_the_panel_caveat_and_what_was_published(tmp_path):
    from xlrag.evals.studies.xrag import xrag_markdown, xrag_report

    qwen = {"provider": "local", "model": "qwen2.5-coder-1.5b-instruct", "max_tokens": 64}
    cfg = _cfg(tmp_path, llm=qwen, langs=["de"], conditions=["monolingual"],
               judges={"judges": [{**qwen, "name": "q"}, {**GEMMA, "name": "g"}]})
    rec = {"condition": "monolingual", "lang": "de", "language": {"status": "wrong"},
           "judges": {"final": "incorrect", "verdict": "correct"}, "metrics": {"char3_recall": 0.5}}
    md = xrag_markdown(xrag_report(cfg, [rec, {**rec, "language": {"status": "correct"},
                                               "judges": {"final": "correct", "verdict": "correct"}}], {}))
    assert "| monolingual | 0.50 | 0.50 | 2 |" in md  # accuracy per language, all, and n
    assert "self-preference" in md
    assert "## Published figures (other models, other data)" in md and "no published number is shown" in md
