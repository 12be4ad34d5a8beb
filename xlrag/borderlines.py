"""BorderLines territories and their multilingual multiple-choice query sets (Li et al. 2024).

A territory's multilingual query set (MQS) is the English question plus the same question in
each claimant's language. Its options are in the query's language, in the order of the
territory's ``claimants``, so an answer maps back to the claimant's English name by position.

:func:`load_territories` reads the excerpt shipped in ``xlrag/data/borderlines`` (13
territories), a JSONL file of the same rows, or an upstream BorderLines folder
(``manestay/borderlines``: ``disputed_territories.csv``, ``countries_info.json``,
``prompts/`` and ``translate/``), which it converts with :func:`read_upstream`. Upstream
writes Chinese as ``zhs``/``zht`` and Hebrew as ``iw``; here they are ``zh-Hans``, ``zh-Hant``
and ``he``, and ``upstream_code`` keeps the original.

Data, not evaluation: it stands low so that the perspectives view (which names a disputed
territory's claimants) does not stand on the evaluation package.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from xlrag.errors import CorpusError, CorpusRowError, InvalidArgumentError
from xlrag.jsonl import read_objects
from xlrag.languages import normalize
from xlrag.validate import did_you_mean

__all__ = ["PASSAGES", "UNKNOWN", "MCQuery", "Territory", "load_territories", "read_upstream"]

UNKNOWN = "Unknown"  # upstream's controller when the dispute has no clear one
EXCERPT = Path(__file__).resolve().parent / "data" / "borderlines" / "territories.jsonl"
# a small partisan passage corpus written for xlrag over six of the excerpt's territories (see its README)
PASSAGES = EXCERPT.with_name("passages.jsonl")


class MCQuery(BaseModel):
    """One question of a territory's MQS, in one language."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    question: str
    choices: list[str] = Field(min_length=2)
    lang: str = Field(description="ISO 639-1 code (zh for both Chinese scripts)")
    script: str | None = None
    upstream_code: str
    query_id: str
    claimants: list[str] = Field(default_factory=list, description="the claimants whose language this is")


class Territory(BaseModel):
    """A disputed territory. Only ``territory``, ``claimants``, ``controller`` and
    ``claimant_langs`` are needed to score CS metrics; the rest comes with the loader's rows."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # in the order of the shipped excerpt's JSON, which scripts/build_vendor.py writes from these
    territory: str
    index: int | None = Field(None, description="row in upstream disputed_territories.csv")
    claimants: list[str] = Field(min_length=2)
    controller: str = UNKNOWN
    region: str | None = None
    query_en: str | None = None
    claimant_langs: dict[str, str | None] = Field(
        description="claimant -> the key of its language's query (null: no query in that language)")
    queries: dict[str, MCQuery] = Field(default_factory=dict, description="language key -> query; en always")

    @model_validator(mode="after")
    def _consistent(self) -> Territory:
        stray = [c for c in self.claimant_langs if c not in self.claimants]
        if stray:
            raise ValueError(f"claimant_langs names {stray[0]!r}, which is not one of the claimants "
                             f"{self.claimants}{did_you_mean(stray[0], self.claimants)}")
        for key, q in self.queries.items():
            if len(q.choices) != len(self.claimants):
                raise ValueError(f"the {key} query has {len(q.choices)} choices for {len(self.claimants)} claimants")
        return self

    @property
    def controller_lang(self) -> str | None:
        """The key of the controller's language (None when unknown or it has no query)."""
        return self.claimant_langs.get(self.controller)

    @property
    def langs(self) -> list[str]:
        """The claimant languages, each once, in claimant order."""
        return list(dict.fromkeys(v for v in self.claimant_langs.values() if v))

    def claimant(self, option_index: int) -> str:
        """The English name of the claimant behind option ``option_index`` of any query."""
        if not 0 <= option_index < len(self.claimants):
            raise InvalidArgumentError("option_index", f"0..{len(self.claimants) - 1} for {self.territory}",
                                       option_index)
        return self.claimants[option_index]


def load_territories(path: str | Path | None = None, *, names: Iterable[str] | None = None) -> list[Territory]:
    """Territories from the shipped excerpt (``path`` None), a JSONL file of :class:`Territory`
    rows, or an upstream BorderLines folder. ``names`` keeps those territories, in that order."""
    path = EXCERPT if path is None else Path(path)
    if path.is_dir():
        rows, _ = read_upstream(path)
    else:
        rows = []
        for n, obj in read_objects(path, "territories"):
            try:
                rows.append(Territory.model_validate(obj))
            except ValueError as e:
                first = e.errors()[0] if hasattr(e, "errors") else None
                why = f"{'.'.join(map(str, first['loc']))}: {first['msg']}" if first and first["loc"] else (
                    first["msg"] if first else str(e))
                raise CorpusRowError(path, n, why, skippable=False) from None
    if names is None:
        return rows
    by_name = {t.territory: t for t in rows}
    out = []
    for name in names:
        if name not in by_name:
            raise InvalidArgumentError("territory", f"one of the {len(by_name)} in {path}{did_you_mean(name, by_name)}",
                                       name)
        out.append(by_name[name])
    return out


