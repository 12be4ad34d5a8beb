"""Travel (Amiraz et al. 2025): the ar/en excerpt with gold labels, CC BY 4.0."""

from __future__ import annotations

import random
from pathlib import Path

from vendor_data.common import (
    SEED,
    TRAVEL_ID_PREFIX,
    TRAVEL_MIN_GOLD_WORDS,
    TRAVEL_PAIRS,
    TRAVEL_PER_PAIR,
    extract_bibtex,
    read_jsonl,
    write_jsonl,
    write_text,
)


def build_travel(src: Path, out: Path) -> dict:
    docs = read_jsonl(src / "corpus.jsonl")
    queries = read_jsonl(src / "queries.jsonl")
    qrel_rows = read_jsonl(src / "qrels.jsonl")
    qrels = {r["query_id"]: r["doc_id"] for r in qrel_rows}
    if len(docs) != 191:
        raise SystemExit(f"travel corpus: expected 191 docs, got {len(docs)}")

    vendored = []
    for d in docs:
        row = dict(d)
        row["id"] = TRAVEL_ID_PREFIX + d["id"]
        vendored.append(row)
    write_jsonl(out / "corpus.jsonl", vendored)

    by_id = {d["id"]: d for d in docs}
    rng = random.Random(SEED)
    sample = []
    for qlang, dlang in TRAVEL_PAIRS:
        cands = sorted(
            (
                q
                for q in queries
                if q["lang"] == qlang
                and q["gold_doc_lang"] == dlang
                and len(by_id[qrels[q["id"]]]["text"].split()) >= TRAVEL_MIN_GOLD_WORDS
            ),
            key=lambda q: q["id"],
        )
        picked = sorted(rng.sample(cands, TRAVEL_PER_PAIR), key=lambda q: q["id"])
        for q in picked:
            gold = by_id[qrels[q["id"]]]
            if gold["lang"] != dlang:
                raise SystemExit(f"travel {q['id']}: gold doc is {gold['lang']}, expected {dlang}")
            sample.append(
                {
                    "id": q["id"],
                    "question": q["question"],
                    "lang": q["lang"],
                    "gold_doc_id": TRAVEL_ID_PREFIX + gold["id"],
                    "gold_doc_lang": q["gold_doc_lang"],
                    "answer": q["answer"],
                }
            )
    write_jsonl(out / "queries.jsonl", sample)
    # Every judgement of the sampled questions, ids prefixed like the corpus, in query order.
    order = {q["id"]: i for i, q in enumerate(sample)}
    judged = sorted((r for r in qrel_rows if r["query_id"] in order), key=lambda r: (order[r["query_id"]], r["doc_id"]))
    n_qrels = write_jsonl(
        out / "qrels.jsonl",
        ({"query_id": r["query_id"], "doc_id": TRAVEL_ID_PREFIX + r["doc_id"], "relevance": r["relevance"]}
         for r in judged),
    )
    for q in sample:
        if not any(r["query_id"] == q["id"] and TRAVEL_ID_PREFIX + r["doc_id"] == q["gold_doc_id"] for r in judged):
            raise SystemExit(f"travel {q['id']}: its gold document is not in qrels.jsonl")

    bibtex = extract_bibtex((src / "README.md").read_text(encoding="utf-8"))
    write_text(out / "LICENSE", TRAVEL_LICENSE)
    write_text(
        out / "README.md",
        TRAVEL_README.format(
            n_docs=len(vendored),
            n_en=sum(d["lang"] == "en" for d in docs),
            n_ar=sum(d["lang"] == "ar" for d in docs),
            n_q=len(sample),
            n_qrels=n_qrels,
            per_pair=TRAVEL_PER_PAIR,
            seed=SEED,
            min_words=TRAVEL_MIN_GOLD_WORDS,
            bibtex=bibtex,
        ),
    )
    return {"docs": len(vendored), "queries": len(sample)}


TRAVEL_LICENSE = """\
Travel corpus and questions (excerpt vendored in xlrag)

Original work: Chen Amiraz, Yaroslav Fyodorov, Elad
Haramaty, Zohar Karnin and Liane Lewin-Eytan, "The Cross-Lingual Cost:
Retrieval Biases in RAG over Arabic-English Corpora", arXiv:2507.07543
(ArabicNLP 2025), https://github.com/chenamiraz/cross-lingual-cost
The documents come from the UAE Ministry of Foreign Affairs travel pages.

Licensed under the Creative Commons Attribution 4.0 International License
(CC BY 4.0). To view a copy of this licence, visit
https://creativecommons.org/licenses/by/4.0/
Full legal code: https://creativecommons.org/licenses/by/4.0/legalcode

These files are ADAPTED material: converted to JSONL, duplicate questions
removed, query language re-detected, gold document labels derived, document
ids prefixed with "travel-", and the questions sub-sampled (details in
README.md beside this file). The original authors did not make or endorse
these changes.

The material is provided as-is, without warranties of any kind; see the
licence for the disclaimer of warranties and limitation of liability.
"""

