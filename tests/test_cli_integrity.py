"""`xlrag check`, `delete`, `index --rebuild/--source/--no-wait` end to end (in-process CLI)."""

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
from typer.testing import CliRunner

from tests.conftest import DATA, lose_vectors
from xlrag.cli import app

runner = CliRunner()


def run(*args):
    return runner.invoke(app, [str(a) for a in args])


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("cli-integrity") / "c.jsonl"
    lines = (DATA / "xquad" / "corpus.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:8]), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def built(corpus, tmp_path_factory):
    ix = tmp_path_factory.mktemp("built") / "ix"
    res = run("index", "--corpus", corpus, "--index-dir", ix, "--chunk-size", "400")
    assert res.exit_code == 0, res.output
    assert "quick check: 8 vectors of this source present, 0 missing, 0 duplicates across stores" in res.output
    return ix


def test_check_clean_then_lost_vectors_then_repair(built, tmp_path):
    res = run("check", "--index-dir", built)
    assert res.exit_code == 0 and res.output.startswith("ok: 8 passages in 6 stores: 0 missing vectors"), res.output
    ix = tmp_path / "ix"
    shutil.copytree(built, ix)  # a path this process has not opened: no cached Chroma state
    lose_vectors(ix, "en")
    res = run("check", "--index-dir", ix, "--json")
    report = json.loads(res.stdout)
    assert res.exit_code == 1 and report["lost_stores"] == ["en"] and len(report["missing_vectors"]) > 0
    res = run("check", "--index-dir", ix, "--repair")
    assert res.exit_code == 0, res.output
    assert "repaired: " in res.output and "passages re-embedded" in res.output and "ok: " in res.output
    assert run("check", "--index-dir", ix).exit_code == 0


def test_delete_rebuild_and_sources(corpus, tmp_path):
    ix = tmp_path / "ix"
    assert run("index", "--corpus", corpus, "--index-dir", ix, "--chunk-size", "400", "--source", "a").exit_code == 0
    res = run("delete", "--index-dir", ix, "--doc-id", "xquad-00-ar", "--doc-id", "xquad-00-de")
    assert res.exit_code == 0 and "deleted 2 documents (2 passages)" in res.output, res.output
    res = run("delete", "--index-dir", ix, "--doc-id", "nope")
    assert res.exit_code == 2 and res.output.startswith("error: no document 'nope'")
    res = run("index", "--corpus", corpus, "--index-dir", ix, "--chunk-size", "400", "--source", "a")
    assert "2 added, 6 already present" in res.output, res.output
    res = run("index", "--corpus", corpus, "--index-dir", ix, "--chunk-size", "400", "--source", "a", "--rebuild")
    assert "8 added, 0 already present" in res.output, res.output


def test_no_wait_names_the_writer(corpus, tmp_path):
    ix = tmp_path / "ix"
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import time
        from xlrag.indexes.lock import WriterLock
        with WriterLock({str(ix)!r}):
            print("held", flush=True)
            time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for args in (("index", "--corpus", corpus), ("delete", "--doc-id", "x"), ("check", "--repair")):
            res = run(*args, "--index-dir", ix, "--no-wait")
            lines = res.output.strip().splitlines()
            assert res.exit_code == 2 and len(lines) == 1, res.output
            assert lines[0].startswith("error: index") and f"pid {holder.pid} on" in lines[0]
    finally:
        holder.kill()
        holder.wait()
