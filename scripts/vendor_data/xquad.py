"""XQuAD (Artetxe et al. 2020): parallel paragraphs, questions and same-article distractors, CC BY-SA 4.0."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from vendor_data.common import (
    XQUAD_DISTRACTOR_ARTICLES,
    XQUAD_LANGS,
    XQUAD_QUESTIONS_PER_PARAGRAPH,
    clean,
    write_jsonl,
    write_text,
)


def build_xquad(src: Path, out: Path) -> dict:
    data = {
        lang: json.loads((src / f"xquad.{lang}.json").read_text(encoding="utf-8"))["data"]
        for lang in XQUAD_LANGS
    }
    n_articles = len(data["en"])
    for lang in XQUAD_LANGS:
        if len(data[lang]) != n_articles:
            raise SystemExit(f"xquad.{lang}: {len(data[lang])} articles, en has {n_articles}")

    docs, queries = [], []
    for lang in XQUAD_LANGS:
        for i in range(n_articles):
            title_raw = data["en"][i]["title"]
            title = title_raw.replace("_", " ")
            para = data[lang][i]["paragraphs"][0]
            en_ids = [q["id"] for q in data["en"][i]["paragraphs"][0]["qas"]]
            if [q["id"] for q in para["qas"]] != en_ids:
                raise SystemExit(f"xquad.{lang} article {i}: question ids differ from en")
            pid = f"xquad-{i:02d}"
            doc_id = f"{pid}-{lang}"
            docs.append(
                {
                    "id": doc_id,
                    "text": clean(para["context"]),
                    "lang": lang,
                    "title": title,
                    "metadata": {"parallel_id": pid, "article": title, "source": "xquad"},
                }
            )
            for qa in para["qas"][:XQUAD_QUESTIONS_PER_PARAGRAPH]:
                queries.append(
                    {
                        "id": f"{qa['id']}-{lang}",
                        "question": clean(qa["question"]),
                        "lang": lang,
                        "parallel_id": pid,
                        "gold_doc_id": doc_id,
                        "answers": [clean(a["text"]) for a in qa["answers"]],
                    }
                )
    # order: by parallel paragraph, then language
    order = {lang: k for k, lang in enumerate(XQUAD_LANGS)}
    docs.sort(key=lambda d: (d["metadata"]["parallel_id"], order[d["lang"]]))
    queries.sort(key=lambda q: (q["parallel_id"], order[q["lang"]]))
    write_jsonl(out / "corpus.jsonl", docs)
    write_jsonl(out / "queries.jsonl", queries)
    shutil.copyfile(src / "LICENSE-CC-BY-SA-4.0.txt", out / "LICENSE")

    distractors = []
    for i in range(XQUAD_DISTRACTOR_ARTICLES):
        title = data["en"][i]["title"].replace("_", " ")
        for j in range(1, len(data["en"][i]["paragraphs"])):
            for lang in XQUAD_LANGS:
                pid = f"xquad-{i:02d}-p{j}"
                distractors.append({
                    "id": f"{pid}-{lang}", "text": clean(data[lang][i]["paragraphs"][j]["context"]), "lang": lang,
                    "title": title,
                    "metadata": {"parallel_id": pid, "article": title, "gold_parallel_id": f"xquad-{i:02d}",
                                 "source": "xquad"}})
    write_jsonl(out / "distractors.jsonl", distractors)

    short = [
        f"`xquad-{i:02d}` ({data['en'][i]['title'].replace('_', ' ')})"
        for i in range(n_articles)
        if len(data["en"][i]["paragraphs"][0]["qas"]) < XQUAD_QUESTIONS_PER_PARAGRAPH
    ]
    q_per_lang = len(queries) // len(XQUAD_LANGS)
    write_text(
        out / "README.md",
        XQUAD_README.format(
            n_articles=n_articles,
            last=n_articles - 1,
            n_langs=len(XQUAD_LANGS),
            langs=", ".join(XQUAD_LANGS),
            n_docs=len(docs),
            n_q=len(queries),
            q_per_lang=q_per_lang,
            k=XQUAD_QUESTIONS_PER_PARAGRAPH,
            short=", ".join(short) if short else "none",
            n_dis=len(distractors),
            n_dis_articles=XQUAD_DISTRACTOR_ARTICLES,
        ),
    )
    return {"docs": len(docs), "queries": len(queries), "distractors": len(distractors)}


XQUAD_README = ("""\
# XQuAD — vendored excerpt ({n_langs} languages)

