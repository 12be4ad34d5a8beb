"""The next repair for a failed check: a pure plan, testable without a model.

The order is fixed. An answer that says nothing, says what no cited passage holds, or
refuses while the top passage holds the answer (the substance checks) is first asked
again with an extractive instruction: a short answer taken from the passage that holds
it, in the user's language; a reply in the passage's language then goes through the
language repairs below. If it still has no substance, a sentence of a passage in the user's
language is quoted (see below; with no answer line at all, the one most about the question,
flagged ``quoted_only``: never shown as verified). An answer line in a wrong language is first
replaced by the sentence of a retrieved passage in the user's language that is about the
question and holds what the answer says (no model call; :mod:`xlrag.checks.quote`), then
answered again with the localized language instruction repeated (keeps the model's own
citations), then translated with the configured LLM (the citations are kept as they are).
Missing or invalid citations are asked for again once, then attributed post hoc by embedding
similarity and marked ``post_hoc``. Every kind runs at most once and LLM repairs spend a budget
(``agent.max_repairs``), so the plan always ends; post-hoc attribution needs no model and
is always reachable, whatever the budget.
"""

from __future__ import annotations

from collections.abc import Collection

from xlrag.checks.substance import SUBSTANCE_CHECKS
from xlrag.trace import Repair

__all__ = ["LLM_REPAIRS", "plan_repair"]

LLM_REPAIRS = frozenset({Repair.EXTRACT, Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE, Repair.RECITE})


def plan_repair(failed: Collection[str], tried: Collection[Repair], budget: int,
                quotable: bool = True) -> Repair | None:
    """The repair to run next, or None: answer as it is (what still fails is flagged).

    ``failed``: names of the failed checks; ``tried``: repairs already run;
    ``budget``: LLM repairs left; ``quotable``: whether a quote can be made (the agent finds out
    when the plan asks for one, and plans again without it).
    """
    def can(r: Repair) -> bool:
        return r not in tried and (r not in LLM_REPAIRS or budget > 0) and (r is not Repair.QUOTE or quotable)

    if any(c in failed for c in SUBSTANCE_CHECKS):
        # translating or re-citing an answer that says nothing would only dress it up
        if can(Repair.EXTRACT):
            return Repair.EXTRACT
        if can(Repair.QUOTE):
            # asked again, the model still gave nothing a passage holds: a passage's sentence
            # that says it, or, with no answer line at all, the one most about the question
            return Repair.QUOTE
    if "language" in failed:
        # a passage in the user's language that says what the answer says is quoted first: no
        # model call, and grounded by construction (xlrag.checks.quote); an extracted span is in
        # its passage's language: translating it keeps its words
        # its passage's language, and a quoted line is the user's: asking again would lose it, so
        # what is still in another language (the explanation) is translated
        order = ((Repair.QUOTE, Repair.TRANSLATE) if {Repair.EXTRACT, Repair.QUOTE} & set(tried)
                 else (Repair.QUOTE, Repair.REGENERATE_LANGUAGE, Repair.TRANSLATE))
        for r in order:
            if can(r):
                return r
    if "citations" in failed or "attribution" in failed:
        for r in (Repair.RECITE, Repair.POST_HOC):
            if can(r):
                return r
    return None
