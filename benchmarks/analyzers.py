"""The lexical channel's analyzers, before and after, per language: BM25 Hit@1 and name matches.

"Before" is ``xlrag/indexes/analyzers.py`` as it was at a git revision (``--before``, default
the commit before issue 51's analysis work), loaded beside today's module in the same process,
so both are measured in one run on the same text with the same bm25s scoring.

For each language of the many-language test bed (``xlrag.evals.testbed``):
- ``hit1``: the language's questions ranked by BM25 over the language's eight pages (title and
  text), as ``xlrag.indexes.lexical.LexicalIndex`` ranks a store; a tie at rank 1 is a miss;
- ``names``: of the eight countries, how many have a question form (``gen``) sharing a term with
  the page's forms (``nom`` or ``loc``) that no other country's forms have; ``names_text`` the
  same with the running text's form (``loc``) alone, as a page whose title does not name the
  country would be found (Hebrew's prefixes and Korean's particles show only there).
Travel (the 1,023 labelled questions) and XQuAD (570 questions, distractors included): lexical
Hit@1/5 of the questions whose gold document is in their own language, each store's documents
split as benchmarks/channels.py splits them (100 whitespace words), a document ranked by its
best passage. Speed: microseconds per XQuAD passage, old and new interleaved, best of rounds.

Lucene's own analyzers are the reference (``--lucene PYTHON``): that interpreter must have
``pyserini`` (whose Anserini jar holds Lucene's analysis modules) and a JDK 21+ on JAVA_HOME; it
is never xlrag's own environment (a separate venv, e.g. ``/tmp/lucene-venv``). Each test bed
language Lucene has an analyzer for is measured the same way with Lucene's terms.

    python benchmarks/analyzers.py                 # writes benchmarks/results/analyzers.json
    python benchmarks/analyzers.py --before HEAD~3
    JAVA_HOME=/usr/lib/jvm/temurin-25-jdk-amd64 python benchmarks/analyzers.py --lucene /tmp/lucene-venv/bin/python
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
from _common import HERE, read_jsonl, write_json

from xlrag.config import SplitterConfig
from xlrag.evals import testbed
from xlrag.indexes import analyzers as new_module
from xlrag.languages import normalize_code
from xlrag.schema import Document

ROOT = HERE.parent
BEFORE = "004b25c"  # the analyzer of ANALYZER_VERSION 1
SPLITTER = SplitterConfig(chunk_size=100, chunk_overlap=0, tokenizer="whitespace")
Tokens = Callable[[str, str], list[str]]  # (lang, text) -> terms


def module_at(rev: str) -> ModuleType:
    """``xlrag/indexes/analyzers.py`` at git revision ``rev``, imported under another name."""
    source = subprocess.run(["git", "show", f"{rev}:xlrag/indexes/analyzers.py"], cwd=ROOT, check=True,
                            capture_output=True, text=True).stdout
    path = HERE / ".cache" / f"analyzers_{rev.replace('/', '_').replace('~', '_')}.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    name = f"_analyzers_before_{len(sys.modules)}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = sys.modules[name] = importlib.util.module_from_spec(spec)  # dataclasses look it up there
    spec.loader.exec_module(module)
    return module


def tokens_of(module: ModuleType) -> Tokens:
    return lambda lang, text: module.analyzer_for(lang).tokens(text)


class Bm25:
    """One store's BM25 ranking, as LexicalIndex ranks (bm25s defaults, known terms only, ties by
    position), with any analyzer."""

    def __init__(self, tokens: Tokens, lang: str, rows: Sequence[tuple[str, str]]):
        import bm25s

        self.tokens, self.lang, self.ids = tokens, lang, [pid for pid, _ in rows]
        self.bm25 = bm25s.BM25()
        self.bm25.index([tokens(lang, text) for _, text in rows], show_progress=False)

    def rank(self, text: str) -> tuple[list[str], list[float]]:
        known = [t for t in self.tokens(self.lang, text) if t in self.bm25.vocab_dict]
        if not known:
            return [], []
        scores = self.bm25.get_scores(known)
        order = [i for i in np.lexsort((np.arange(len(scores)), -scores)) if scores[i] > 0]
        return [self.ids[i] for i in order], [float(scores[i]) for i in order]


def hit1_strict(ids: list[str], scores: list[float], gold: set[str]) -> bool:
    return bool(ids) and ids[0] in gold and (len(scores) < 2 or scores[0] > scores[1])


def testbed_lang(tokens: Tokens, lang: str) -> dict:
    store = normalize_code(lang)
    rows = [(d.id, f"{d.title}\n{d.text}") for d in testbed.documents([lang])]
    index = Bm25(tokens, store, rows)
    qs = testbed.questions([lang])
    qrels = testbed.qrels(qs)
    hits = sum(hit1_strict(*index.rank(q.question), set(qrels[q.id])) for q in qs)
    forms = testbed.spec(lang).countries
    gen = {c: set(tokens(store, f.gen)) for c, f in forms.items()}
    loc = {c: set(tokens(store, f.loc)) for c, f in forms.items()}
    page = {c: loc[c] | set(tokens(store, f.nom)) for c, f in forms.items()}
    return {"hit1": round(hits / len(qs), 3), "questions": len(qs), "names": _distinct(gen, page),
            "names_text": _distinct(gen, loc), "countries": len(forms)}


def _distinct(question: dict[str, set[str]], page: dict[str, set[str]]) -> int:
    """Countries whose question terms share with their page a term no other country's forms have."""
    n = 0
    for c in question:
        others = set().union(*(question[o] | page[o] for o in question if o != c))
        n += bool((question[c] & page[c]) - others)
    return n


