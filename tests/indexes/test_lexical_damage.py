"""Issue 52's first cause and its family: a lexical folder that cannot be read, for any reason,
is searched dense-only with a note, reported by `xlrag check` and rebuilt by `check --repair`;
`xlrag index` never reuses it and never crashes on it. Through the CLI, as a user meets them."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from tests.clitools import app, error_line, run, runner
from xlrag.indexes.lexical import LEXICAL_DIR
from xlrag.indexes.lexical_files import IdList
from xlrag.indexes.store import LanguageStores


@pytest.fixture
def ix(tmp_path, xquad_index):
    path = tmp_path / "ix"
    shutil.copytree(xquad_index, path)
    return path


def _folder(ix, lang):
    return ix / LEXICAL_DIR / LanguageStores.open(ix).manifest.lexical[lang].folder


def _empty_data(ix):
    # what a power cut or a full disk leaves: the file is there, with nothing in it
    (_folder(ix, "en") / "data.csc.index.npy").write_bytes(b"")


def _unknown_param(ix):
    p = _folder(ix, "en") / "params.index.json"
    p.write_text(json.dumps(json.loads(p.read_text()) | {"a_new_key": 1}))


def _file_for_folder(ix):
    f = _folder(ix, "en")
    shutil.rmtree(f)
    f.write_text("not a folder")


def _file_for_lexical_dir(ix):
    shutil.rmtree(ix / LEXICAL_DIR)
    (ix / LEXICAL_DIR).write_text("not a folder")


def _reordered_ids(ix):
    # the same ids, the same bytes and file sizes, in another order: every score would go to another passage
    folder = _folder(ix, "en")
    ids = list(IdList(folder))[::-1]
    encoded = [i.encode("utf-8") for i in ids]
    (folder / "ids.bin").write_bytes(b"".join(encoded))
    np.save(folder / "ids.offsets.npy", np.concatenate([[0], np.cumsum([len(b) for b in encoded])]).astype(np.int64))


def _rows_past_the_last(ix):
    # a score array of the right size naming passages that do not exist: opening does not read it
    # whole, so the first query that touches it finds it
    path = _folder(ix, "en") / "indices.csc.index.npy"
    indices = np.load(path)
    np.save(path, np.full_like(indices, np.iinfo(indices.dtype).max))


def _another_stores_files(ix):
    en, de = _folder(ix, "en"), _folder(ix, "de")
    for f in de.iterdir():
        if f.name != "ids.json":
            shutil.copy(f, en / f.name)


DAMAGE = [_empty_data, _unknown_param, _file_for_folder, _file_for_lexical_dir, _reordered_ids, _another_stores_files,
          _rows_past_the_last]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__.strip("_"))
def test_damage_is_searched_dense_only_reported_and_repaired(ix, damage):
    damage(ix)
    res = run("retrieve", "--index-dir", ix, "--lang", "en", "--mode", "qlang", "--json", "When did Tesla die?")
    assert res.exit_code == 0, res.output
    hits = json.loads(res.stdout)
    assert hits and all(h["channels"] == ["dense"] for h in hits)
    assert "passages may be missing" in res.stderr and "'en'" in res.stderr and "check --repair" in res.stderr
    check = run("check", "--index-dir", ix)
    assert check.exit_code != 0 and "Traceback" not in check.output and "Aborted" not in check.output
    assert "lexical" in check.output and "en" in check.output, check.output
    repair = run("check", "--index-dir", ix, "--repair")
    assert repair.exit_code == 0, repair.output
    assert run("check", "--index-dir", ix).exit_code == 0
    again = run("retrieve", "--index-dir", ix, "--lang", "en", "--mode", "qlang", "--json", "When did Tesla die?")
    assert "passages may be missing" not in again.stderr
    assert any("lexical" in h["channels"] for h in json.loads(again.stdout))


@pytest.mark.parametrize("damage", [_empty_data, _file_for_lexical_dir],
                         ids=lambda f: f.__name__.strip("_"))
def test_index_rebuilds_a_damaged_folder_instead_of_reusing_it(ix, damage, tmp_path):
    from tests.conftest import DATA, N_PARALLEL

    rows = [r for r in (DATA / "xquad" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
            if any(f'"xquad-{i:02d}"' in r for i in range(N_PARALLEL))]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("\n".join(rows) + "\n", encoding="utf-8")
    damage(ix)
    # the session index's splitter (400 tokens, no overlap)
    res = runner.invoke(app, ["index", "--corpus", str(corpus), "--index-dir", str(ix), "--chunk-size", "400"],
                        env={"XLRAG_SPLITTER__CHUNK_OVERLAP": "0"})
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert LanguageStores.open(ix).manifest.status == "complete"
    assert run("check", "--index-dir", ix).exit_code == 0


def test_a_first_build_stopped_before_its_manifest_says_how_to_recover(ix, tmp_path):
    (ix / "xlrag-index.json").unlink()  # what a first build killed before its first manifest leaves
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "d1", "lang": "en", "text": "Tesla died in 1943."}\n', encoding="utf-8")
    line = error_line(run("index", "--corpus", corpus, "--index-dir", ix))
    assert "stopped before it finished" in line and "--rebuild" in line and "check --repair" in line
    assert run("index", "--rebuild", "--corpus", corpus, "--index-dir", ix).exit_code == 0
    assert run("check", "--index-dir", ix).exit_code == 0


def test_lexical_only_says_which_stores_meaning_searched(xquad_index, embedder):
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.schema import make_query

    r = CrossLingualRetriever(LanguageStores.open(xquad_index, embedder.name, embedder.dim), embedder, "all",
                              k=6, channels=["lexical"])
    res = r.retrieve(make_query("When did Tesla die?", lang="en"))  # names no place: nothing to carry over
    r.close()
    notes = [n for n in res.notes if "searched by meaning" in n]
    assert {n.split("'")[1] for n in notes} == {"ar", "de", "es", "ru", "zh"}, res.notes


def test_an_open_retriever_sees_a_lexical_repair(ix, embedder):
    # a server keeps its retriever open; check --repair rebuilds the folder under the same name
    from xlrag.indexes.integrity import repair_index
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.schema import make_query

    _empty_data(ix)
    r = CrossLingualRetriever(LanguageStores.open(ix, embedder.name, embedder.dim), embedder, "qlang", k=3)
    q = make_query("When did Tesla die?", lang="en")
    assert not r.retrieve(q).complete
    assert repair_index(ix, embedder=embedder, sample=0).ok
    again = r.retrieve(q)
    r.close()
    assert again.complete and any("lexical" in h.channels for h in again.hits), again.notes
