"""`xlrag eval cs`: BordIRlines concurrence scores of multiple-choice answers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from xlrag.cli._app import _fail, out, warn
from xlrag.cli.evaluating import _f, _table, eval_app
from xlrag.errors import CorpusRowError, XlragError
from xlrag.jsonl import read_objects

_LABELS = {"kb_cs": "KB CS", "con_cs": "Con CS", "non_cs": "Non CS", "delta_cs": "ΔCS", "delta_cs_abs": "ΔCS abs",
           "cst_cs_unk": "Cst CS (unk)", "cst_cs_all": "Cst CS (all)", "n_countries_mean": "# countries",
           "n_countries_std": "# countries σ"}
_COVERS = {"n_countries_mean": "n_countries", "n_countries_std": "n_countries"}


def _rows(path: Path, what: str, model):
    from pydantic import ValidationError

    rows = []
    for n, obj in read_objects(path, what):
        try:
            rows.append(model.model_validate(obj))
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(map(str, first["loc"]))
            raise CorpusRowError(path, n, f"{where}: {first['msg']}" if where else first["msg"],
                                 skippable=False) from None
    return rows


@eval_app.command("cs")
def eval_cs(
    responses: Annotated[Path,
                         typer.Option("--responses", "-r",
                                      help='JSONL of {"territory", "query_lang", "answer"}; answer is the claimant\'s '
                                           'English name or null')],
    territories: Annotated[Path,
                           typer.Option("--territories", "-t",
                                        help='JSONL of territory rows: {"territory", "controller", "claimants", '
                                             '"claimant_langs"}')],
    as_json: Annotated[bool, typer.Option("--json", help="print one JSON object instead of a table")] = False,
) -> None:
    """Cross-lingual consistency (BordIRlines): KB, Con, Non, ΔCS, Cst CS and # countries,
    computed as the BorderLines reference implementation computes them."""
    from xlrag.borderlines import Territory
    from xlrag.evals.robustness import CS_KEYS, CSResponse, concurrence_scores

    try:
        report = concurrence_scores(_rows(responses, "responses", CSResponse),
                                    _rows(territories, "territories", Territory))
    except (XlragError, ValueError) as e:
        _fail(e)
    if report.unparseable:
        warn(f"{report.unparseable} answers did not parse and are left out of every score")
    if report.other_langs:
        warn(f"{report.other_langs} answers are in a language that is neither a claimant's nor English: left out")
    if as_json:
        out.print_json(report.model_dump_json())
        return
    table = _table(f"{len(report.per_territory)} territories", [("metric", "left"), ("value", "right"),
                                                                 ("territories", "right")])
    for key in CS_KEYS:
        n = report.n
        covers = f"{n['con_cs']} / {n['non_cs']}" if key.startswith("delta") else str(n[_COVERS.get(key, key)])
        table.add_row(_LABELS[key], _f(report.mean[key]), covers)
    out.print(table)
