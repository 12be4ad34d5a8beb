"""The index a run reads, kept in step with the corpus its fingerprint hashes.

A run's records carry the fingerprint of its settings, which hashes the corpus file; the
index is what the run builds from it (:data:`~xlrag.evals.fingerprint.OUTPUT_PATHS`), so the
index must be that corpus's, or an edited corpus is scored against its old passages. The run
folder keeps, per dataset, what the index was last brought in step with: the corpus's
SHA-256 and path, the splitter, the embedder, and the index's manifest as that sync left it
(any later write to the index changes the manifest). The index is reused only while all of
them match; otherwise it is synced to the corpus (:func:`~xlrag.indexes.indexer.build_index`:
edited documents replaced, removed ones pruned, present passages not embedded again), or
refused in one line (an index of another embedder or splitter). Reuse costs one hash of
the corpus; a sync splits every document.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from xlrag.config import EmbedderConfig, RetrievalConfig, SplitterConfig
from xlrag.errors import IndexNotFoundError
from xlrag.evals.run_folder import RunFolder

__all__ = ["run_index", "run_retriever"]


def _state(corpus: Path, embedder: Any, splitter: SplitterConfig) -> dict[str, Any]:
    with corpus.open("rb") as fh:
        digest = hashlib.file_digest(fh, "sha256").hexdigest()
    return {"corpus": str(corpus.resolve()), "sha256": digest, "splitter": splitter.model_dump(mode="json"),
            "embedder": embedder.name, "dim": embedder.dim}


def _manifest(stores: Any) -> str:
    return hashlib.sha256(stores.manifest.model_dump_json().encode()).hexdigest()


def run_index(folder: RunFolder, dataset: str, corpus: Path, index: Path, embedder: Any, *,
              embedder_config: EmbedderConfig | None = None, splitter: SplitterConfig | None = None) -> Any:
    """The :class:`~xlrag.indexes.store.LanguageStores` of ``index``, in step with ``corpus``."""
    from xlrag.indexes.indexer import build_index
    from xlrag.indexes.store import LanguageStores

    splitter = splitter or SplitterConfig()
    want = _state(corpus, embedder, splitter)
    last = folder.synced(dataset)
    if last is not None and index.is_dir():
        try:
            stores = LanguageStores.open(index, embedder.name, embedder.dim)
        except IndexNotFoundError:
            stores = None
        if stores is not None and stores.complete and last == {**want, "manifest": _manifest(stores)}:
            return stores
    build_index(corpus, index, embedder=embedder, embedder_config=embedder_config, splitter=splitter)
    stores = LanguageStores.open(index, embedder.name, embedder.dim)
    folder.write_synced(dataset, {**want, "manifest": _manifest(stores)})
    return stores


def run_retriever(folder: RunFolder, dataset: str, *, corpus: Path | None, index: Path,
                  embedder: EmbedderConfig, retrieval: RetrievalConfig, translator: Any = None) -> Any:
    """The retriever an eval run or a study searches ``dataset`` with: its index in step with
    ``corpus`` (:func:`run_index`; ``corpus`` None: ``index`` as it is), searched as
    ``retrieval`` says (:meth:`~xlrag.indexes.retriever.CrossLingualRetriever.from_settings`).

    The vendored corpora with the local embedder read the embeddings shipped with the package,
    split as the demo splits them; any other embedder's vectors are cached in the run folder,
    so a resumed run embeds nothing twice.
    """
    from xlrag.demo import DATA, DEMO_SPLITTER, demo_embedder
    from xlrag.indexes.embed_cache import CachedEmbedder
    from xlrag.indexes.embedders import build_embedder
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores

    vendored = corpus is not None and corpus.resolve().is_relative_to(DATA) and embedder.name == "local"
    vectors = demo_embedder() if vendored else CachedEmbedder(build_embedder(embedder),
                                                              folder.path / "embeddings.sqlite")
    if corpus is None:
        stores = LanguageStores.open(index, vectors.name, vectors.dim)
    else:
        stores = run_index(folder, dataset, corpus, index, vectors, embedder_config=embedder,
                           splitter=DEMO_SPLITTER if vendored else None)
    return CrossLingualRetriever.from_settings(stores, vectors, retrieval, translator=translator)
