"""`xlrag eval run` as a user runs it, against the ways a run folder used to go wrong: two
runs into one folder, a changed setting rerun into it, failed records, a config that cannot
load, damaged caches. Real processes, real files; retrieval-only grids, so no model runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from tests.conftest import index_copy
from xlrag.evals.run_folder import RunFolder, read_records

XLRAG = [str(Path(sys.executable).parent / "xlrag")]
ENV = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}


def _experiment(tmp_path: Path, name: str = "exp.yaml", **changes) -> Path:
    exp = {"name": "probe", "modes": ["qlang"], "retrieval": {"retrieve_k": 5, "k": 3}, "llms": [],
           "datasets": [{"name": "travel", "sample": {"per_lang": 2}, "index_dir": str(tmp_path / "ix")}], **changes}
    path = tmp_path / name
    path.write_text(yaml.safe_dump(exp), encoding="utf-8")
    return path


def _run(exp: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run([*XLRAG, "eval", "run", str(exp), "--out", str(out), *extra], env=ENV,
                          capture_output=True, text=True, timeout=600)


def _one_line_error(res: subprocess.CompletedProcess, *words: str) -> None:
    assert res.returncode == 2, res.stderr[-800:]
    assert res.stderr.startswith("error:") and res.stderr.count("\n") == 1, res.stderr[-800:]
    assert "Traceback" not in res.stderr
    for w in words:
        assert w in res.stderr, res.stderr


def test_a_second_run_into_a_busy_folder_stops_in_one_line_and_writes_nothing(tmp_path):
    out = tmp_path / "run"
    with RunFolder(out).lock():  # a first run, mid-way
        res = _run(_experiment(tmp_path), out)
    _one_line_error(res, "is being written by another run", f"pid {os.getpid()}", "another --out")
    assert not (out / "records.jsonl").exists() and not (out / "experiment.yaml").exists()


def test_a_changed_setting_makes_new_records_and_the_report_reads_only_them(tmp_path, travel_run_index):
    index_copy(travel_run_index, tmp_path)  # at _experiment's index_dir
    out = tmp_path / "run"
    first = _run(_experiment(tmp_path), out)
    assert first.returncode == 0, first.stderr[-800:]
    assert "4 records written, 0 already present" in first.stdout

    narrower = _run(_experiment(tmp_path, retrieval={"retrieve_k": 2, "k": 1}), out)
    assert narrower.returncode == 0, narrower.stderr[-800:]
    assert "4 records written, 0 already present" in narrower.stdout
    assert "also holds 4 records made with other settings" in narrower.stderr
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert report["records"] == 4
    assert all(len(r["retrieved"]) == 2 for r in RunFolder(out).records())
    assert len(read_records(out / "records.jsonl")) == 8  # the first run's records are kept

    # the name and the timeout do not shape a record: nothing is redone
    same = _run(_experiment(tmp_path, retrieval={"retrieve_k": 2, "k": 1}, name="renamed", timeout=99.0), out)
    assert "0 records written, 4 already present" in same.stdout, same.stdout + same.stderr


def test_failed_records_exit_1_are_logged_and_retried_on_the_next_run(tmp_path, travel_run_index):
    index_copy(travel_run_index, tmp_path)  # at _experiment's index_dir
    out = tmp_path / "run"
    # every retrieval runs past a microsecond: each record fails with TimeoutError
    failing = _run(_experiment(tmp_path, timeout=0.000001), out)
    assert failing.returncode == 1, failing.stderr[-800:]
    assert "4 records failed" in failing.stderr and "failures.jsonl" in failing.stderr
    log = (out / "failures.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(log) == 4 and all(json.loads(x)["error"].startswith("TimeoutError") for x in log)

    kept = _run(_experiment(tmp_path, timeout=0.000001), out, "--no-retry-failed")
    assert "0 records written, 4 already present" in kept.stdout

    fixed = _run(_experiment(tmp_path), out)  # timeout is not a setting that shapes a record
    assert fixed.returncode == 0, fixed.stderr[-800:]
    assert "4 records written (4 of them failed before), 0 already present, 0 failed" in fixed.stdout
    recs = RunFolder(out).records()
    assert len(recs) == 4 and not any(r.get("error") for r in recs)
    assert json.loads((out / "report.json").read_text(encoding="utf-8"))["failed"] == 0
    assert len((out / "failures.jsonl").read_text(encoding="utf-8").splitlines()) == 4


def test_a_missing_corpus_exits_2_before_any_record(tmp_path):
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"id": "1", "question": "visa?", "lang": "en"}) + "\n", encoding="utf-8")
    exp = _experiment(tmp_path, datasets=[{"name": "mine", "corpus": "nowhere/corpus.jsonl", "queries": "q.jsonl"}])
    out = tmp_path / "run"
    _one_line_error(_run(exp, out), "nowhere/corpus.jsonl does not exist", "fix the path")
    assert not (out / "records.jsonl").exists()


def _own_corpus(tmp_path: Path) -> Path:
    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.jsonl"
    docs = [("d1", "en", "Citizens of Norway need no visa for Japan for stays up to 90 days."),
            ("d2", "de", "Für Japan brauchen Norweger kein Visum bei Aufenthalten bis 90 Tage.")]
    corpus.write_text("".join(json.dumps({"id": i, "lang": lang, "text": t}) + "\n" for i, lang, t in docs),
                      encoding="utf-8")
    queries.write_text(json.dumps({"id": "1", "question": "Do Norwegians need a visa for Japan?", "lang": "en"})
                       + "\n", encoding="utf-8")
    return _experiment(tmp_path, datasets=[{"name": "mine", "corpus": str(corpus), "queries": str(queries),
                                            "index_dir": str(tmp_path / "ix-mine")}])


def test_a_damaged_embedding_cache_in_the_run_folder_is_one_line_not_failed_records(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "embeddings.sqlite").write_bytes(b"this is not a database" * 100)
    _one_line_error(_run(_own_corpus(tmp_path), out), "embeddings.sqlite", "is damaged", "delete it")
    assert not read_records(out / "records.jsonl")


def test_a_damaged_model_call_cache_in_the_run_folder_is_one_line(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "cache.sqlite").write_bytes(b"\x00garbage" * 500)
    _one_line_error(_run(_experiment(tmp_path), out), "cache.sqlite", "is damaged")
    assert not read_records(out / "records.jsonl")


def _mini(tmp_path: Path, texts: dict[str, str]) -> Path:
    """A two-language corpus of ``texts`` (doc id -> text), its queries, and a grid over it."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"id": d, "text": t, "lang": d.rsplit("-", 1)[1]}) + "\n"
                              for d, t in texts.items()), encoding="utf-8")
    queries = tmp_path / "queries.jsonl"
    queries.write_text("".join(json.dumps({"id": f"q{i}", "question": q, "lang": "en"}) + "\n"
                               for i, q in enumerate(["Where do trains leave from?", "When do museums open?"])),
                       encoding="utf-8")
    exp = {"name": "edit", "modes": ["all"], "retrieval": {"retrieve_k": 6, "k": 3}, "llms": [],
           "datasets": [{"name": "mini", "corpus": str(corpus), "queries": str(queries)}]}
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp), encoding="utf-8")
    return path


