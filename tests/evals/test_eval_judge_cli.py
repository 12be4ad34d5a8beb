"""`xlrag eval judge`: validation before any judging, resumption, and a real local judge."""

from __future__ import annotations

import json

import pytest

from tests.clitools import error_line, run
from xlrag.judges.panel import default_panel

ROWS = [
    {"id": "q1", "question": "How many points did the Panthers defense surrender?", "lang": "en",
     "answer": "The Panthers gave up 308 points.", "gold": ["308"]},
    {"id": "q2", "question": "Wie viele Punkte gab die Verteidigung der Panthers ab?", "lang": "de",
     "answer": "Sie gab 136 Punkte ab.", "gold": ["308"]},
    {"id": 3, "question": "كم نقطة تخلى عنها دفاع البانثرز؟", "lang": "ar", "answer": "", "gold": ["308"]},
]


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n"
                            for r in rows), encoding="utf-8")
    return path


@pytest.fixture
def lexical_panel(tmp_path):
    path = tmp_path / "panel.yaml"
    path.write_text("judges: [{kind: lexical}]\n", encoding="utf-8")
    return path


def _judge(tmp_path, items, *extra):
    out = tmp_path / "verdicts.jsonl"
    return run("eval", "judge", "--in", items, "--out", out, *extra), out


@pytest.mark.parametrize(
    ("bad", "line", "says"),
    [
        ({"id": "x", "question": "q?", "lang": "en", "gold": ["a"]}, 2, "field 'answer' is missing"),
        ({"id": "x", "question": "q?", "lang": "xx-nope", "answer": "a", "gold": ["a"]}, 2,
         "unknown language code 'xx-nope'"),
        ('{"id": "x", "question": ', 2, "invalid JSON"),
        ({"id": "x", "question": "q?", "lang": "en", "answer": "a", "gold": []}, 2, "gold"),
        ({"id": "x", "question": "q?", "lang": "en", "answer": "a", "gold": ["a"], "kind": "echo"}, 2,
         "unknown field 'kind'"),
        ({**ROWS[1], "id": "q1"}, 2, "id 'q1' is also on line 1"),
    ],
)
def test_bad_rows_stop_before_anything_is_judged(tmp_path, lexical_panel, bad, line, says):
    items = _write(tmp_path / "items.jsonl", [ROWS[0], bad, ROWS[2]])
    res, out = _judge(tmp_path, items, "--panel", lexical_panel)
    msg = error_line(res)
    assert res.exit_code == 2
    assert f"items.jsonl:{line}: " in msg and says in msg, msg
    assert not out.exists()


def test_empty_and_missing_files_are_errors(tmp_path, lexical_panel):
    res, out = _judge(tmp_path, _write(tmp_path / "items.jsonl", []), "--panel", lexical_panel)
    assert res.exit_code == 2 and "has no rows" in error_line(res) and not out.exists()
    res, out = _judge(tmp_path, tmp_path / "nope.jsonl", "--panel", lexical_panel)
    assert res.exit_code == 2 and "does not exist" in error_line(res) and not out.exists()
    res = run("eval", "judge", "--in", tmp_path / "nope.jsonl")  # typer's own message: a required option
    assert res.exit_code == 2 and "Missing option '--out'" in res.output


def test_bad_panel_files_are_one_line_errors(tmp_path):
    items = _write(tmp_path / "items.jsonl", ROWS)
    panel = tmp_path / "panel.yaml"
    panel.write_text("judges: [{kind: lexical, treshold: 0.5}]\n", encoding="utf-8")
    res, out = _judge(tmp_path, items, "--panel", panel)
    assert "panel.yaml: judges: judges.0.lexical.treshold: Extra inputs" in error_line(res)
    panel.write_text("name: x\n", encoding="utf-8")
    res, out = _judge(tmp_path, items, "--panel", panel)
    assert "has no judges: section" in error_line(res) and not out.exists()


def test_rows_are_judged_once_and_a_rerun_resumes(tmp_path, lexical_panel):
    items = _write(tmp_path / "items.jsonl", ROWS)
    res, out = _judge(tmp_path, items, "--panel", lexical_panel)
    assert res.exit_code == 0, res.output
    assert "3 rows judged, 0 already in" in res.output and "1 true, 2 false, 0 null" in res.output
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["q1", "q2", 3]
    assert [r["verdict"] for r in rows] == [True, False, False]
    first = rows[0]
    assert {k: first[k] for k in ROWS[0]} == ROWS[0]  # the input row, as given
    assert first["votes"] == [{"judge": "lexical", "vote": True, "valid": True, "reason": first["votes"][0]["reason"]}]
    assert "308" in first["votes"][0]["reason"] and "empty" in rows[2]["votes"][0]["reason"]

    res, _ = _judge(tmp_path, items, "--panel", lexical_panel)
    assert res.exit_code == 0 and "0 rows judged, 3 already in" in res.output
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3

    # a run killed mid-write leaves a torn line: it is cut off and that row judged again
    text = out.read_text(encoding="utf-8").splitlines(keepends=True)
    out.write_text("".join(text[:2]) + text[2][:20], encoding="utf-8")
    res, _ = _judge(tmp_path, items, "--panel", lexical_panel)
    assert res.exit_code == 0 and "1 rows judged, 2 already in" in res.output
    again = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in again] == ["q1", "q2", 3]


def test_a_rerun_with_another_panel_is_refused(tmp_path, lexical_panel):
    items = _write(tmp_path / "items.jsonl", ROWS)
    assert _judge(tmp_path, items, "--panel", lexical_panel)[0].exit_code == 0
    other = tmp_path / "other.yaml"
    other.write_text("judges: [{kind: lexical, threshold: 0.5}]\n", encoding="utf-8")
    res, out = _judge(tmp_path, items, "--panel", other)
    assert "was judged by ['lexical'], not by this panel ['lexical@0.5']" in error_line(res)
    assert len(out.read_text(encoding="utf-8").splitlines()) == 3


def test_the_default_panel_is_the_calibrated_one_and_calls_no_model(tmp_path):
    items = _write(tmp_path / "items.jsonl", ROWS)
    res, out = _judge(tmp_path, items)  # no --panel
    assert res.exit_code == 0, res.output
    assert f"panel: {', '.join(default_panel().labels)}" in res.output
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [r["verdict"] for r in rows] == [True, False, False]


@pytest.mark.slow
def test_a_real_local_judge_through_eval_judge(tmp_path):
    items = _write(tmp_path / "items.jsonl", ROWS[:2])
    panel = tmp_path / "panel.yaml"
    # tie_break first: the lexical judge settles a split, so the verdicts are known
    panel.write_text("judges:\n  - {kind: lexical}\n  - {name: qwen, provider: local, "
                     "model: qwen2.5-coder-0.5b-instruct}\ntie_break: first\n", encoding="utf-8")
    res, out = _judge(tmp_path, items, "--panel", panel)
    assert res.exit_code == 0, res.output
    assert "2 rows judged, 0 already in" in res.output and "0 invalid votes" in res.output
    rows = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]
    assert [[v["judge"] for v in r["votes"]] for r in rows] == [["lexical", "qwen"]] * 2
    for r in rows:
        qwen = r["votes"][1]
        assert qwen["valid"] and qwen["vote"] in (True, False) and qwen["reason"], qwen
    assert [r["verdict"] for r in rows] == [True, False]
    res, _ = _judge(tmp_path, items, "--panel", panel)
    assert "0 rows judged, 2 already in" in res.output
