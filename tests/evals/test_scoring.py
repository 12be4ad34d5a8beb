"""One score for an answer: the experiment grid and the XRAG study write what ``score_answer`` says.

The answer is scripted (a stand-in chain returns a fixed ``GroundedAnswer``); everything
after it runs for real: the runs' record code, lingua, the metrics and the lexical judge.
"""

from __future__ import annotations

import asyncio

import pytest
import yaml

from xlrag.evals import scoring
from xlrag.evals.experiment import Cell
from xlrag.evals.records import GridRecord
from xlrag.evals.runner import ExperimentRunner
from xlrag.evals.scoring import AnswerScore, score_answer
from xlrag.evals.studies import load_run_config
from xlrag.evals.studies.xrag import XRAGRecord, XRAGRunner
from xlrag.schema import GroundedAnswer

LEXICAL = {"judges": [{"kind": "lexical"}]}
GEMMA = {"provider": "local", "model": "gemma-3-270m", "max_tokens": 32}  # named, never loaded here
SECTIONS = ("language", "metrics", "judges")


class ScriptedChain:
    """Answers every question with the same answer: the runs' chains are called through ``ainvoke``."""

    def __init__(self, answer: GroundedAnswer):
        self.answer = answer

    async def ainvoke(self, value: dict) -> GroundedAnswer:
        return self.answer


def _load(tmp_path, name: str, data: dict):
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return load_run_config(path)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The XRAG study and a grid over XQuAD, both judged by the lexical judge."""
    tmp = tmp_path_factory.mktemp("scoring")
    xrag = XRAGRunner(_load(tmp, "xrag.yaml", {"study": "xrag", "name": "s", "langs": ["es"], "per_lang": 1,
                                                "llm": GEMMA, "judges": LEXICAL}), tmp / "xrag")
    grid = ExperimentRunner(_load(tmp, "grid.yaml", {"name": "s", "datasets": [{"name": "xquad"}],
                                                     "modes": ["qlang"], "llms": [GEMMA], "judges": LEXICAL}),
                            tmp / "grid")
    yield grid, xrag
    grid.close()
    xrag.close()


def _answer(q: dict, answer: str | None, explanation: str | None = None) -> GroundedAnswer:
    return GroundedAnswer(question=q["question"], lang=q["lang"], format="answer", mode="no_ir", model="scripted",
                          answer=answer, explanation=explanation, raw_output=answer or "no sé")


def _records(runs, ans: GroundedAnswer) -> tuple[dict, dict]:
    """The grid's and the study's record of the same answer to the same question."""
    grid, xrag = runs
    q = xrag.questions[0]
    chain = ScriptedChain(ans)
    cell = Cell(dataset="xquad", mode="qlang", llm="scripted", variant="localized")
    asked = {"id": q["id"], "question": q["question"], "lang": q["lang"], "answers": q["answers"]}
    rec_grid = asyncio.run(grid._record(grid.config.datasets[0], cell, asked,
                                        {("xquad", "scripted", "localized"): chain}))
    rec_xrag = asyncio.run(xrag.record(chain, "multilingual", q))
    GridRecord.model_validate(rec_grid)
    XRAGRecord.model_validate(rec_xrag)
    return rec_grid, rec_xrag


def _sections(rec: dict) -> dict:
    """The score sections, lingua's confidence to 9 places: it differs in the last bits from
    one call to the next on the same text."""
    out = {s: rec[s] for s in SECTIONS}
    out["language"] = {**out["language"], "confidence": round(out["language"]["confidence"], 9)}
    return out


def test_the_grid_and_the_xrag_study_score_an_answer_alike(runs):
    q = runs[1].questions[0]
    ans = _answer(q, q["answers"][0], f"El texto dice que la respuesta es {q['answers'][0]}.")
    rec_grid, rec_xrag = _records(runs, ans)
    expected = asyncio.run(score_answer(ans, q["question"], q["answers"], q["lang"], runs[1].panel)).sections()
    assert set(expected) == set(SECTIONS)
    assert _sections(rec_grid) == _sections(rec_xrag) == _sections(expected)
    # the gold itself: the sections hold a real score, not defaults
    assert expected["metrics"] == {"em": 1.0, "f1": 1.0, "char3_recall": 1.0}
    assert expected["language"]["status"] == "correct" and expected["judges"]["final"] == "correct"


def test_a_change_to_score_answer_shows_in_both_records(runs, monkeypatch):
    # a copy of the scoring left in either run would not see these two changes
    real = scoring.judge_language
    monkeypatch.setattr(scoring, "judge_language", lambda text, lang: real(text, lang).model_copy(
        update={"detected": "xx", "status": "wrong"}))
    monkeypatch.setattr(scoring, "char3_recall", lambda answer, golds: 0.25)
    q = runs[1].questions[0]
    rec_grid, rec_xrag = _records(runs, _answer(q, q["answers"][0]))
    for rec in (rec_grid, rec_xrag):
        assert rec["metrics"]["char3_recall"] == 0.25
        assert (rec["language"]["detected"], rec["language"]["status"]) == ("xx", "wrong")
        # XRAG's rule follows the language verdict: the judge's own vote stands, the final one falls
        assert (rec["judges"]["verdict"], rec["judges"]["final"]) == ("correct", "incorrect")


def test_an_unanswered_reply_keeps_every_field_of_its_verdict():
    q = {"question": "¿Cuándo?", "lang": "es"}
    score = asyncio.run(score_answer(_answer(q, None), q["question"], ["1998"], "es"))
    # the verdict's None fields stay on disk; only sections never scored are left out
    assert score.sections() == {
        "language": {"expected": "es", "detected": None, "confidence": None, "status": "not_applicable",
                     "reason": "empty reply"},
        "metrics": {"em": 0.0, "f1": 0.0, "char3_recall": 0.0}}
    assert asyncio.run(score_answer(_answer(q, "en 1998"), q["question"], [], "es")).sections().keys() == {"language"}
    assert AnswerScore.model_validate(score.model_dump()) == score