# Lucene's analyzer of each test bed language (org.apache.lucene.analysis.*), as its analyzers'
# package names them; Korean and Chinese get CJKAnalyzer, as pyserini gives them.
LUCENE = {"ar": "ar.ArabicAnalyzer", "bn": "bn.BengaliAnalyzer", "ca": "ca.CatalanAnalyzer", "cs": "cz.CzechAnalyzer",
          "da": "da.DanishAnalyzer", "de": "de.GermanAnalyzer", "el": "el.GreekAnalyzer", "en": "en.EnglishAnalyzer",
          "es": "es.SpanishAnalyzer", "fa": "fa.PersianAnalyzer", "fi": "fi.FinnishAnalyzer", "fr": "fr.FrenchAnalyzer",
          "hi": "hi.HindiAnalyzer", "hu": "hu.HungarianAnalyzer", "hy": "hy.ArmenianAnalyzer",
          "id": "id.IndonesianAnalyzer", "it": "it.ItalianAnalyzer", "ja": "ja.JapaneseAnalyzer",
          "ko": "cjk.CJKAnalyzer", "ne": "ne.NepaliAnalyzer", "nl": "nl.DutchAnalyzer", "pl": "pl.PolishAnalyzer",
          "pt": "pt.PortugueseAnalyzer", "ru": "ru.RussianAnalyzer", "sr": "sr.SerbianAnalyzer",
          "te": "te.TeluguAnalyzer", "th": "th.ThaiAnalyzer", "tr": "tr.TurkishAnalyzer",
          "uk": "uk.UkrainianMorfologikAnalyzer", "zh-Hans": "cjk.CJKAnalyzer", "zh-Hant": "cjk.CJKAnalyzer"}
_LUCENE_SCRIPT = """
import json, sys
from pyserini.analysis import Analyzer  # starts the JVM with Anserini's jar: Lucene's analysis modules
from jnius import autoclass
utils = autoclass("io.anserini.analysis.AnalyzerUtils")
out = {}
for lang, (cls, texts) in json.load(sys.stdin).items():
    try:
        analyzer = autoclass("org.apache.lucene.analysis." + cls)()
    except Exception as e:
        why = [line for line in str(e).splitlines() if "Error" in line or "Exception" in line]
        out[lang] = {"error": (why or [str(e)])[0].strip()[:300]}
        continue
    out[lang] = {"terms": [list(utils.analyze(analyzer, t).toArray()) for t in texts]}
json.dump(out, sys.stdout, ensure_ascii=False)
"""