TRAVEL_README = ("""\
# Travel (Arabic / English) — vendored excerpt

A bilingual Arabic/English travel-advice corpus with labelled questions, for
cross-lingual retrieval tests. Every country appears once, in one language, so
about half of the question–document pairs are cross-lingual.

## Files

| file | lines | content |
| --- | --- | --- |
"""
    '| `corpus.jsonl` | {n_docs} | all documents: `{{"id", "text", "lang", "title", "metadata": {{"country"}}}}`; '
    '`lang` is `en` ({n_en}) or `ar` ({n_ar}) |\n'
    '| `queries.jsonl` | {n_q} | `{{"id", "question", "lang", "gold_doc_id", "gold_doc_lang", "answer"}}`, {per_pair} '
    'per language pair en→en, en→ar, ar→en, ar→ar |\n'
    "| `qrels.jsonl` | {n_qrels} | `{{\"query_id\", \"doc_id\", \"relevance\"}}`: the judgements of the questions in "
    "`queries.jsonl` (the shared copy's `qrels.jsonl` rows for them, `doc_id` prefixed like the corpus), for `xlrag "
    "eval retrieval --qrels` |\n"
    """\
| `LICENSE` | – | CC BY 4.0 notice |

`lang` of a question is its actual language (detected from its script);
`gold_doc_id` is the id of the single gold document in `corpus.jsonl` (the
one document `qrels.jsonl` judges relevant, with relevance 1); the answer is
in the question's language.

## Provenance and attribution

* Source: the *Travel* benchmark of **Amiraz, Fyodorov, Haramaty, Karnin &
  Lewin-Eytan (2025), "The Cross-Lingual Cost: Retrieval Biases in RAG over
  Arabic-English Corpora"**, arXiv:2507.07543 (ArabicNLP 2025), repository
  <https://github.com/chenamiraz/cross-lingual-cost> (commit
  `7e548b57935dbac3b8fa2cb0536cf76f863337eb`, files
  `corpora/travel_corpus.parquet` and `benchmarks/travel_benchmark.parquet`).
  The documents come from the UAE Ministry of Foreign Affairs travel pages;
  the question–answer pairs were generated by the authors with DataMorgana.
* Licence: **CC BY 4.0**, <https://creativecommons.org/licenses/by/4.0/>
  (see `LICENSE`). This is adapted material; the original authors did not
  make or endorse the changes listed below.
* Please cite:

```bibtex
{bibtex}
```

## Changes from the original

Made before this excerpt (in the project's shared, adapted copy of the data):

1. Converted from parquet to JSONL; the source `doc_id` became `id`.
2. Exact duplicate questions removed (the source's 2066 rows hold 1027
   distinct questions).
3. Question language re-detected from the script (96 questions labelled
   Arabic in the source are written in English).
4. Gold document labels added. The source gives only the gold document's
   *language*; the gold document (the page of the country the question is
   about) was found by country-name matching (English/Arabic name table,
   normalised text, longest match, origin-country exclusion), checked against
   multilingual-e5 embedding similarity, which decided only ambiguous cases.
   1023 of 1027 questions were labelled; about 100 labels were read by hand
   with no error found.

Made for this excerpt by `scripts/build_vendor.py`:

5. Document ids prefixed with `travel-` (`"0"` → `"travel-0"`, also in
   `gold_doc_id`) so they stay unique in an index combined with other
   corpora. Document text, language, title and metadata are unchanged; all
   {n_docs} documents are kept.
6. Questions sub-sampled: {per_pair} per language pair (query `lang` → gold
   document language), drawn with `random.Random({seed})` from the labelled
   questions sorted by id, excluding questions whose gold page has fewer than
   {min_words} words (the Niue and Micronesia pages only say "no data").
   Only the fields listed above are kept (`user_language_label` and
   `source_rows` dropped); question ids are the shared copy's `tq` ids.
7. `qrels.jsonl` keeps the shared copy's judgements of the sampled questions
   only, with document ids prefixed as in 5.
""")
