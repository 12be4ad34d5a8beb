"""Damage is an error, never an empty answer: each damage gives one clear line and exit 2
from info, retrieve and ask, and a typed error in Python."""

import os
import shutil

import pytest
from typer.testing import CliRunner

from tests.conftest import lose_vectors
from xlrag.cli import app
from xlrag.errors import IndexCorruptError, IndexNotFoundError
from xlrag.indexes.indexer import index_documents
from xlrag.indexes.store import LanguageStores

runner = CliRunner()


def _sqlite(ix):
    return ix / "chroma" / "chroma.sqlite3"


def _truncate(path):
    with path.open("r+b") as fh:
        fh.truncate(path.stat().st_size // 2)


def _lose_vectors(ix):
    lose_vectors(ix, "de")


def _as_file(ix):
    shutil.rmtree(ix)
    ix.write_text("not a directory")


DAMAGE = {
    "sqlite deleted": (lambda ix: _sqlite(ix).unlink(), IndexCorruptError, "chroma.sqlite3 is missing"),
    "sqlite truncated": (lambda ix: _truncate(_sqlite(ix)), IndexCorruptError, "is truncated"),
    "sqlite garbage": (lambda ix: _sqlite(ix).write_bytes(os.urandom(300_000)), IndexCorruptError,
                       "is not a SQLite database"),
    "manifest deleted": (lambda ix: (ix / "xlrag-index.json").unlink(), IndexCorruptError,
                         "xlrag-index.json is missing"),
    "manifest truncated": (lambda ix: _truncate(ix / "xlrag-index.json"), IndexCorruptError,
                           "xlrag-index.json is unreadable"),
    "hnsw folder deleted": (_lose_vectors, IndexCorruptError,
                            "vector files of store 'de'"),
    "index-dir is a file": (_as_file, IndexNotFoundError, "is a file, not a directory"),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory, xquad_docs, embedder, splitter_config):
    ix = tmp_path_factory.mktemp("pristine") / "ix"
    index_documents(xquad_docs[:12], ix, embedder, splitter_config)
    return ix


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damage_is_a_one_line_error_everywhere(damage, pristine, tmp_path):
    ix = tmp_path / "ix"
    shutil.copytree(pristine, ix)
    harm, error, why = DAMAGE[damage]
    harm(ix)
    with pytest.raises(error, match=why):
        LanguageStores.open(ix)
    commands = {
        "info": ["info", "--index-dir", ix],
        "retrieve": ["retrieve", "Wie viele Punkte?", "--lang", "de", "--index-dir", ix],
        # A model path that does not exist: had ask loaded the model first, it would fail on that.
        "ask": ["ask", "Wie viele Punkte?", "--lang", "de", "--mode", "qlang", "--llm", f"local:{tmp_path}/none.gguf",
                "--index-dir", ix],
    }
    for name, args in commands.items():
        result = runner.invoke(app, [str(a) for a in args])
        lines = [x for x in result.output.strip().splitlines() if x.strip()]
        assert result.exit_code == 2, (name, result.output)
        assert len(lines) == 1 and lines[0].startswith("error:"), (name, result.output)
        assert why in lines[0], (name, lines[0])
        if error is IndexCorruptError:
            # only what check --repair can mend sends the user there
            assert ("xlrag check --repair" in lines[0]) == (damage not in LOSES_PASSAGES), lines[0]
            assert "--rebuild" in lines[0]


# Chroma's database holds the passages: no repair brings them back, only a rebuild
LOSES_PASSAGES = {"sqlite deleted", "sqlite truncated", "sqlite garbage"}


@pytest.mark.parametrize("damage", [d for d in DAMAGE if DAMAGE[d][1] is IndexCorruptError])
def test_check_repair_repairs_or_says_what_to_run_instead(damage, pristine, tmp_path):
    """check --repair never answers with the message that told the user to run it."""
    ix = tmp_path / "ix"
    shutil.copytree(pristine, ix)
    before = runner.invoke(app,
                           ["retrieve", "Wie viele Punkte?", "--lang", "de", "--json", "--index-dir", str(pristine)])
    DAMAGE[damage][0](ix)
    result = runner.invoke(app, ["check", "--repair", "--index-dir", str(ix)])
    if damage in LOSES_PASSAGES:
        (line,) = result.output.strip().splitlines()
        assert result.exit_code == 2 and "cannot be repaired" in line and "--rebuild" in line, result.output
        assert "check --repair" not in line
        return
    assert result.exit_code == 0, result.output
    assert runner.invoke(app, ["check", "--index-dir", str(ix)]).exit_code == 0
    after = runner.invoke(app, ["retrieve", "Wie viele Punkte?", "--lang", "de", "--json", "--index-dir", str(ix)])
    assert after.exit_code == 0, after.output
    import json

    def ids(out):
        return [h["id"] for h in json.loads(out)]

    assert ids(after.output) == ids(before.output) and ids(after.output)