def test_an_edited_corpus_is_never_scored_against_the_old_index(tmp_path):
    first = {**{f"d{i}-en": f"The trains to city {i} leave from platform {i}; museums open at {i} am."
                for i in range(3)},
             **{f"d{i}-es": f"Los trenes a la ciudad {i} salen del andén {i}; los museos abren a las {i}."
                for i in range(3)}}
    out = tmp_path / "run"
    res = _run(_mini(tmp_path, first), out)
    assert res.returncode == 0, res.stderr[-800:]
    assert any(h["doc_id"].endswith("-en") for r in RunFolder(out).records() for h in r["retrieved"])

    # drop every English document and change every text: the same folder, rerun
    edited = {d: f"Los autobuses a la ciudad {d[1]} salen de la estación norte." for d in first if d.endswith("-es")}
    res = _run(_mini(tmp_path, edited), out)
    assert res.returncode == 0, res.stderr[-800:]
    assert "2 records written, 0 already present" in res.stdout, res.stdout + res.stderr
    retrieved = [h for r in RunFolder(out).records() for h in r["retrieved"]]
    assert retrieved and {h["doc_id"] for h in retrieved} <= set(edited)
    assert json.loads((out / "inventory-mini.json").read_text(encoding="utf-8"))["counts"] == {"es": 3}

    # unchanged: the index is reused as it is (its sync stamp untouched), nothing redone
    stamp = (out / "index-mini.synced.json").read_bytes()
    same = _run(_mini(tmp_path, edited), out)
    assert "0 records written, 2 already present" in same.stdout, same.stdout + same.stderr
    assert (out / "index-mini.synced.json").read_bytes() == stamp
    # the run folder's lock files are gone with the run
    assert not list(out.glob(".xlrag-run.*")) and not list(out.glob("index-mini/.xlrag-write.*"))
