"""Citation metrics over answer records (MIRAGE-Bench, BordIRlines §4.1).

A record is what the experiment runner writes for one answer: ``shown`` (the passages in
the prompt, ``<doc0>`` first, each with ``passage_id``, ``doc_id``, ``lang``) and
``citations`` (each with ``valid``, ``source`` = model | post_hoc | vendor, and the cited
passage's ``doc_id`` and ``lang``).

- *valid model-made citation rate*: answers whose model wrote at least one citation that
  points at a shown passage and none that points nowhere;
- *post-hoc share*: answers whose citations all had to be attributed afterwards;
- *citation precision*: cited passages whose document is relevant per the qrels;
- *top-citation precision*: answers whose first valid citation (any source: what a reader
  sees first, and what attribution reranking changes) is a relevant document;
- *citation rate vs inclusion rate* per passage language: a language's share of the cited
  passages against its share of the shown passages. A model that cites English passages
  more often than it is shown them prefers English (BordIRlines §4.1).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

__all__ = ["citation_summary", "citation_vs_inclusion"]


def _cited(rec: Mapping) -> list[Mapping]:
    return [c for c in rec.get("citations") or [] if c.get("valid") and c.get("passage_id")]


def citation_summary(records: Iterable[Mapping], relevant: Mapping[str, set[str]] | None = None) -> dict:
    """Rates over answer records; ``relevant`` maps a query id to its relevant doc ids."""
    recs = [r for r in records if "citations" in r]
    n = len(recs)
    if not n:
        return {"n": 0}
    model_ok = post_hoc_only = invalid_any = 0
    precise = judged = top_relevant = top_judged = shown_relevant = shown_judged = 0
    for r in recs:
        cites = r["citations"]
        model = [c for c in cites if c.get("source") in ("model", "vendor")]
        if any(c.get("valid") for c in model) and not any(not c.get("valid") for c in model):
            model_ok += 1
        if cites and all(c.get("source") == "post_hoc" for c in cites):
            post_hoc_only += 1
        if any(not c.get("valid") for c in cites):
            invalid_any += 1
        if relevant is not None and r.get("query_id") in relevant:
            cited, rel = _cited(r), relevant[r["query_id"]]
            # a document cited twice counts once: precision is over distinct cited passages
            docs = {c["passage_id"]: c["doc_id"] for c in reversed(cited)}  # first citation's doc wins
            judged += len(docs)
            precise += sum(doc in rel for doc in docs.values())
            if cited:
                top_judged += 1
                top_relevant += cited[0]["doc_id"] in rel
            if "shown" in r:
                # what the model could cite: with no relevant passage shown, no citation is precise
                shown_judged += 1
                shown_relevant += any(p["doc_id"] in rel for p in r["shown"])
    return {
        "n": n,
        "valid_model_citation_rate": model_ok / n,
        "post_hoc_share": post_hoc_only / n,
        "invalid_citation_share": invalid_any / n,
        "citation_precision": precise / judged if judged else None,
        "cited_passages_judged": judged,
        "top_citation_precision": top_relevant / top_judged if top_judged else None,
        "relevant_shown_rate": shown_relevant / shown_judged if shown_judged else None,
    }


def citation_vs_inclusion(records: Iterable[Mapping], model_only: bool = True) -> dict[str, dict]:
    """Per passage language: share of shown passages (inclusion) and of cited ones (citation).

    ``model_only``: count the model's own citations, not post-hoc or attribution-reranker ones
    (those measure the attributor, not the model's preference).
    """
    shown: Counter[str] = Counter()
    cited: Counter[str] = Counter()
    for r in records:
        if "shown" not in r:
            continue
        for p in r["shown"]:
            shown[p["lang"]] += 1
        seen = set()
        for c in _cited(r):
            if model_only and c.get("source") in ("post_hoc", "attribution"):
                continue
            if c["passage_id"] in seen:
                continue
            seen.add(c["passage_id"])
            cited[c.get("lang") or "?"] += 1
    n_shown, n_cited = sum(shown.values()), sum(cited.values())
    out = {}
    for lang in sorted(set(shown) | set(cited)):
        out[lang] = {
            "shown": shown[lang], "cited": cited[lang],
            "inclusion_rate": shown[lang] / n_shown if n_shown else None,
            "citation_rate": cited[lang] / n_cited if n_cited else None,
            "cited_when_shown": cited[lang] / shown[lang] if shown[lang] else None,
        }
    return out
