"""Every path xlrag writes, as a careless user gives it (issue #32): a file of their own notes,
a CSV, a folder, a verdict file a kill tore, an input that is not UTF-8. Real `xlrag`
processes and real files; every refusal comes before an index is opened or a model runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

XLRAG = [str(Path(sys.executable).parent / "xlrag")]
ENV = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
NOTES = b"my notes\nline two\n"
CSV = b"id,question,answer\n1,Who won?,Denver\n"
ROW = {"id": "q1", "question": "How many points did the Panthers defense surrender?", "lang": "en",
       "answer": "The Panthers gave up 308 points.", "gold": ["308"]}


def _xlrag(*args: object, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*XLRAG, *map(str, args)], env=ENV, cwd=cwd, capture_output=True, text=True, timeout=120)


def _one_line_error(res: subprocess.CompletedProcess, *words: str) -> str:
    assert res.returncode == 2, (res.stdout + res.stderr)[-800:]
    assert res.stderr.startswith("error:") and res.stderr.count("\n") == 1, res.stderr[-800:]
    for w in words:
        assert w in res.stderr, res.stderr
    return res.stderr


def _items(tmp_path: Path) -> Path:
    path = tmp_path / "ok.jsonl"
    path.write_text(json.dumps(ROW) + "\n", encoding="utf-8")
    return path


def _panel(tmp_path: Path) -> Path:
    path = tmp_path / "panel.yaml"
    path.write_text("judges: [{kind: lexical}]\n", encoding="utf-8")
    return path


def test_eval_judge_refuses_to_wipe_a_notes_file_or_a_csv(tmp_path):
    for name, data in (("notes.txt", NOTES), ("answers.csv", CSV)):
        out = tmp_path / name
        out.write_bytes(data)
        res = _xlrag("eval", "judge", "--in", _items(tmp_path), "--out", out, "--panel", _panel(tmp_path))
        _one_line_error(res, f"{out}:1:", "invalid JSON", "left untouched")
        assert out.read_bytes() == data
    assert not list(tmp_path.glob("*.lock")) and not list(tmp_path.glob("*.holder"))


def test_a_verdict_file_with_a_torn_last_line_is_resumed_and_no_lock_file_is_left(tmp_path):
    items, panel, out = _items(tmp_path), _panel(tmp_path), tmp_path / "verdicts.jsonl"
    second = {**ROW, "id": "q2", "answer": "No idea."}
    items.write_text(json.dumps(ROW) + "\n" + json.dumps(second) + "\n", encoding="utf-8")
    first = _xlrag("eval", "judge", "--in", items, "--out", out, "--panel", panel)
    assert first.returncode == 0, first.stderr
    done = out.read_bytes().splitlines(keepends=True)
    assert len(done) == 2
    out.write_bytes(done[0] + done[1][:25])  # killed while writing the second verdict
    again = _xlrag("eval", "judge", "--in", items, "--out", out, "--panel", panel)
    assert again.returncode == 0, again.stderr
    assert "1 rows judged, 1 already in" in again.stdout
    assert [json.loads(x)["id"] for x in out.read_text(encoding="utf-8").splitlines()] == ["q1", "q2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ok.jsonl", "panel.yaml", "verdicts.jsonl"]


def test_a_verdict_file_whose_first_line_is_not_a_verdict_is_refused_untouched(tmp_path):
    out = tmp_path / "verdicts.jsonl"
    data = b'{"id": "q1", "note": "mine"}\n{"id": "q1", "verdict": true, "votes": []}\n'
    out.write_bytes(data)
    res = _xlrag("eval", "judge", "--in", _items(tmp_path), "--out", out, "--panel", _panel(tmp_path))
    _one_line_error(res, f"{out}:1:", "without 'verdict', 'votes'")
    assert out.read_bytes() == data


def test_eval_judge_in_a_file_that_is_not_utf8_is_a_file_line_error(tmp_path):
    items = tmp_path / "latin1.jsonl"
    items.write_bytes(json.dumps(ROW).encode() + b"\n" + json.dumps({**ROW, "id": "q2"}).encode()
                      .replace(b"Panthers", b"Panth\xe9rs") + b"\n")
    res = _xlrag("eval", "judge", "--in", items, "--out", tmp_path / "v.jsonl", "--panel", _panel(tmp_path))
    _one_line_error(res, f"{items}:2:", "not UTF-8", "0xe9")
    assert "Traceback" not in res.stderr and not (tmp_path / "v.jsonl").exists()


def test_ask_perspectives_html_into_a_folder_is_refused_before_any_model(tmp_path):
    res = _xlrag("ask", "Who won?", "--perspectives", "--html", tmp_path, "--index-dir", tmp_path / "no-index",
                 "--llm", "openai:never-called")
    _one_line_error(res, "--html", "is a directory", "view.html")
    page = tmp_path / "page.html"
    page.write_text("<!doctype html><html><body>my page</body></html>", encoding="utf-8")
    res = _xlrag("ask", "Who won?", "--perspectives", "--html", page, "--index-dir", tmp_path / "no-index")
    _one_line_error(res, "--html", "not a page xlrag wrote")
    assert "my page" in page.read_text(encoding="utf-8")


def test_retrieve_and_trec_outputs_refuse_a_users_file(tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "q1", "question": "Who won?", "lang": "en"}\n', encoding="utf-8")
    notes = tmp_path / "notes.txt"
    notes.write_bytes(NOTES)
    res = _xlrag("retrieve", "--queries", queries, "--out", notes, "--index-dir", tmp_path / "no-index")
    _one_line_error(res, f"{notes}:1:", "retrieval results")
    res = _xlrag("eval", "retrieval", "--queries", queries, "--qrels", queries, "--trec", notes,
                 "--index-dir", tmp_path / "no-index")
    _one_line_error(res, f"{notes}:1:", "a TREC run")
    assert notes.read_bytes() == NOTES


def test_outputs_in_a_folder_that_cannot_be_written_are_refused(tmp_path):
    locked = tmp_path / "ro"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        if os.access(locked, os.W_OK):  # root writes anyway: nothing to prove here
            return
        res = _xlrag("eval", "judge", "--in", _items(tmp_path), "--out", locked / "v.jsonl",
                     "--panel", _panel(tmp_path))
        _one_line_error(res, "cannot be written", "permission denied")
    finally:
        locked.chmod(0o700)


def test_eval_run_refuses_a_folder_of_someone_elses_files(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "thesis.tex").write_text("\\chapter{One}", encoding="utf-8")
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: p\nmodes: [qlang]\nllms: []\ndatasets: [{name: travel, sample: {per_lang: 1}}]\n",
                   encoding="utf-8")
    res = _xlrag("eval", "run", exp, "--out", folder)
    _one_line_error(res, "--out", "thesis.tex", "new or empty folder")
    assert sorted(p.name for p in folder.iterdir()) == ["thesis.tex"]
