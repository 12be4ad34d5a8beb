"""A lexical index's folder on disk (real bm25s, real files, no Chroma): what a reader opens
memory-mapped ranks exactly as the index that was built, and the opening checks find damage
without reading the score arrays."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
from pydantic import ValidationError

from tests.conftest import DATA, read_jsonl
from xlrag.config import StoreConfig
from xlrag.indexes.lexical import LexicalIndex, unreadable
from xlrag.indexes.lexical_files import IdList, MappedVocab

QUERIES = ["How many points did the Panthers defense surrender?", "Tesla died in New York", "Normandy Normans",
           "the Amazon rainforest", "zzzz not a word"]


@pytest.fixture(scope="module")
def rows():
    docs = [r for r in read_jsonl(DATA / "xquad" / "corpus.jsonl") if r["lang"] == "en"]
    # ids with non-ASCII, separators and an empty text: the id files are bytes, not lines
    return [(f"{d['id']}#0:ü\n{i}", d["text"]) for i, d in enumerate(docs)] + [("blank#0:x", "")]


def test_a_folder_opened_memory_mapped_ranks_as_the_built_index(tmp_path, rows):
    built = LexicalIndex.build("en", rows)
    ref = built.save(tmp_path)
    opened = LexicalIndex.load(tmp_path, "en", ref)
    assert isinstance(opened.ids, IdList) and isinstance(opened.bm25.scores["data"], np.memmap)
    assert isinstance(opened.bm25.vocab_dict, MappedVocab) and dict(opened.bm25.vocab_dict) == built.bm25.vocab_dict
    assert ("panther" in opened.bm25.vocab_dict and "zzzz" not in opened.bm25.vocab_dict
            and 7 not in opened.bm25.vocab_dict)
    assert list(opened.ids) == [pid for pid, _ in rows] and opened.ids[-1] == "blank#0:x"
    assert ref.passages == len(rows) and ref.empty == 1
    for q in QUERIES:
        a, b = built.rank(q, 5), opened.rank(q, 5)
        assert (a.ids, a.scores) == (b.ids, b.scores)
    assert built.rank(QUERIES[0], 5).ids  # not only empty rankings compared
    assert unreadable(tmp_path, ref) is None
    assert built.save(tmp_path) == ref  # a whole folder of that name is kept


def test_the_opening_checks_find_reordered_ids_or_terms_and_a_foreign_entry(tmp_path, rows):
    ref = LexicalIndex.build("en", rows).save(tmp_path)
    folder = tmp_path / ref.folder
    blob = (folder / "ids.bin").read_bytes()
    (folder / "ids.bin").write_bytes(blob[1:2] + blob[:1] + blob[2:])  # same size, two bytes swapped
    with pytest.raises(ValueError, match="not in the order"):
        LexicalIndex.load(tmp_path, "en", ref)
    (folder / "ids.bin").write_bytes(blob)
    terms = (folder / "vocab.terms.bin").read_bytes()
    (folder / "vocab.terms.bin").write_bytes(terms[1:2] + terms[:1] + terms[2:])
    with pytest.raises(ValueError, match="vocabulary is not the one"):
        LexicalIndex.load(tmp_path, "en", ref)
    other = LexicalIndex.build("en", rows[:-1]).save(tmp_path)
    with pytest.raises(ValueError, match="does not hold the passages the manifest names"):
        LexicalIndex.load(tmp_path, "en", ref.model_copy(update={"folder": other.folder}))
    with pytest.raises(FileNotFoundError, match="missing"):
        LexicalIndex.load(tmp_path, "en", ref.model_copy(update={"folder": "en-0000"}))


def test_row_numbers_past_the_last_fail_the_first_query_that_touches_them(tmp_path, rows):
    from xlrag.indexes.lexical import LexicalDamageError

    ref = LexicalIndex.build("en", rows).save(tmp_path)
    path = tmp_path / ref.folder / "indices.csc.index.npy"
    indices = np.load(path)
    np.save(path, np.full_like(indices, len(rows) + 7))
    opened = LexicalIndex.load(tmp_path, "en", ref)  # the opening checks do not read the array
    with pytest.raises(LexicalDamageError, match=r"store 'en'.*unreadable.*check --repair"):
        opened.rank(QUERIES[0], 5)
    assert "passages its ids list does not have" in unreadable(tmp_path, ref)  # the full check does


def test_a_folder_of_the_first_format_is_still_read(tmp_path, rows):
    built = LexicalIndex.build("en", rows)
    ref = built.save(tmp_path)
    folder = tmp_path / ref.folder
    # what xlrag wrote before the ids and terms had files of their own: the ids as a JSON list
    for name in ("ids.bin", "ids.offsets.npy", "vocab.terms.bin", "vocab.offsets.npy", "vocab.ids.npy"):
        (folder / name).unlink()
    ids = [pid for pid, _ in rows]
    sizes = {f.name: f.stat().st_size for f in sorted(folder.iterdir()) if f.name != "ids.json"}
    order = hashlib.sha1("\n".join(ids).encode(), usedforsecurity=False).hexdigest()[:16]
    (folder / "ids.json").write_text(json.dumps({"ids": ids, "order": order, "sizes": sizes, "ref": ref.model_dump()}))
    opened = LexicalIndex.load(tmp_path, "en", ref)
    assert opened.ids == ids and opened.rank(QUERIES[0], 5).ids == built.rank(QUERIES[0], 5).ids
    assert opened.bm25.vocab_dict == built.bm25.vocab_dict  # bm25s's own dict


def test_lexical_dir_is_for_a_chroma_server(tmp_path):
    assert StoreConfig(kind="http", lexical_dir=tmp_path).lexical_dir == tmp_path
    with pytest.raises(ValidationError, match=r"store.lexical_dir is for a Chroma server \(kind: http\).*remove"):
        StoreConfig(lexical_dir=tmp_path)
