"""The agent's checks of one answer, and the translations they need: the verify step's
findings (language, citations, substance, attribution) and the translation repair.

A part of :class:`~xlrag.agents.graph.XlragAgent` (a base class), apart so that each module
stays readable; it reads the agent's ``config``, ``pipeline``, ``translator`` and
``attribution``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from xlrag.agents.repair import LLM_REPAIRS, plan_repair
from xlrag.chains.parsing import strip_markers
from xlrag.checks import substance
from xlrag.errors import TranslationCutOffError
from xlrag.schema import Citation, GroundedAnswer, Hit
from xlrag.trace import CheckResult, Repair

__all__ = ["AnswerChecks", "attribution_detail"]

State = Mapping[str, Any]  # the agent's state (xlrag.agents.graph.AgentState)


def attribution_detail(result: Any) -> str:
    invalid = sum(v.verdict == "invalid" for v in result.votes)
    return (f"{len(result.supporting)} of {len(result.votes)} cited passages support the answer"
            + (f" ({invalid} verdicts invalid)" if invalid else ""))


class AnswerChecks:
    """The checks :meth:`XlragAgent.verify <xlrag.agents.graph.XlragAgent.verify>` makes, and the
    translation repair."""

    config: Any
    pipeline: Any
    translator: Any
    attribution: Any

    def _checks(self, s: State, attributable: bool | None, why: str,
                renderings: dict[str, substance.Rendering] | None = None, over: str | None = None) -> dict:
        from xlrag.checks.language import judge_reply

        answer, attempt = s["answer"], len(s.get("tried", []))
        lang = s["query"].lang or answer.lang or "en"
        # the answer line and the explanation each on its own: the answer line is what a reader
        # takes away, and lingua reading it with a longer explanation in the right language passed
        # an English answer line under a Hindi explanation that restated the question
        verdict = judge_reply(answer.answer, answer.explanation, lang, raw=answer.raw_output)
        checks = [CheckResult(check="language", passed=verdict.passed, attempt=attempt, detail=verdict.detail)]
        if answer.passages:
            valid = [c for c in answer.citations if c.valid and c.source != "post_hoc"]
            post = [c for c in answer.citations if c.valid and c.source == "post_hoc"]
            invalid = [c.marker for c in answer.citations if not c.valid]
            # post-hoc citations are xlrag's guess by similarity, not the model's grounding: they
            # are shown (flagged) but never pass, so an answer they alone support stays unrepaired
            ok = bool(valid) and not invalid
            detail = (f"{len(valid)} valid model citation(s), {len(post)} post hoc"
                      + (" (attributed by similarity afterwards: they do not count)" if post and not valid else "")
                      + (f", invalid markers {invalid}" if invalid else ""))
            checks.append(CheckResult(check="citations", passed=ok, attempt=attempt, detail=detail))
        checks += [CheckResult(check=f.check, passed=f.passed, attempt=attempt, detail=f.reason)
                   for f in self._substance(s, renderings or {})]
        if attributable is not None or why:
            checks.append(CheckResult(check="attribution", passed=attributable is not False, attempt=attempt,
                                      detail=why))
        failed = [c.check for c in checks if not c.passed]
        tried = s.get("tried", [])
        budget = self.config.max_repairs - sum(r in LLM_REPAIRS for r in tried)
        nxt, quotable = plan_repair(failed, tried, budget) if failed else None, True
        if nxt is Repair.QUOTE and (not self.config.quote or self._quoted(s, failed)[1] is not None):
            # quoting is off (agent.quote), or nothing to quote (no passage in the user's language
            # says it): not a step to show
            nxt, quotable = plan_repair(failed, tried, budget, quotable=False), False
        stopped: list[str] = []
        if over is not None and nxt in LLM_REPAIRS:
            # no model is called again; a repair that needs none (post-hoc citations) may still run
            stopped.append(f"the {nxt.value} repair was not made: {over}")
            nxt = plan_repair(failed, tried, 0, quotable=quotable)
        if "best" in s and len(failed) > len(s.get("best_failed", [])):
            return {"checks": checks, "failed": failed, "next_repair": nxt, "stopped": stopped}
        return {"checks": checks, "failed": failed, "next_repair": nxt, "stopped": stopped, "best": answer,
                "best_failed": failed}

    @staticmethod
    def _said(answer: GroundedAnswer) -> str:
        """What the answer says: its answer line, or the whole reply when none was parsed."""
        from xlrag.checks.language import response_text

        return answer.answer if answer.answer is not None and answer.answered else response_text(answer)

    def _substance(self, s: State, renderings: dict[str, substance.Rendering]) -> list[substance.Finding]:
        answer, question = s["answer"], s["query"].question
        lang, said = s["query"].lang, self._said(s["answer"])
        # an explanation restating the question explains nothing (when no answer line was parsed,
        # ``said`` is the whole reply, the explanation in it)
        explanation = answer.explanation if answer.answered else None
        if not answer.answered and answer.passages:
            # the reader is shown no answer line ("—"), whatever else the reply held (lines copied
            # from the prompt, an explanation): asked again for one, extractively
            return [substance.Finding(check="non_answer", passed=False,
                                      reason="no answer line: the reply held none once the prompt's lines were "
                                             "dropped")]
        found = [substance.non_answer(said, question, lang, templates=[s.get("templates", "")],
                                      explanation=explanation)]
        if found[0].passed and answer.passages:
            found.append(substance.refusal_despite_evidence(said, question, answer.passages[0].passage.text, lang))
            cited = [h.passage for h in answer.cited_passages]
            if cited and not substance.is_refusal(said, lang):
                found.append(substance.unsupported(said, question, cited, lang,
                                                   renderings=list(renderings.values())))
        return found

    def _to_translate(self, s: State) -> list[str]:
        """The cited passages' other languages, when the answer's own words are not in them:
        the answer is translated into each (a few words, cheaper than the passages)."""
        answer, lang = s["answer"], s["query"].lang
        if self.translator is None or not answer.answered or not answer.cited_passages:
            return []
        said = self._said(answer)
        cited = [h.passage for h in answer.cited_passages]
        # translated whenever a cited passage holds none of the question's words: where it speaks
        # of the question is found in the translation (a number anywhere in it proves nothing)
        if substance.unsupported(said, s["query"].question, cited, lang, anywhere=False).passed:
            return []
        return sorted({h.lang for h in answer.cited_passages if h.lang != lang})[:2]

    def _renderings(self, s: State, langs: list[str], over: Callable[[], str | None]
                    ) -> tuple[dict[str, substance.Rendering], list[str]]:
        """The answer and its question in each language: what the translated answer shares
        with the translated question is the question's, not the answer's own. Once the budget is
        spent (``over``), the languages left are not translated into (the second list says so)."""
        out: dict[str, substance.Rendering] = {}
        said = strip_markers(self._said(s["answer"])).strip()
        source = s["query"].lang or "en"
        for target in langs:
            if (why := over()) is not None:
                return out, [f"the support check's translation into {target} was not made: {why}"]
            try:
                out[target] = substance.Rendering(
                    answer=self.translator.translate(said, source, target),
                    question=self.translator.translate(s["query"].question, source, target), lang=target)
            except TranslationCutOffError:
                continue  # half a translation proves nothing either way: the lexical verdict stands
        return out, []

    def _attribution_inputs(self, s: State) -> tuple[str, list[Hit]] | None:
        answer = s["answer"]
        # the stack hands the agent a checker only when answer.attribution_check is on
        if self.attribution is None or not answer.answer:
            return None
        cited = answer.cited_passages
        return (answer.answer, cited) if cited else None

    def _translate(self, s: State) -> tuple[GroundedAnswer, str | None]:
        from xlrag.checks.language import judge_reply

        answer = s["answer"]
        lang = s["query"].lang or "en"
        verdict = judge_reply(answer.answer, answer.explanation, lang, raw=answer.raw_output)
        # each part from its own language, and only a part in another one: an English answer line
        # under a Hindi explanation is translated, the explanation kept as the model wrote it
        judged = {"answer": verdict.answer_line, "explanation": verdict.explanation}
        wrong = [f for f, v in judged.items() if v is not None and v.status == "wrong"] or list(judged)
        fallback = next((v.detected for v in judged.values() if v is not None and v.detected), None) or "en"
        update: dict[str, Any] = {"flags": [*answer.flags, "translated"]}
        for field in wrong:
            text = getattr(answer, field)
            if text:
                part = judged[field]
                source = part.detected if part is not None and part.detected else fallback
                try:
                    # markers are not words to translate; the citations stay as the model made them
                    update[field] = self.translator.translate(strip_markers(text).strip(), source, lang)
                except TranslationCutOffError as e:
                    # half a translation would read as the whole answer: the whole one, untranslated, stays
                    return answer, f"not translated: {e}"
                if (why := _not_a_translation(strip_markers(text).strip(), update[field], lang)) is not None:
                    # a small model asked to translate into a language it writes badly refuses or
                    # answers in another: shown as the answer, that would read as checked
                    return answer, f"not translated: the {field}'s translation {why}"
        if "explanation" in update and answer.citations:
            markers = " ".join(f"<doc{c.marker}>" for c in answer.citations if c.valid)
            update["explanation"] = f"{update['explanation']} {markers}".strip()
        return answer.model_copy(update=update), None

    def _quote(self, s: State) -> tuple[GroundedAnswer, str | None]:
        """The answer line replaced by a sentence of a retrieved passage in the user's language
        that is about the question and says what the answer says (:func:`xlrag.checks.quote.quote`)."""
        return self._quoted(s, s.get("failed", []))

    def _quoted(self, s: State, failed: Sequence[str]) -> tuple[GroundedAnswer, str | None]:
        from xlrag.checks.language import judge_answer_line
        from xlrag.checks.quote import best_sentence, quote

        answer, lang, question = s["answer"], s["query"].lang or "en", s["query"].question
        passages = [h.passage for h in answer.passages]
        if not answer.answered:
            # no answer line to keep: the reader gets the passage's sentence most about the
            # question, flagged as not the model's (never shown as verified)
            found, only = best_sentence(question, passages, lang), True
            if found is None:
                return answer, f"not quoted: no retrieved passage in {lang} has a sentence about the question"
        else:
            line, only = answer.answer, False
            if judge_answer_line(line, lang).status != "wrong" and not set(failed) & set(substance.SUBSTANCE_CHECKS):
                return answer, "not quoted: the answer line is in the question's language (the explanation is not)"
            found = quote(line, question, passages, lang)
            if found is None:
                return answer, (f"not quoted: no retrieved passage in {lang} has a sentence about the question "
                                f"that holds the answer's words")
        hit = answer.passages[found.index]
        cited = Citation(marker=found.index, passage_id=hit.id, doc_id=hit.doc_id, lang=hit.lang, valid=True,
                         source="quote", text=found.text)
        kept = [c for c in answer.citations if c.valid and c.marker != found.index]
        flags = [*(f for f in answer.flags if f != "no_citations"), "quoted",
                 *([substance.QUOTED_ONLY] if only else [])]
        return answer.model_copy(update={"answer": found.text, "citations": [cited, *kept], "flags": flags}), None


def _not_a_translation(source: str, out: str, lang: str) -> str | None:
    """Why ``out`` is not a translation of ``source`` into ``lang`` (a sentence), or None: the
    source given back, no words (a format label), a refusal, or a reply in another language."""
    from xlrag.checks.language import judge_language, visible_text

    if out.strip() == source.strip():
        return "is the text untranslated"
    if not any(ch.isalpha() for ch in visible_text(out)):
        return f"has no words ({out[:60]!r})"  # a format label or a marker the model copied
    if substance.is_refusal(out, "en") or substance.is_refusal(out, lang):
        return f"is a refusal ({out[:60]!r})"
    verdict = judge_language(out, lang)
    if verdict.status == "wrong":
        return f"is not in {lang} ({verdict.reason or f'detected {verdict.detected}'})"
    return None
