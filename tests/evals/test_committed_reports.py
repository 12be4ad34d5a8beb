"""Every committed run folder rebuilds to the report.json committed beside it (the run engine
and the report may be refactored, the figures may not move), and each of its records fits
its kind's model."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.evals.benchmarks import load_benchmark
from xlrag.evals.run_folder import RunFolder
from xlrag.evals.studies import load_run_config, study_of, write_reports

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
RUNS = sorted(p.parent for p in RESULTS.rglob("records.jsonl") if (p.parent / "report.json").exists())
# the folders were made in /work/main: their snapshots name its data files by absolute path
MADE_IN = "/work/main/"


def _copy(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / run.name
    shutil.copytree(run, out, ignore=shutil.ignore_patterns("cache.sqlite*", "report.*"))
    snap = out / "experiment.yaml"
    snap.write_text(snap.read_text(encoding="utf-8").replace(MADE_IN, f"{ROOT}/"), encoding="utf-8")
    return out


def _figures(report: dict) -> dict:
    # judge_calibration is the accuracy measured by the calibration committed in the package
    # today (absent from reports published before it existed), not a figure of the run's records
    return {k: v for k, v in report.items() if k != "judge_calibration"}


def test_there_are_committed_runs_of_both_kinds():
    assert len(RUNS) >= 6
    kinds = {"study" if "\nstudy:" in "\n" + (r / "experiment.yaml").read_text(encoding="utf-8") else "grid"
             for r in RUNS}
    assert kinds == {"study", "grid"}


@pytest.mark.parametrize("run", RUNS, ids=[str(r.relative_to(RESULTS)) for r in RUNS])
def test_committed_run_rebuilds_its_report(run, tmp_path):
    out = _copy(run, tmp_path)
    rebuilt = json.loads(write_reports(out)["json"].read_text(encoding="utf-8"))
    committed = json.loads((run / "report.json").read_text(encoding="utf-8"))
    assert _figures(rebuilt) == _figures(committed)


@pytest.mark.parametrize("run", RUNS, ids=[str(r.relative_to(RESULTS)) for r in RUNS])
def test_every_committed_record_fits_its_model(run, tmp_path):
    out = _copy(run, tmp_path)
    model = study_of(load_run_config(out / "experiment.yaml")).get("runner").record_model
    records = RunFolder(out).records(model)  # raises on the first record that does not fit
    assert len(records) == len((run / "records.jsonl").read_text(encoding="utf-8").splitlines())
    # and the model loses nothing: what it read, it dumps back as it was on disk
    for rec in records:
        assert model.model_validate(rec).model_dump(mode="json", exclude_unset=True) == rec


def test_the_hand_labelled_travel_check_rebuilds_from_the_committed_rows():
    answers, arms = load_benchmark("answer_figures"), load_benchmark("answer_arms")
    committed = json.loads((RESULTS / "answers.json").read_text(encoding="utf-8"))
    labels = [json.loads(x) for x in arms.HAND_LABELS.read_text(encoding="utf-8").splitlines()]
    rows = {(r["arm"], r["id"]): r for r in committed["rows"]}
    # every label is of a row still committed, read on the very answer it labels
    assert {lab["label"] for lab in labels} == {"correct", "incorrect"}
    assert all(rows[lab["arm"], lab["query_id"]]["answer"] == lab["answer"] for lab in labels)
    assert answers.hand_check(committed["rows"]) == committed["hand_check"]
    # a row answered anew is left out, never scored with the old answer's label
    changed = [dict(r, answer="112") if r["id"] == labels[0]["query_id"] else r for r in committed["rows"]]
    assert answers.hand_check(changed)[labels[0]["arm"]]["n"] == committed["hand_check"][labels[0]["arm"]]["n"] - 1


def test_where_answers_are_lost_rebuilds_from_the_committed_rows():
    answers, arms = load_benchmark("answer_figures"), load_benchmark("answer_arms")
    committed = json.loads((RESULTS / "answers.json").read_text(encoding="utf-8"))
    evidence = answers.evidence(committed["rows"])
    assert evidence == committed["evidence"]
    before = evidence["travel"]["chain/before/again"]
    # every row sits on one side; the arms share the retrieval, so the gold pages shown too
    assert before["when_shown"]["n"] + before["when_not_shown"]["n"] == before["n"] == 40
    assert evidence["travel"]["agent/form"]["gold_shown"] == before["gold_shown"]
    assert evidence["xquad"]["chain/before/again"]["n"] == 60
    # a row whose gold page is taken out of what was shown moves to the retrieval misses
    gold = arms.gold_pages()
    row = next(r for r in committed["rows"] if r["arm"] == "chain/before/again" and r["source"] == "travel"
               and any(i.split("#")[0] in gold[r["id"]] for i in r["shown_ids"]))
    missed = [dict(r, shown_ids=["travel-none#0:x"]) if r is row else r for r in committed["rows"]]
    after = answers.evidence(missed)["travel"]["chain/before/again"]
    assert after["when_not_shown"]["n"] == before["when_not_shown"]["n"] + 1
    assert after["when_shown"]["n"] == before["when_shown"]["n"] - 1
    # an XQuAD paragraph in another language holds the same answer: it counts as gold
    q = next(r for r in committed["rows"] if r["source"] == "xquad")
    assert len({i.rsplit("-", 1)[0] for i in gold[q["id"]]}) == 1  # one paragraph,
    assert {i.rsplit("-", 1)[1] for i in gold[q["id"]]} == set(arms.XQUAD_LANGS)  # in every language


def test_the_held_out_xquad_figures_rebuild_from_their_rows():
    heldout, arms = load_benchmark("xquad_heldout"), load_benchmark("answer_arms")
    committed = json.loads((RESULTS / "xquad_heldout.json").read_text(encoding="utf-8"))
    assert heldout.summary(committed["rows"]) == committed["summary"]
    # the questions are the seeded draw, none of them the answer benchmark's own
    drawn = heldout.held_out(list(arms.XQUAD_LANGS), committed["per_lang"])
    assert [r["id"] for r in committed["rows"] if r["arm"] == committed["rows"][0]["arm"]] == [q["id"] for q in drawn]
    assert not {q["id"] for q in drawn} & {q["id"] for q in arms.questions()}
    assert {q["lang"] for q in drawn} == set(arms.XQUAD_LANGS)
    assert heldout.on_the_benchmark() == committed["on_the_benchmark"]
