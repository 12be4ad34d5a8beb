"""One generated answer scored against its gold: the one place the runs compute it.

The experiment grid, the XRAG study and the benchmarks all score an answer the same way:
the language of the reply (lingua), EM / token F1 / char 3-gram recall of the
answer, and the judge panel's verdict with ``final`` (a wrong-language reply is incorrect).
:class:`AnswerScore` holds those sections as the records hold them
(:mod:`xlrag.evals.records`), so a record is built from it and cannot score differently.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from xlrag.checks.language import judge_language, response_text
from xlrag.evals.answers import char3_recall, exact_match, token_f1
from xlrag.evals.records import AnswerMetrics, JudgesRecord, LanguageRecord
from xlrag.judges.panel import JudgePanel
from xlrag.schema import GroundedAnswer

__all__ = ["AnswerScore", "score_answer", "scored_text"]


class AnswerScore(BaseModel):
    """The score sections of a record; ``metrics`` and ``judges`` need gold answers, ``judges`` a panel."""

    model_config = ConfigDict(extra="forbid")
    language: LanguageRecord
    metrics: AnswerMetrics | None = None
    judges: JudgesRecord | None = None

    def sections(self) -> dict[str, Any]:
        """The sections as a record holds them: the language verdict without the text it judged,
        and no key for a section that was not scored."""
        dumped = self.model_dump(exclude={"language": {"text"}})
        # only the sections: a verdict's own None fields (``detected``, ``reason``) are on disk
        return {name: section for name, section in dumped.items() if section is not None}


def scored_text(answer: GroundedAnswer) -> str:
    """What the language check and the judges read: the reply as a reader sees it, or nothing
    when it holds no answer (the raw output left then is no answer to judge)."""
    return response_text(answer) if answer.answered else ""


async def score_answer(answer: GroundedAnswer, question: str, golds: Sequence[str], lang: str,
                       panel: JudgePanel | None = None) -> AnswerScore:
    """Score ``answer`` to ``question`` (the one the judges see, in ``lang``) against ``golds``."""
    text = scored_text(answer)
    verdict = judge_language(text, lang)
    language = LanguageRecord.model_validate(verdict.model_dump(exclude={"text"}))
    if not golds:
        return AnswerScore(language=language)
    a = answer.answer or ""
    metrics = AnswerMetrics(em=exact_match(a, golds, lang), f1=token_f1(a, golds, lang),
                            char3_recall=char3_recall(a, golds))
    judges = None
    if panel is not None:
        pv = await panel.ajudge(question, golds, text, lang)
        judges = JudgesRecord.model_validate({**pv.model_dump(), "final": pv.final(verdict.correct)})
    return AnswerScore(language=language, metrics=metrics, judges=judges)