def lucene_terms(python: str, langs: list[str]) -> tuple[dict[tuple[str, str], list[str]], dict[str, str]]:
    """Lucene's terms of every test bed text of ``langs`` ((store, text) -> terms), and the
    languages whose analyzer could not be loaded (lang -> why)."""
    request: dict[str, tuple[str, list[str]]] = {}
    for lang in langs:
        if lang not in LUCENE:
            continue
        texts = [f"{d.title}\n{d.text}" for d in testbed.documents([lang])]
        texts += [q.question for q in testbed.questions([lang])]
        texts += [x for f in testbed.spec(lang).countries.values() for x in (f.nom, f.loc, f.gen)]
        request[lang] = (LUCENE[lang], list(dict.fromkeys(texts)))
    done = subprocess.run([python, "-c", _LUCENE_SCRIPT], input=json.dumps(request), capture_output=True,
                          text=True, check=True)
    reply = json.loads(done.stdout)
    terms: dict[tuple[str, str], list[str]] = {}
    missing: dict[str, str] = {}
    for lang, got in reply.items():
        if "error" in got:
            missing[lang] = got["error"]
            continue
        for text, t in zip(request[lang][1], got["terms"], strict=True):
            terms[(normalize_code(lang), text)] = t
    return terms, missing


def split(docs: list[Document]) -> dict[str, list[tuple[str, str, str]]]:
    """Per store: (passage id, document id, text), split as benchmarks/channels.py splits."""
    from xlrag.indexes.splitting import PassageSplitter

    splitter = PassageSplitter(SPLITTER)
    out: dict[str, list[tuple[str, str, str]]] = {}
    for p in splitter.split_all(docs):
        out.setdefault(p.lang, []).append((p.id, p.doc_id, p.text))
    return out


def shipped(tokens: Tokens, stores: dict[str, list[tuple[str, str, str]]], queries: list[dict]) -> dict:
    indexes = {lang: Bm25(tokens, lang, [(pid, text) for pid, _, text in rows]) for lang, rows in stores.items()}
    doc_of = {pid: doc for rows in stores.values() for pid, doc, _ in rows}
    per: dict[str, list[tuple[int, int]]] = {}
    for q in queries:
        ids, _ = indexes[q["lang"]].rank(q["question"])
        docs = list(dict.fromkeys(doc_of[i] for i in ids))
        per.setdefault(q["lang"], []).append((int(docs[:1] == [q["gold"]]), int(q["gold"] in docs[:5])))
    out = {lang: {"hit1": round(float(np.mean([h for h, _ in v])), 3),
                  "hit5": round(float(np.mean([h for _, h in v])), 3),
                  "questions": len(v)} for lang, v in sorted(per.items())}
    every = [x for v in per.values() for x in v]
    out["all"] = {"hit1": round(float(np.mean([h for h, _ in every])), 3),
                  "hit5": round(float(np.mean([h for _, h in every])), 3), "questions": len(every)}
    return out


def travel_data() -> tuple[dict, list[dict]]:
    docs = [Document(**d) for d in read_jsonl(ROOT / "xlrag" / "data" / "travel" / "corpus.jsonl")]
    qrels: dict[str, str] = {}
    for r in read_jsonl(HERE / "data" / "travel" / "qrels.jsonl"):
        qrels[r["query_id"]] = r["doc_id"]
    lang_of = {d.id: d.lang for d in docs}
    queries = [q | {"gold": qrels[q["id"]]} for q in read_jsonl(HERE / "data" / "travel" / "queries.jsonl")
               if lang_of[qrels[q["id"]]] == q["lang"]]
    return split(docs), queries


def xquad_data() -> tuple[dict, list[dict]]:
    xq = ROOT / "xlrag" / "data" / "xquad"
    docs = [Document(**d) for d in read_jsonl(xq / "corpus.jsonl") + read_jsonl(xq / "distractors.jsonl")]
    queries = [q | {"gold": q["gold_doc_id"]} for q in read_jsonl(xq / "queries.jsonl")]
    return split(docs), queries


