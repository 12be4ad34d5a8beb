"""Retrieval metrics over ranked passage lists and qrels, broken down by language.

Definitions (all at cut-off ``k``; ranks count *returned passages*, best first):

* A query's *units* are documents (``level="document"``: a passage is relevant when its
  document is, with the document's qrels grade) or passages (``level="passage"``: the qrels
  ``doc_id`` is matched against passage ids). A unit is relevant when its grade is > 0.
* ``hit@k``: 1 if a relevant unit is among the top k passages, else 0.
* ``recall@k``: share of the query's relevant units found in the top k passages.
* ``mrr@k``: 1 / rank of the first relevant passage, 0 if none is in the top k.
* ``ndcg@k``: graded DCG (gain = qrels relevance, discount log2(rank + 1)) over the top k
  passages, each unit counted once at its first passage (further passages of a document
  already seen gain nothing, so nDCG stays <= 1), divided by the ideal DCG of the qrels'
  grades sorted best first.

Language cells: a query's *document language* is the set of languages of its relevant
units (from the index). One language gives the cell ``"<query lang>-><doc lang>"``; the
query is *same-language* when that is its own language, *cross-language* when its own
language is not in the set. A query whose relevant units span several languages gets the
cell ``"en->ar+en"`` and the group ``mixed_lang``: it is reported on its own and never
folded into the same- or cross-language means, since it is neither.

Micro means average over queries; macro means average the cell means with equal weight.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError, field_validator

from xlrag.errors import CorpusError, CorpusRowError, InvalidArgumentError
from xlrag.evals.stats import bootstrap_ci, bootstrap_macro_ci
from xlrag.jsonl import read_objects
from xlrag.outputs import check_output, lines_kind
from xlrag.validate import DEFAULT_RETRIEVE_K, check_k, did_you_mean

__all__ = [
    "LEVELS",
    "Level",
    "Qrel",
    "RankedPassage",
    "Ranking",
    "hit_at",
    "language_bias",
    "load_qrels",
    "metric_names",
    "mrr_at",
    "ndcg_at",
    "query_metrics",
    "recall_at",
    "relevant_langs",
    "retrieval_report",
    "trec_run",
    "write_trec_run",
]

Level = Literal["document", "passage"]
LEVELS: tuple[str, ...] = ("document", "passage")
GROUPS = ("same_lang", "cross_lang", "mixed_lang")
Qrels = dict[str, dict[str, int]]  # query id -> unit id -> relevance grade


# --------------------------------------------------------------------------- qrels


class Qrel(BaseModel):
    """One judgement: ``{"query_id", "doc_id", "relevance"}`` (0 = judged not relevant)."""

    model_config = ConfigDict(frozen=True)

    query_id: str
    doc_id: str
    relevance: StrictInt = Field(ge=0)  # strict: "1" or true is a malformed row, not a grade

    @field_validator("query_id", "doc_id", mode="before")
    @classmethod
    def _id(cls, v: Any) -> str:
        # Integer ids are common in qrels files; booleans and floats are typos.
        if isinstance(v, bool) or not isinstance(v, str | int):
            raise ValueError("must be a string or a whole number")
        s = str(v).strip()
        if not s:
            raise ValueError("must not be empty")
        return s


def _row_reason(e: ValidationError) -> str:
    first = e.errors()[0]
    field = ".".join(str(x) for x in first["loc"]) or "row"
    if first["type"] == "missing":
        return f"missing {field!r} (each line needs query_id, doc_id and relevance)"
    msg = first["msg"].removeprefix("Value error, ")
    return f"{field!r} {msg[0].lower()}{msg[1:]} (got {first.get('input')!r})"


def load_qrels(path: str | Path) -> Qrels:
    """``{query_id: {doc_id: relevance}}`` from a JSONL file of :class:`Qrel` rows.

    A malformed row, or a second judgement of the same (query, document) pair, is a
    :class:`~xlrag.errors.CorpusRowError` naming the file and line.
    """
    path = Path(path)
    if not path.is_file():
        why = "is a directory" if path.is_dir() else "does not exist"
        raise CorpusError(f"qrels file {path} {why}; give a JSONL file of {{query_id, doc_id, relevance}} rows")
    qrels: Qrels = {}
    seen: dict[tuple[str, str], int] = {}
    for n, data in read_objects(path, "qrels"):
        try:
            row = Qrel(**data)
        except ValidationError as e:
            raise CorpusRowError(path, n, _row_reason(e), skippable=False) from None
        pair = (row.query_id, row.doc_id)
        if pair in seen:
            raise CorpusRowError(path, n, f"({row.query_id!r}, {row.doc_id!r}) is judged twice "
                                 f"(first on line {seen[pair]}); keep one judgement", skippable=False)
        seen[pair] = n
        qrels.setdefault(row.query_id, {})[row.doc_id] = row.relevance
    if not qrels:
        raise CorpusError(f"qrels file {path} has no rows")
    return qrels


# --------------------------------------------------------------------------- per-query metrics


def _relevant(relevance: Mapping[str, int]) -> dict[str, int]:
    rel = {u: g for u, g in relevance.items() if g > 0}
    if not rel:
        raise InvalidArgumentError("relevance", "at least one unit with a grade > 0", dict(relevance))
    return rel


def _first_ranks(ranked: Sequence[str], k: int) -> dict[str, int]:
    """Each unit's first rank within the top ``k`` (a document recurs once per passage)."""
    first: dict[str, int] = {}
    for rank, unit in enumerate(ranked[: check_k(k)], 1):
        first.setdefault(unit, rank)
    return first


