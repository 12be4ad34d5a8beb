"""The run folder's resume rule, fuzzed: whatever mix of kills, torn lines, failures and
changed settings came before, a clean run ends with exactly one record per key, each made
with the settings it is labelled with, and nothing of another setting in what is read."""

from __future__ import annotations

import asyncio
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlrag.evals.run_folder import RunFolder, read_records

KEYS = [f"q{i}" for i in range(6)]


class Killed(BaseException):
    """The process dying mid-record: not an error a record can catch."""


def _run(folder: RunFolder, fp: str, fails: frozenset[str], kill_at: int | None, concurrency: int,
         retry_failed: bool = True) -> dict:
    calls = 0

    async def make(key: str) -> dict:
        nonlocal calls
        calls += 1
        if kill_at is not None and calls > kill_at:
            raise Killed
        await asyncio.sleep(0)
        if key in fails:
            raise RuntimeError(f"{key} failed under {fp}")
        # what a record holds depends on the settings that made it
        return {"key": key, "value": f"{key}@{fp}"}

    async def go() -> dict:
        return await folder.append_records(KEYS, str, make, lambda k: {"key": k}, fingerprint=fp, timeout=5,
                                           concurrency=concurrency, retry_failed=retry_failed)

    try:
        return asyncio.run(go())
    except Killed:
        return {}


def _assert_sound(folder: RunFolder) -> None:
    lines = read_records(folder.records_path)
    made = [(r["key"], r["fp"]) for r in lines if not r.get("error")]
    assert len(made) == len(set(made)), "a record was made twice under one setting"
    for r in lines:
        assert "fp" in r
        if not r.get("error"):
            assert r["value"] == f"{r['key']}@{r['fp']}", "a record labelled with settings that did not make it"


step = st.tuples(st.sampled_from("ABC"), st.frozensets(st.sampled_from(KEYS), max_size=3),
                 st.one_of(st.none(), st.integers(0, 6)), st.sampled_from([1, 3]), st.booleans(), st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=st.lists(step, max_size=7), final=st.sampled_from("ABC"))
def test_no_history_of_kills_failures_and_setting_changes_duplicates_or_mislabels(tmp_path_factory, history, final):
    folder = RunFolder(tmp_path_factory.mktemp("run"))
    for fp, fails, kill_at, concurrency, torn, retry in history:
        _run(folder, fp, fails, kill_at, concurrency, retry_failed=retry)
        if torn and folder.records_path.exists():
            with folder.records_path.open("ab") as fh:  # died mid-write
                fh.write(b'{"key": "q0", "value": "q0@')
        _assert_sound(folder)
    summary = _run(folder, final, frozenset(), None, 3)
    _assert_sound(folder)
    assert summary["failed"] == 0
    current = [r for r in read_records(folder.records_path) if r["fp"] == final]
    by_key = {r["key"]: r for r in current}  # the last line of each key is the one read
    assert sorted(by_key) == KEYS and all(not r.get("error") for r in by_key.values())
    # what a report reads: this setting's records, one per key, none of another setting
    (folder.path / "run.json").write_text(json.dumps({"fingerprint": final}), encoding="utf-8")
    read = folder.records()
    assert sorted(r["key"] for r in read) == KEYS
    assert {r["value"] for r in read} == {f"{k}@{final}" for k in KEYS}


def test_failed_records_are_retried_by_default_and_logged(tmp_path):
    folder = RunFolder(tmp_path)
    first = _run(folder, "A", frozenset({"q1", "q2"}), None, 1)
    assert (first["written"], first["failed"]) == (6, 2)
    log = [json.loads(x) for x in folder.failures_path.read_text(encoding="utf-8").splitlines()]
    assert [(x["key"], x["fp"]) for x in log] == [("q1", "A"), ("q2", "A")] and "failed under A" in log[0]["error"]

    kept = _run(folder, "A", frozenset(), None, 1, retry_failed=False)
    assert (kept["written"], kept["skipped"], kept["retried"]) == (0, 6, 0)

    again = _run(folder, "A", frozenset({"q2"}), None, 1)
    assert (again["written"], again["skipped"], again["retried"], again["failed"]) == (2, 4, 2, 1)
    (folder.path / "run.json").write_text(json.dumps({"fingerprint": "A"}), encoding="utf-8")
    read = {r["key"]: r for r in folder.records()}
    assert "error" not in read["q1"] and read["q2"]["error"].startswith("RuntimeError")
    assert len(folder.failures_path.read_text(encoding="utf-8").splitlines()) == 3  # every failure kept


def test_a_changed_setting_makes_new_records_and_keeps_the_old_out_of_what_is_read(tmp_path):
    folder = RunFolder(tmp_path)
    _run(folder, "A", frozenset(), None, 1)
    changed = _run(folder, "B", frozenset(), None, 1)
    assert (changed["written"], changed["skipped"], changed["other_settings"]) == (6, 0, 6)
    (folder.path / "run.json").write_text(json.dumps({"fingerprint": "B"}), encoding="utf-8")
    assert {r["value"] for r in folder.records()} == {f"{k}@B" for k in KEYS}
    assert len(read_records(folder.records_path)) == 12  # nothing lost


def test_records_made_before_fingerprints_are_adopted_by_the_settings_they_were_made_with(tmp_path):
    folder = RunFolder(tmp_path)
    folder.records_path.write_text("".join(json.dumps({"key": k, "value": f"{k}@A"}) + "\n" for k in KEYS[:4]))
    assert len(folder.records()) == 4  # no run.json: a folder of before, read whole
    assert folder.adopt_legacy(lambda: "A") == 4
    assert folder.adopt_legacy(lambda: "never asked") == 0
    resumed = _run(folder, "A", frozenset(), None, 1)
    assert (resumed["written"], resumed["skipped"]) == (2, 4)
    _assert_sound(folder)