def speed(old: Tokens, new: Tokens, stores: dict[str, list[tuple[str, str, str]]], rounds: int = 5) -> dict:
    """µs per passage over every XQuAD passage, old and new in alternating rounds (best round)."""
    passages = [(lang, text) for lang, rows in stores.items() for _, _, text in rows]
    for fn in (old, new):  # warm caches: ICU break iterators, stemmers, lemma tables
        for lang in stores:
            fn(lang, "warm up")
    best = {"old": float("inf"), "new": float("inf")}
    for _ in range(rounds):
        for name, fn in (("old", old), ("new", new)):
            t = time.perf_counter()
            for lang, text in passages:
                fn(lang, text)
            best[name] = min(best[name], (time.perf_counter() - t) / len(passages) * 1e6)
    return {"passages": len(passages), "old_us": round(best["old"], 1), "new_us": round(best["new"], 1),
            "ratio": round(best["new"] / best["old"], 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default=BEFORE, help="git revision of the analyzer to compare with")
    ap.add_argument("--langs", default="", help="comma-separated test bed languages (default: all)")
    ap.add_argument("--lucene", default="", help="a Python with pyserini, for Lucene's analyzers beside xlrag's")
    args = ap.parse_args()
    before = module_at(args.before)
    old, new = tokens_of(before), tokens_of(new_module)
    langs = args.langs.split(",") if args.langs else testbed.languages()
    rows = []
    for lang in langs:
        b, a = testbed_lang(old, lang), testbed_lang(new, lang)
        rows.append({"lang": lang, "exercises": testbed.spec(lang).exercises,
                     "analyzer": {"old": before.analyzer_for(lang).name,
                                  "new": new_module.analyzer_for(lang).name},
                     "hit1": {"old": b["hit1"], "new": a["hit1"]}, "questions": a["questions"],
                     "names": {"old": b["names"], "new": a["names"]},
                     "names_text": {"old": b["names_text"], "new": a["names_text"]}, "countries": a["countries"]})
        print(f"{lang:8} hit1 {b['hit1']:.3f} -> {a['hit1']:.3f}   names {b['names']}/8 -> {a['names']}/8"
              f"   in text {b['names_text']}/8 -> {a['names_text']}/8   {new_module.analyzer_for(lang).name}",
              flush=True)
    lucene: dict = {}
    if args.lucene:
        terms, missing = lucene_terms(args.lucene, langs)
        lucene = {"python": args.lucene, "missing": missing, "languages": {}}
        for row in rows:
            lang = row["lang"]
            if lang not in LUCENE or lang in missing:
                continue
            got = testbed_lang(lambda store, text: terms[(store, text)], lang)
            it = testbed.spec(lang).countries["IT"]
            lucene["languages"][lang] = {
                "analyzer": LUCENE[lang], "hit1": got["hit1"], "names": got["names"], "names_text": got["names_text"],
                "xlrag_hit1": row["hit1"]["new"], "xlrag_names_text": row["names_text"]["new"],
                "italy": {"lucene": [terms[(normalize_code(lang), x)] for x in (it.nom, it.loc, it.gen)],
                          "xlrag": [new(normalize_code(lang), x) for x in (it.nom, it.loc, it.gen)]}}
            print(f"lucene {lang:8} hit1 {got['hit1']:.3f} (xlrag {row['hit1']['new']:.3f})   in text "
                  f"{got['names_text']}/8 (xlrag {row['names_text']['new']}/8)   {LUCENE[lang]}", flush=True)
        for lang, why in missing.items():
            print(f"lucene {lang:8} not measured: {why}")
    total = sum(r["questions"] for r in rows)
    summary = {k: round(sum(r["hit1"][k] * r["questions"] for r in rows) / total, 4) for k in ("old", "new")}
    print(f"test bed hit1 {summary['old']:.4f} -> {summary['new']:.4f}")
    tr_stores, tr_queries = travel_data()
    xq_stores, xq_queries = xquad_data()
    sections = {}
    for name, stores, queries in (("travel", tr_stores, tr_queries), ("xquad", xq_stores, xq_queries)):
        sections[name] = {"old": shipped(old, stores, queries), "new": shipped(new, stores, queries)}
        for lang in sections[name]["new"]:
            o, n = sections[name]["old"][lang], sections[name]["new"][lang]
            print(f"{name:7} {lang:4} hit1 {o['hit1']:.3f} -> {n['hit1']:.3f}  hit5 {o['hit5']:.3f} -> {n['hit5']:.3f}")
    timing = speed(old, new, xq_stores)
    print(f"speed: {timing}")
    write_json("analyzers.json", {
        "before": args.before, "analyzer_version": new_module.ANALYZER_VERSION,
        "machine": {"python": platform.python_version(), "cpus": __import__("os").cpu_count()},
        "testbed": {"hit1": summary, "languages": rows},
        "travel_same_language": sections["travel"], "xquad_same_language": sections["xquad"],
        "speed_xquad": timing, "lucene": lucene or None,
    })


if __name__ == "__main__":
    main()