def hit_at(ranked: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """1.0 when a relevant unit is among the first ``k`` entries of ``ranked``, else 0.0."""
    rel = _relevant(relevance)
    return float(any(u in rel for u in _first_ranks(ranked, k)))


def recall_at(ranked: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """Share of the relevant units found in the first ``k`` entries."""
    rel = _relevant(relevance)
    return sum(u in rel for u in _first_ranks(ranked, k)) / len(rel)


def mrr_at(ranked: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """Reciprocal rank of the first relevant entry within ``k``; 0.0 when there is none."""
    rel = _relevant(relevance)
    return next((1.0 / r for u, r in _first_ranks(ranked, k).items() if u in rel), 0.0)


def ndcg_at(ranked: Sequence[str], relevance: Mapping[str, int], k: int) -> float:
    """Graded nDCG: gain = relevance, discount log2(rank + 1), each unit once at its first
    rank; the ideal ranking is the qrels' grades sorted best first."""
    rel = _relevant(relevance)
    dcg = sum(rel[u] / math.log2(r + 1) for u, r in _first_ranks(ranked, k).items() if u in rel)
    ideal = sorted(rel.values(), reverse=True)[:k]
    return dcg / sum(g / math.log2(i + 1) for i, g in enumerate(ideal, 1))


def metric_names(k: int) -> list[str]:
    """The reported metrics for lists of ``k`` passages; with k=20: hit@1, hit@5, hit@20,
    mrr@20, ndcg@10, recall@20 (cut-offs above ``k`` are dropped)."""
    k = check_k(k) or DEFAULT_RETRIEVE_K
    hits = sorted({c for c in (1, 5, 20, k) if c <= k})
    return [*(f"hit@{c}" for c in hits), f"mrr@{k}", f"ndcg@{min(10, k)}", f"recall@{k}"]


_METRICS = {"hit": hit_at, "recall": recall_at, "mrr": mrr_at, "ndcg": ndcg_at}


def query_metrics(ranked: Sequence[str], relevance: Mapping[str, int], k: int) -> dict[str, float]:
    """Every metric of :func:`metric_names` for one query."""
    out = {}
    for name in metric_names(k):
        fn, cut = name.split("@")
        out[name] = _METRICS[fn](ranked, relevance, int(cut))
    return out


# --------------------------------------------------------------------------- rankings


class RankedPassage(BaseModel):
    """One returned passage: its id, its document, its language (the index's), its score."""

    model_config = ConfigDict(frozen=True)

    id: str
    doc_id: str
    lang: str
    score: float = 0.0


class Ranking(BaseModel):
    """What a retriever returned for one query, best first."""

    query_id: str
    lang: str = Field(description="the query's language (as given, or as detected)")
    passages: list[RankedPassage]

    def units(self, level: Level) -> list[str]:
        return [p.doc_id if level == "document" else p.id for p in self.passages]


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise InvalidArgumentError("level", f"one of {', '.join(LEVELS)}{did_you_mean(str(level), LEVELS)}", level)


# --------------------------------------------------------------------------- aggregation


def _mean_ci(values: Sequence[float], n_boot: int, seed: int) -> tuple[float | None, list[float] | None]:
    if not values:
        return None, None
    mean, lo, hi = bootstrap_ci(values, n_boot, seed)
    return mean, [lo, hi]


def _cell_of(qlang: str, langs: set[str]) -> tuple[str, str]:
    cell = f"{qlang}->{'+'.join(sorted(langs))}"
    if langs == {qlang}:
        return cell, "same_lang"
    return cell, "cross_lang" if qlang not in langs else "mixed_lang"


def relevant_langs(query_ids: Sequence[str], qrels: Mapping[str, Mapping[str, int]],
                   unit_langs: Mapping[str, str], level: Level = "document") -> dict[str, set[str]]:
    """The languages of each query's relevant units (queries with none are left out).

    A relevant unit missing from ``unit_langs`` (the index) is a :class:`CorpusError`:
    its language and rank are unknown, and scoring it as never retrieved would be a
    silently wrong number (typically qrels ids that lack the index's id prefix).
    """
    out: dict[str, set[str]] = {}
    missing: list[tuple[str, str]] = []
    for qid in query_ids:
        rel = [u for u, g in qrels.get(qid, {}).items() if g > 0]
        missing += [(qid, u) for u in rel if u not in unit_langs]
        if rel:
            out[qid] = {unit_langs[u] for u in rel if u in unit_langs}
    if missing:
        qid, unit = missing[0]
        sample = next(iter(sorted(unit_langs)), None)
        raise CorpusError(
            f"{len(missing)} relevant {level} id(s) in the qrels are not in the index, e.g. {unit!r} "
            f"(query {qid!r}), so their language and rank are unknown; the qrels doc_id must be the "
            f"index's {level} ids (the index has ids like {sample!r})"
            + ("; for document ids use level='document'" if level == "passage" else ""))
    return out


def language_bias(rankings: Sequence[Ranking], index_counts: Mapping[str, int], k: int) -> dict[str, dict[str, Any]]:
    """Per query language, over the top ``k`` passages of its queries (pooled):

    ``retrieved`` the share of each language; ``in_language_share`` P(passage in the query's
    language); ``index_share`` that language's share of the index's passages;
    ``in_language_ratio`` their quotient (1 = no preference; None when the index has no
    passage in the query's language); ``english_share`` P(passage in English).
    """
    k = check_k(k) or DEFAULT_RETRIEVE_K
    total = sum(index_counts.values())
    by_lang: dict[str, Counter[str]] = defaultdict(Counter)
    n_queries: Counter[str] = Counter()
    for r in rankings:
        n_queries[r.lang] += 1
        by_lang[r.lang].update(p.lang for p in r.passages[:k])
    out = {}
    for qlang in sorted(n_queries):
        counts = by_lang[qlang]
        n = sum(counts.values())
        share = {lang: c / n for lang, c in sorted(counts.items())} if n else {}
        in_lang = share.get(qlang, 0.0) if n else None
        index_share = index_counts.get(qlang, 0) / total if total else 0.0
        out[qlang] = {
            "n_queries": n_queries[qlang],
            "n_passages": n,
            "retrieved": share,
            "in_language_share": in_lang,
            "index_share": index_share,
            "in_language_ratio": in_lang / index_share if in_lang is not None and index_share else None,
            "english_share": share.get("en", 0.0) if n else None,
        }
    return out


def retrieval_report(
    rankings: Sequence[Ranking],
    qrels: Mapping[str, Mapping[str, int]],
    unit_langs: Mapping[str, str],
    index_counts: Mapping[str, int],
    *,
    k: int = DEFAULT_RETRIEVE_K,
    level: Level = "document",
    n_boot: int = 1000,
    seed: int = 13,
) -> dict[str, Any]:
    """The report of ``xlrag eval retrieval --json`` from rankings already made.

    ``unit_langs`` maps every document id (``level="document"``) or passage id
    (``"passage"``) of the index to its language; ``index_counts`` is passages per language.
    Queries without qrels, or with no grade > 0, are listed under ``queries`` and left out
    of the metrics (they are not counted as misses); bias covers every ranked query.
    """
    k = check_k(k) or DEFAULT_RETRIEVE_K
    _check_level(level)
    ids = Counter(r.query_id for r in rankings)
    if dup := [q for q, c in ids.items() if c > 1]:
        raise CorpusError(f"query id {dup[0]!r} occurs {ids[dup[0]]} times in the queries; give each query a unique id")
    langs_of = relevant_langs([r.query_id for r in rankings], qrels, unit_langs, level)
    names = metric_names(k)
    rows: list[tuple[str, str, dict[str, float]]] = []  # (cell, group, metrics), in query order
    for r in rankings:
        if r.query_id in langs_of:
            cell, group = _cell_of(r.lang, langs_of[r.query_id])
            rows.append((cell, group, query_metrics(r.units(level), qrels[r.query_id], k)))
    if not rows:
        sample = next(iter(qrels), None)
        raise CorpusError(f"none of the {len(rankings)} queries has a relevant document in the qrels; "
                          f"the query ids must match the qrels query_id (queries have e.g. "
                          f"{rankings[0].query_id if rankings else None!r}, qrels have e.g. {sample!r})")

    cells: dict[str, list[dict[str, float]]] = defaultdict(list)
    group_of: dict[str, str] = {}
    for cell, group, m in rows:
        cells[cell].append(m)
        group_of[cell] = group
    by_cell = {}
    for cell in sorted(cells):
        ms = cells[cell]
        entry: dict[str, Any] = {"group": group_of[cell], "n": len(ms)}
        ci = {}
        for name in names:
            entry[name], ci[name] = _mean_ci([m[name] for m in ms], n_boot, seed)
        by_cell[cell] = entry | {"ci95": ci}

    summary: dict[str, Any] = {}
    ci95: dict[str, Any] = {}
    for group in GROUPS:
        ms = [m for _, g, m in rows if g == group]
        if group == "mixed_lang" and not ms:
            continue  # present only when some query's relevant documents span languages
        summary[group], ci95[group] = {}, {}
        for name in names:
            summary[group][name], ci95[group][name] = _mean_ci([m[name] for m in ms], n_boot, seed)
    summary["n"] = {g: sum(1 for _, gr, _ in rows if gr == g) for g in GROUPS}
    summary["ci95"] = ci95
    summary["macro"], summary["macro_ci95"], summary["cells"] = {}, {}, {}
    for group in ("same_lang", "cross_lang"):
        members = [c for c in sorted(cells) if group_of[c] == group]
        summary["cells"][group] = members
        summary["macro"][group], summary["macro_ci95"][group] = {}, {}
        for name in names:
            mean, lo, hi = bootstrap_macro_ci([[m[name] for m in cells[c]] for c in members], n_boot, seed)
            ok = not math.isnan(mean)
            summary["macro"][group][name] = mean if ok else None
            summary["macro_ci95"][group][name] = [lo, hi] if ok else None

    judged = {r.query_id for r in rankings if r.query_id in qrels}
    return {
        "k": k,
        "level": level,
        "metrics": names,
        "queries": {
            "ranked": len(rankings),
            "evaluated": len(rows),
            "no_qrels": [r.query_id for r in rankings if r.query_id not in judged],
            "no_relevant": [r.query_id for r in rankings if r.query_id in judged and r.query_id not in langs_of],
        },
        "summary": summary,
        "by_cell": by_cell,
        "bias": language_bias(rankings, index_counts, k),
    }


# --------------------------------------------------------------------------- TREC run files


def trec_run(rankings: Sequence[Ranking], level: Level = "document") -> dict[str, list[tuple[str, float]]]:
    """``{query_id: [(unit id, score), ...]}`` ready for :func:`write_trec_run`.

    Document level lists each document once, at its first passage (trec_eval rejects a
    document twice), so document ranks there are 1, 2, 3... and can be smaller than the
    passage ranks the metrics above count. The score column is ``n + 1 - rank``: trec_eval
    orders by score, not by the rank column, and fused scores tie (``interleave``, ``rrf``)
    or need not decrease (``balanced`` quotas), so raw scores would let it reorder the list.
    """
    _check_level(level)
    run = {}
    for r in rankings:
        units = list(dict.fromkeys(r.units(level)))
        run[r.query_id] = [(u, float(len(units) + 1 - rank)) for rank, u in enumerate(units, 1)]
    return run


def _trec_field(name: str, value: str) -> str:
    if not value or any(ch.isspace() for ch in value):
        raise InvalidArgumentError(name, "a non-empty id without white space (TREC files are space-separated)", value)
    return value


def _trec_line(line: str) -> str | None:
    fields = line.split()
    if len(fields) != 6 or fields[1] != "Q0":
        return "not a 'qid Q0 docid rank score tag' line"
    try:
        int(fields[3]), float(fields[4])
    except ValueError:
        return "its rank or score is not a number"
    return None


# what --trec writes: a file holding anything else is refused, not replaced
TREC_RUN = lines_kind("a TREC run", "run.trec", _trec_line)


def write_trec_run(path: str | Path, run: Mapping[str, Sequence[tuple[str, float]]], tag: str = "xlrag") -> int:
    """Write ``run`` as a TREC run file, one ``qid Q0 docid rank score tag`` line per entry,
    ranks from 1 in list order; returns the number of lines. Scores must strictly decrease
    down each list (what trec_eval sorts by). Written to a temporary file and renamed, so a
    failure never leaves a partial run file."""
    path = Path(path)
    if path.is_dir() or not path.parent.is_dir():
        raise InvalidArgumentError("path", "a file in an existing directory", str(path))
    check_output(path, "path", TREC_RUN)
    tag = _trec_field("tag", tag)
    lines = []
    for qid, entries in run.items():
        qid = _trec_field("query id", str(qid))
        seen: set[str] = set()
        prev = math.inf
        for rank, (unit, score) in enumerate(entries, 1):
            unit = _trec_field("doc id", str(unit))
            if unit in seen:
                raise InvalidArgumentError("run", f"each doc id once per query ({unit!r} twice for {qid!r})", unit)
            if not score < prev:
                raise InvalidArgumentError(
                    "run", f"scores that strictly decrease down each list (trec_eval sorts by score; "
                    f"query {qid!r} rank {rank})", score)
            seen.add(unit)
            prev = score
            lines.append(f"{qid} Q0 {unit} {rank} {float(score)!r} {tag}\n")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.writelines(lines)
        Path(tmp).replace(path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return len(lines)