def _lines(path: Path) -> list[str]:
    with path.open(encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def read_upstream(src: str | Path, names: Iterable[str] | None = None) -> tuple[list[Territory], list[str]]:
    """Convert an upstream BorderLines folder: ``(territories, skipped)``, where ``skipped``
    names each claimant language with no query (it is left out of that MQS, and said so)."""
    src = Path(src)
    need = [src / "disputed_territories.csv", src / "countries_info.json", src / "prompts" / "prompts_q_mc.txt"]
    missing = [p for p in need if not p.is_file()]
    if missing:
        raise CorpusError(f"{src} is not a BorderLines folder: {missing[0].relative_to(src)} is missing "
                          f"(expected the layout of github.com/manestay/borderlines)")
    with need[0].open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    info = json.loads(need[1].read_text(encoding="utf-8"))
    en_prompts = _lines(need[2])
    en_choices = [json.loads(x) for x in _lines(src / "prompts" / "choices.txt")]
    if not len(rows) == len(en_prompts) == len(en_choices):
        raise CorpusError(f"{src}: disputed_territories.csv has {len(rows)} rows but prompts/ has "
                          f"{len(en_prompts)} questions and {len(en_choices)} option lists")
    tdir = src / "translate"
    per_code: dict[str, dict[int, tuple[str, list[str]]]] = {}

    def translated(code: str) -> dict[int, tuple[str, list[str]]]:
        if code not in per_code:
            p = tdir / "prompts_mc_q" / f"prompts.{code}"
            per_code[code] = {}
            if p.is_file():
                prompts = _lines(p)
                choices = [json.loads(x) for x in _lines(tdir / "prompts_mc_q" / f"choices.{code}")]
                inds = json.loads((tdir / "terms" / f"line_inds.{code}.txt").read_text(encoding="utf-8"))
                if not len(prompts) == len(choices) == len(inds):
                    raise CorpusError(f"{src}: prompts.{code}, choices.{code} and line_inds.{code}.txt "
                                      f"have different lengths")
                per_code[code] = {idx: (prompts[i], choices[i]) for i, idx in enumerate(inds)}
        return per_code[code]

    index = {r["Territory"]: i for i, r in enumerate(rows)}
    wanted = list(names) if names is not None else [r["Territory"] for r in rows]
    out, skipped = [], []
    for name in wanted:
        if name not in index:
            raise InvalidArgumentError("territory", f"a territory of {src}{did_you_mean(name, index)}", name)
        idx = index[name]
        r = rows[idx]
        claimants = r["Claimants"].split(";")
        en_lang = [c for c in claimants if info.get(c, {}).get("Lang_Code") == "en"]
        queries = {"en": MCQuery(question=en_prompts[idx], choices=en_choices[idx], lang="en",
                                 upstream_code="en", query_id=r["QueryID"], claimants=en_lang)}
        base_id = r["QueryID"].rsplit("_", 1)[0]
        langs: dict[str, str | None] = {}
        for c in claimants:
            code = info.get(c, {}).get("Lang_Code")
            found = translated(code).get(idx) if code and code != "en" else None
            if code is None or (code != "en" and found is None):
                langs[c] = None
                skipped.append(f"{name}: {c} ({'not in countries_info.json' if code is None else code + ': no query'})")
                continue
            lang, script = normalize(code)
            key = f"{lang}-{script}" if script else lang
            langs[c] = key
            if key in queries:
                if c not in queries[key].claimants:
                    queries[key] = queries[key].model_copy(update={"claimants": [*queries[key].claimants, c]})
                continue
            if found is None:  # English, whose query was made above
                continue
            question, choices = found
            queries[key] = MCQuery(question=question, choices=choices, lang=lang, script=script,
                                   upstream_code=code, query_id=f"{base_id}_{code}", claimants=[c])
        out.append(Territory(territory=name, index=idx, claimants=claimants, controller=r["Controller"] or UNKNOWN,
                             region=r["Region"], query_en=r["Query"], claimant_langs=langs, queries=queries))
    return out, skipped
