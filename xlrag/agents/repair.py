"""The next repair for a failed check: a pure plan, testable without a model.

The order is fixed. An answer that says nothing, says what no cited passage holds, or
refuses while the top passage holds the answer (the substance checks) is first asked
again with an extractive instruction: a short answer taken from the passage that holds
it, in the user's language; a reply in the passage's language then goes through the
language repairs below. A wrong language is first answered again with the localized language
instruction repeated (cheap and keeps the model's own citations), then translated with
the configured LLM (the citations are kept as they are). Missing or invalid citations
are asked for again once, then attributed post hoc by embedding similarity and marked
``post_hoc``. Every kind runs at most once and LLM repairs spend a budget
(``agent.max_repairs``), so the plan always ends; post-hoc attribution needs no model and
is always reachable, whatever the budget.
"""

from __future__ import annotations

from collections.abc import Collection

from xlrag.checks.substance import SUBSTANCE_CHECKS
from xlrag.trace import Repair

__all__ = ["LLM_REPAIRS", "plan_repair"]

LLM_REPAIRS = frozenset({Repair.EXTRACT, Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE, Repair.RECITE})


def plan_repair(failed: Collection[str], tried: Collection[Repair], budget: int) -> Repair | None:
    """The repair to run next, or None: answer as it is (what still fails is flagged).

    ``failed``: names of the failed checks; ``tried``: repairs already run;
    ``budget``: LLM repairs left.
    """
    def can(r: Repair) -> bool:
        return r not in tried and (r not in LLM_REPAIRS or budget > 0)

    if any(c in failed for c in SUBSTANCE_CHECKS) and can(Repair.EXTRACT):
        # translating or re-citing an answer that says nothing would only dress it up
        return Repair.EXTRACT
    if "language" in failed:
        # an extracted span is in its passage's language: translating it keeps its words
        order = (Repair.TRANSLATE,) if Repair.EXTRACT in tried else (Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE)
        for r in order:
            if can(r):
                return r
    if "citations" in failed or "attribution" in failed:
        for r in (Repair.RECITE, Repair.POST_HOC):
            if can(r):
                return r
    return None