A small parallel multilingual corpus and question set: the same
{n_articles} paragraphs in {n_langs} languages ({langs}), with questions in
every language whose gold paragraph and gold answers are known.

## Files

| file | lines | content |
| --- | --- | --- |
"""
    '| `corpus.jsonl` | {n_docs} | `{{"id": "xquad-<i>-<lang>", "text", "lang", "title", "metadata": {{"parallel_id": '
    '"xquad-<i>", "article", "source": "xquad"}}}}` |\n'
    '| `queries.jsonl` | {n_q} | `{{"id": "<xquad question id>-<lang>", "question", "lang", "parallel_id", '
    '"gold_doc_id", "answers": [...]}}` ({q_per_lang} per language) |\n'
    '| `distractors.jsonl` | {n_dis} | the other paragraphs of articles `xquad-00`…: `{{"id": "xquad-<i>-p<j>-<lang>", '
    '"text", "lang", "title", "metadata": {{"parallel_id": "xquad-<i>-p<j>", "article", "gold_parallel_id": '
    '"xquad-<i>", "source"}}}}`; not in the corpus |\n'
    """\
| `LICENSE` | – | CC BY-SA 4.0 legal code (copied unchanged) |

Documents with the same `parallel_id` are translations of each other. The
gold document of a question is the paragraph in the question's own language
(`gold_doc_id`); its translations (same `parallel_id`) hold the same fact.

## Provenance and attribution

* Source: **XQuAD**, Mikel Artetxe, Sebastian Ruder and Dani Yogatama, "On the
  Cross-lingual Transferability of Monolingual Representations", ACL 2020,
  <https://github.com/google-deepmind/xquad> (files `xquad.<lang>.json`).
  XQuAD is a professional translation of 240 paragraphs and 1190 questions
  of the SQuAD v1.1 development set (Rajpurkar et al., 2016).
* Licence: **CC BY-SA 4.0**,
  <https://creativecommons.org/licenses/by-sa/4.0/> (full text in `LICENSE`).
* **ShareAlike:** this excerpt is adapted material under CC BY-SA 4.0. Anything
  derived from these files and redistributed must carry the same licence and
  this attribution. The licence applies to these data files only, not to the
  rest of xlrag.

```bibtex
@inproceedings{{artetxe2020cross,
  title     = {{On the Cross-lingual Transferability of Monolingual Representations}},
  author    = {{Artetxe, Mikel and Ruder, Sebastian and Yogatama, Dani}},
  booktitle = {{Proceedings of the 58th Annual Meeting of the Association for Computational Linguistics}},
  pages     = {{4623--4637}},
  year      = {{2020}}
}}
```

## Excerpt rules (changes from the original)

Made by `scripts/build_vendor.py`:

1. Languages: {langs} only (XQuAD has 12).
2. Paragraphs: the **first** paragraph of each of the {n_articles} articles
   (article index `i` = 0…{last}, in file order), in every language:
   {n_articles} × {n_langs} = {n_docs} documents. Text is the SQuAD `context`
   with leading/trailing whitespace, byte-order marks (U+FEFF) and
   zero-width/direction marks (U+200B, U+200E, U+200F) stripped (the same
   for questions and answers); otherwise unchanged.
3. `title`: the English SQuAD article title with `_` replaced by a space, used
   for every language (XQuAD does not translate titles).
4. Questions: the first {k} questions of each selected paragraph (fewer if the
   paragraph has fewer; the paragraph of {short} has only one), in every
   language. Question ids get a `-<lang>` suffix so they are unique across
   languages; `answers` keeps only the answer texts (the `answer_start`
   offsets are dropped).
5. Converted from SQuAD JSON to JSONL.
6. `distractors.jsonl`: paragraphs 2…5 of the first {n_dis_articles} articles, in every
   language, cleaned as in rule 2. They are the same-article distractors of XRAG-style
   controlled contexts (`experiments/xrag.yaml`) and are not part of the retrieval corpus.
""")
