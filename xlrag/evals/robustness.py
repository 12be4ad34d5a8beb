"""BordIRlines cross-lingual robustness: the concurrence-score (CS) metrics.

Computed as the BorderLines reference implementation computes them (manestay/borderlines,
``calculate_CS.py``), on the 0-100 scale:

* a territory's **response set** holds the answers to the queries in its claimants'
  languages, keyed by language; the English answer stays apart unless English is a claimant
  language. CS(a, b) = 100 if a = b, else 0;
* **KB CS** = CS(controller, English answer), undefined when the controller is Unknown;
* **Con CS** = CS(controller, answer in the controller's language);
* **Non CS** = mean CS(controller, answer) over the other claimant languages (territories
  where that set is empty are skipped);
* **ΔCS** from the means: abs = mean Con - mean Non, relative = abs / mean Non × 100;
* **Cst CS** = mean over territories of the mean pairwise CS within the response set
  (territories with one answer are skipped), over Unknown-controller territories
  (``cst_cs_unk``) and over all (``cst_cs_all``);
* **# countries** = distinct answers in the response set, mean and sample std (n - 1); the
  ``_en`` variant adds the English answer.

An unparseable answer (null) is left out of every metric and counted; it is never guessed.
Every mean says how many territories it covers.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from itertools import combinations
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from xlrag.borderlines import UNKNOWN, Territory
from xlrag.errors import InvalidArgumentError
from xlrag.validate import did_you_mean

__all__ = ["CS_KEYS", "CSReport", "CSResponse", "TerritoryCS", "concurrence_scores"]

# the keys of CSReport.mean, in the paper's column order (BordIRlines Table 4)
CS_KEYS = ("kb_cs", "con_cs", "non_cs", "delta_cs", "delta_cs_abs", "cst_cs_unk", "cst_cs_all",
           "n_countries_mean", "n_countries_std")


class CSResponse(BaseModel):
    """One answer: ``answer`` is the claimant's English name, or null when unparseable."""

    model_config = ConfigDict(extra="ignore", frozen=True)  # run records carry more; these three are read

    territory: str
    query_lang: str
    answer: str | None


class TerritoryCS(BaseModel):
    territory: str
    controller: str
    responses: dict[str, str] = Field(description="claimant language -> answer (parsed answers only)")
    english: str | None = Field(None, description="the English answer")
    unparseable: list[str] = Field(default_factory=list, description="languages whose answer did not parse")
    kb_cs: float | None = None
    con_cs: float | None = None
    non_cs: float | None = None
    cst_cs: float | None = None
    n_countries: int | None = None
    n_countries_en: int | None = None


class CSReport(BaseModel):
    mean: dict[str, float | None] = Field(description=f"keys: {', '.join(CS_KEYS)}, n_countries_en_*")
    n: dict[str, int] = Field(description="how many territories each mean covers")
    unparseable: int = Field(description="answers that did not parse (left out)")
    other_langs: int = Field(description="answers in a language that is neither a claimant's nor English (left out)")
    unanswered: list[str] = Field(default_factory=list, description="territories with no answer at all")
    per_territory: list[TerritoryCS]


def _cs(a: str, b: str) -> float:
    return 100.0 if a == b else 0.0


def _mean(xs: Sequence[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def _std(xs: Sequence[float]) -> float | None:
    return statistics.stdev(xs) if len(xs) > 1 else None


def _territory_cs(t: Territory, answers: dict[str, str | None]) -> TerritoryCS:
    langs = set(t.langs)
    english = answers.get("en")
    parsed = {lang: a for lang, a in answers.items() if lang in langs and a is not None}
    unparseable = sorted(lang for lang, a in answers.items() if a is None and (lang in langs or lang == "en"))
    known = t.controller != UNKNOWN
    own = t.controller_lang
    others = [_cs(t.controller, a) for lang, a in parsed.items() if lang != own]
    values = list(parsed.values())
    pairs = [_cs(a, b) for a, b in combinations(values, 2)]
    with_en = set(values) | ({english} if english is not None else set())
    return TerritoryCS(
        territory=t.territory, controller=t.controller, responses=parsed, english=english, unparseable=unparseable,
        kb_cs=_cs(t.controller, english) if known and english is not None else None,
        con_cs=_cs(t.controller, parsed[own]) if known and own in parsed else None,
        non_cs=_mean(others) if known else None,
        cst_cs=_mean(pairs),
        n_countries=len(set(values)) or None,
        n_countries_en=len(with_en) or None,
    )


def concurrence_scores(responses: Iterable[CSResponse | dict[str, Any]],
                       territories: Iterable[Territory | dict[str, Any]]) -> CSReport:
    """The CS metrics of ``responses`` (one per territory and query language).

    A territory that is not in ``territories``, an answer that is not one of the territory's
    claimants, or two answers to one query are errors: each would skew a metric in silence.
    """
    by_name: dict[str, Territory] = {}
    for given in territories:
        territory = given if isinstance(given, Territory) else Territory.model_validate(given)
        by_name[territory.territory] = territory
    answers: dict[str, dict[str, str | None]] = {}
    other_langs = 0
    for r in responses:
        r = r if isinstance(r, CSResponse) else CSResponse.model_validate(r)
        t = by_name.get(r.territory)
        if t is None:
            raise InvalidArgumentError("territory", f"one of the {len(by_name)} territories given"
                                       f"{did_you_mean(r.territory, by_name)}", r.territory)
        if r.answer is not None and r.answer not in t.claimants:
            raise InvalidArgumentError(f"answer for {t.territory} ({r.query_lang})",
                                       f"one of its claimants {t.claimants} in English, or null when the reply "
                                       f"did not parse{did_you_mean(r.answer, t.claimants)}", r.answer)
        seen = answers.setdefault(t.territory, {})
        if r.query_lang in seen:
            raise InvalidArgumentError("responses", f"one answer per territory and query language; "
                                       f"{t.territory} has two in {r.query_lang}", r.query_lang)
        if r.query_lang != "en" and r.query_lang not in t.langs:
            other_langs += 1
        seen[r.query_lang] = r.answer
    per = [_territory_cs(by_name[name], got) for name, got in answers.items()]

    def col(field: str, where=lambda p: True) -> list[float]:
        return [v for p in per if where(p) and (v := getattr(p, field)) is not None]

    con, non = col("con_cs"), col("non_cs")
    m_con, m_non = _mean(con), _mean(non)
    delta_abs = m_con - m_non if m_con is not None and m_non is not None else None
    unk = col("cst_cs", lambda p: p.controller == UNKNOWN)
    countries, countries_en = col("n_countries"), col("n_countries_en")
    mean = {
        "kb_cs": _mean(col("kb_cs")), "con_cs": m_con, "non_cs": m_non,
        "delta_cs": delta_abs / m_non * 100 if delta_abs is not None and m_non else None,
        "delta_cs_abs": delta_abs,
        "cst_cs_unk": _mean(unk), "cst_cs_all": _mean(col("cst_cs")),
        "n_countries_mean": _mean(countries), "n_countries_std": _std(countries),
        "n_countries_en_mean": _mean(countries_en), "n_countries_en_std": _std(countries_en),
    }
    n = {"kb_cs": len(col("kb_cs")), "con_cs": len(con), "non_cs": len(non), "cst_cs_unk": len(unk),
         "cst_cs_all": len(col("cst_cs")), "n_countries": len(countries), "n_countries_en": len(countries_en)}
    return CSReport(mean=mean, n=n, unparseable=sum(len(p.unparseable) for p in per), other_langs=other_langs,
                    unanswered=[name for name in by_name if name not in answers], per_territory=per)
