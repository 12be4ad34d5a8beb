"""A real `xlrag eval run` killed midway resumes with every record once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.conftest import index_copy

# the console script pip installed next to this interpreter, as a user runs it
XLRAG = [str(Path(sys.executable).parent / "xlrag")]


@pytest.mark.slow
def test_kill_and_resume(tmp_path: Path, travel_run_index: Path):
    exp = {
        "name": "resume",
        "datasets": [{"name": "travel", "sample": {"per_lang": 3},
                      "index_dir": index_copy(travel_run_index, tmp_path)}],
        "modes": ["qlang"],
        "retrieval": {"retrieve_k": 4, "k": 2},
        "llms": [{"provider": "local", "model": "gemma-3-270m", "max_tokens": 32}],
    }
    path = tmp_path / "exp.yaml"
    path.write_text(yaml.safe_dump(exp), encoding="utf-8")
    out = tmp_path / "run"
    records = out / "records.jsonl"
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.Popen([*XLRAG, "eval", "run", str(path), "--out", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if records.exists() and records.read_bytes().count(b"\n") >= 2:
            break
        if proc.poll() is not None:
            pytest.fail(f"the run ended before it could be killed: {proc.stderr.read().decode()[-500:]}")
        time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("no records after 10 minutes")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    before = [json.loads(x) for x in records.read_text(encoding="utf-8").splitlines() if x.strip()]
    assert 2 <= len(before) < 6, "the kill must land midway"

    done = subprocess.run([*XLRAG, "eval", "run", str(path), "--out", str(out)], env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-1000:]
    assert f"{len(before)} already present" in done.stdout
    after = [json.loads(x) for x in records.read_text(encoding="utf-8").splitlines()]
    keys = [r["key"] for r in after]
    assert len(keys) == len(set(keys)) == 6  # 3 ar + 3 en, once each
    assert all("error" not in r for r in after)
    assert after[: len(before)] == before  # what was written before the kill is kept as it was
    assert (out / "report.html").exists()


def test_report_on_a_non_run_folder_is_one_line(tmp_path):
    res = subprocess.run([*XLRAG, "eval", "report", str(tmp_path)], capture_output=True, text=True)
    assert res.returncode == 2
    assert "is not a run folder" in res.stderr and res.stderr.count("\n") == 1


def test_run_with_a_bad_experiment_is_one_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ndatasets: [{name: travel}]\nmodes: [qlnag]\n", encoding="utf-8")
    res = subprocess.run([*XLRAG, "eval", "run", str(bad), "--out", str(tmp_path / "o")], capture_output=True,
                         text=True)
    assert res.returncode == 2
    assert "did you mean 'qlang'" in res.stderr and res.stderr.count("\n") == 1
