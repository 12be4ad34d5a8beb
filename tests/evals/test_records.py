"""Typed records: a record that does not fit its kind's model fails when it is written and
when it is read, and the models follow the ones they dump."""

from __future__ import annotations

import asyncio
import json

import pytest

from xlrag.errors import XlragError
from xlrag.evals.records import GridRecord, JudgesRecord
from xlrag.evals.run_folder import RunFolder, read_records
from xlrag.judges.panel import PanelVerdict

IDENTITY = {"dataset": "travel", "mode": "qlang", "llm": None, "variant": "default", "query_id": "q1",
            "lang": "en", "question": "?", "golds": []}
HIT = {"passage_id": "p1", "doc_id": "d1", "lang": "en", "score": 0.5}


def _append(folder: RunFolder, make) -> dict:
    return asyncio.run(folder.append_records(["a", "b"], str, make, lambda w: {"key": w, **IDENTITY},
                                             fingerprint="f1", timeout=5, concurrency=1,
                                             model=GridRecord))


def test_a_record_that_does_not_fit_is_written_as_failed_and_a_good_one_unchanged(tmp_path):
    async def make(w):  # "b" renames a field, as a producer might
        return {"key": w, **IDENTITY, ("retrieved" if w == "a" else "retrieve"): [HIT], "seconds": 1.0}

    folder = RunFolder(tmp_path)
    summary = _append(folder, make)
    assert (summary["written"], summary["failed"]) == (2, 1)
    good, bad = read_records(folder.records_path)
    assert good == {"key": "a", **IDENTITY, "retrieved": [HIT], "seconds": 1.0, "fp": "f1"}
    assert bad["error"].startswith("ValidationError") and "retrieve" in bad["error"] and "Extra inputs" in bad["error"]


def test_a_record_that_does_not_fit_fails_when_read_naming_its_line(tmp_path):
    folder = RunFolder(tmp_path)
    folder.records_path.write_text(json.dumps({"key": "a", **IDENTITY}) + "\n" +
                                   json.dumps({"key": "b", **IDENTITY, "retrieved": [{**HIT, "score": "high"}]}) + "\n")
    assert len(folder.records()) == 2  # unchecked without a model
    with pytest.raises(XlragError, match=r"records\.jsonl:2: not a GridRecord: retrieved\.0\.score: ") as e:
        folder.records(GridRecord)
    assert "\n" not in str(e.value)


def test_an_error_record_that_does_not_fit_is_a_bug_raised(tmp_path):
    async def make(w):
        raise RuntimeError("model down")

    folder = RunFolder(tmp_path)
    with pytest.raises(XlragError, match="the error record of a: not a GridRecord: dataset: Field required"):
        asyncio.run(folder.append_records(["a"], str, make, lambda w: {"key": w}, fingerprint="f1", timeout=5,
                                          concurrency=1, model=GridRecord))


def test_the_judges_section_is_the_panel_verdict_plus_final():
    assert set(JudgesRecord.model_fields) == set(PanelVerdict.model_fields) | {"final"}
