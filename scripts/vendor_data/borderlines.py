"""BorderLines (Li et al. 2024): the disputed-territory excerpt."""

from __future__ import annotations

from pathlib import Path

from vendor_data.common import (
    BORDERLINES_TERRITORIES,
    write_jsonl,
    write_text,
)


def read_lines(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def build_borderlines(src: Path, out: Path) -> dict:
    # the conversion is the package's own loader: the excerpt is exactly what it reads upstream
    from xlrag.borderlines import read_upstream

    territories, skipped = read_upstream(src, BORDERLINES_TERRITORIES)
    out_rows = [t.model_dump() for t in territories]
    missing = skipped
    write_jsonl(out / "territories.jsonl", out_rows)
    langs = sorted({k for t in out_rows for k in t["queries"]})
    write_text(
        out / "README.md",
        BORDERLINES_README.format(
            n=len(out_rows),
            n_q=sum(len(t["queries"]) for t in out_rows),
            territories=", ".join(BORDERLINES_TERRITORIES),
            langs=", ".join(f"`{k}`" for k in langs),
            missing="\n".join(f"  * {m}" for m in missing) if missing else "  * none",
        ),
    )
    return {"territories": len(out_rows), "queries": sum(len(t["queries"]) for t in out_rows)}


BORDERLINES_README = ("""\
# BorderLines — vendored excerpt

{n} well-known disputed territories, each with its multilingual query set
(MQS): the English multiple-choice question plus the same question in each
claimant's language ({n_q} questions in all). Use as an evaluation reference
for geopolitical consistency across languages (e.g. does a RAG system name the
same claimant whatever the query language?).

## File

`territories.jsonl`, one territory per line:

```
{{"territory", "index", "claimants": [...], "controller", "region", "query_en",
 "claimant_langs": {{claimant: query key or null}},
 "queries": {{key: {{"question", "choices": [...], "lang", "script",
                    "upstream_code", "query_id", "claimants": [...]}}}}}}
```

* `index`: the territory's row index in upstream `disputed_territories.csv`.
* `controller`: the knowledge-base answer as given upstream (`"Unknown"` when
  the dispute has no clear controller).
* `queries` keys: `en` always, then each claimant's language. The key is the
  ISO 639-1 code, with a script subtag for Chinese: upstream `zhs` → key
  `zh-Hans` (`lang` `zh`, `script` `Hans`), `zht` → `zh-Hant` (`script`
  `Hant`), and `iw` → `he`. `upstream_code` keeps the BorderLines code;
  `script` is null for the other languages. `claimants` lists the claimants
  whose language that is (empty for `en` when no claimant is English-speaking).
* `choices` are in the query's language, in the same order as `claimants` at
  the top level (choice A = first claimant, ...).
* Keys present in this excerpt: {langs}.

Territories: {territories}.

Claimant languages without a query (skipped):
{missing}

## Provenance and attribution

* Source: **BorderLines**, Bryan Li, Samar Haider and Chris Callison-Burch,
  "This Land is {{Your, My}} Land: Evaluating Geopolitical Bias in Language
  Models through Territorial Disputes", NAACL 2024
  (<https://aclanthology.org/2024.naacl-long.213>), repository
  <https://github.com/manestay/borderlines> (data version 2023-05-15). The
  BordIRlines follow-up (Li et al.) pairs these queries with retrieved
  Wikipedia passages; those passages are not included.
* Built from upstream `disputed_territories.csv`, `countries_info.json`
  (`Lang_Code` of each claimant), `prompts/prompts_q_mc.txt` and
  `prompts/choices.txt` (English), and
  `translate/prompts_mc_q/prompts.<code>` + `choices.<code>` with
  `translate/terms/line_inds.<code>.txt` (line *i* of `prompts.<code>` is the
  query for territory row `line_inds[i]`). Texts are copied unchanged.

```bibtex
@inproceedings{{li-etal-2024-land,
"""
    "  title     = {{This Land is {{Your, My}} Land: Evaluating Geopolitical Bias in Language Models through "
    "Territorial Disputes}},\n"
    """\
  author    = {{Li, Bryan and Haider, Samar and Callison-Burch, Chris}},
"""
    "  booktitle = {{Proceedings of the 2024 Conference of the North American Chapter of the Association for "
    "Computational Linguistics: Human Language Technologies (Volume 1: Long Papers)}},\n"
    """\
  address   = {{Mexico City, Mexico}},
  publisher = {{Association for Computational Linguistics}},
  year      = {{2024}},
  url       = {{https://aclanthology.org/2024.naacl-long.213}}
}}
```

## Licence

**No explicit licence** accompanies the upstream data. This excerpt is kept
deliberately small ({n} of 251 territories), is used only as an evaluation
reference, and is attributed to its authors above. It is not covered by
xlrag's own licence; do not redistribute it beyond this project without
checking the upstream terms.

## `passages.jsonl`: a partisan passage corpus (written for xlrag)

BordIRlines pairs the queries with Wikipedia passages that are not available offline.
`passages.jsonl` (35 passages in 9 languages: ar, el, en, es, he, ja, ru, tr, uk) is a
small corpus written for xlrag, in the xlrag corpus format (`id`, `lang`, `title`,
`text`), over six of the territories above (Crimea, Ceuta, Gibraltar, the South Kuril
Islands, the Golan Heights, Imia/Kardak):

* in each claimant's language, two passages that state that claimant's position, as its
  national sources do (`crimea-ru-1`: Crimea is a subject of the Russian Federation;
  `crimea-uk-1`: Crimea is an integral part of Ukraine);
* one neutral English passage where English is no claimant's language;
* for Crimea, Ceuta and the Golan Heights, one passage per language on where the
  territory lies, stated alike in every language (the control questions of
  `benchmarks/perspectives.py`).

It is deliberately partisan and synthetic: it shows and measures whether a system reports
what each language's sources say, not what the world's sources say. Licence: as xlrag
(Apache-2.0).
""")
