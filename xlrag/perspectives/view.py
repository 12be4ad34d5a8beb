"""The perspectives view: one question answered once per language of sources, side by side.

    question → detect its language → choose the languages (given, an agent rule, a disputed
    territory's claimants, or the best-ranked stores) → per language: retrieve from that
    store alone (mode ``oracle_lang``, its target the language) → answer in the user's
    language with the agent (verify, repair: the checks of any answer) → compare every pair
    of answers (lexical first, the LLM when unsure) → consensus groups, disagreement points

BordIRlines (Li et al. 2024) found that the same question about a disputed territory is
answered differently depending on the language of the retrieved passages. This view shows
that difference instead of blending it away: each language's answer with its own citations,
and where they disagree, each side. A store that returns nothing gives a perspective that
says so; no model is asked to answer from nothing.

Cost: N answers (plus the agent's repairs), N(N-1)/2 lexical comparisons, and one LLM call
per pair the lexical signal leaves unsure; :class:`~xlrag.perspectives.models.Costs` says
what a call spent.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableSerializable
from pydantic import ConfigDict

from xlrag.borderlines import Territory
from xlrag.chains.pipeline import Pipeline
from xlrag.chains.state import ChainInput
from xlrag.config import AgentRule
from xlrag.errors import ConfigError
from xlrag.modes import IRMode
from xlrag.perspectives.compare import AgreementJudge, judged, lexical_agreement, verdict
from xlrag.perspectives.langs import choose_langs
from xlrag.perspectives.models import (
    MAX_LANGS,
    Costs,
    LanguageChoice,
    PairAgreement,
    Perspective,
    Perspectives,
    PerspectivesInput,
)
from xlrag.schema import Query, Retrieval
from xlrag.steps import Call, Steps, Together, arun, run
from xlrag.validate import DEFAULT_RETRIEVE_K, validate_mapping

__all__ = ["PerspectivesView"]

# one language's store alone: the mode whose plan is exactly the target language's store
ONE_STORE = IRMode.ORACLE_LANG
# passages ranked over every store to find the best-ranked languages: the ranking depth
RANK_K = DEFAULT_RETRIEVE_K


def _coerce(value: Any) -> PerspectivesInput:
    if isinstance(value, PerspectivesInput):
        return value
    if isinstance(value, str):
        value = {"question": value}
    return validate_mapping(PerspectivesInput, value, "perspectives input")


class PerspectivesView(RunnableSerializable[Any, Perspectives]):
    """``invoke({"question": ..., "relevant_langs": [...]})`` → :class:`Perspectives`. Input: a
    question string, a :class:`PerspectivesInput` or a mapping of its fields.

    Built by :func:`xlrag.agents.build.build_perspectives`: the view stands below the agent,
    and is handed the Runnable that answers each language (the agent's fixed graph)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    pipeline: Pipeline
    # answers one language: {"question", "lang", "mode", "target_lang"} -> {"answer", "trace"}
    agent: Runnable
    judge: AgreementJudge
    rules: list[AgentRule]
    territories: list[Territory]

    @property
    def InputType(self) -> type[PerspectivesInput]:
        return PerspectivesInput

    @property
    def OutputType(self) -> type[Perspectives]:
        return Perspectives

    # -- choose -------------------------------------------------------------------------------
    def validate_input(self, value: Any) -> PerspectivesInput:
        """``value`` checked as far as it can be without a model: its fields, and the languages it
        names (an unknown code, one with no store, more than ``max_langs``). A server calls this
        before it queues for a generation slot, so that a bad request is refused at once rather
        than after every answer ahead of it in the queue."""
        inp = _coerce(value)
        retriever = self._retriever()
        if inp.relevant_langs is not None:  # what choose_langs refuses of given languages, without ranking any
            choose_langs(inp.question, inp.lang or "", retriever.languages, relevant_langs=inp.relevant_langs, rules=(),
                         territories=(), max_langs=self._bound(inp), ranked=list)
        return inp

    def _retriever(self) -> Any:
        retriever = self.pipeline.retriever
        if retriever is None:
            raise ConfigError("perspectives compare the sources of each language: they need an index "
                              "(retrieval.mode no_ir has none)")
        return retriever

    @staticmethod
    def _bound(inp: PerspectivesInput) -> int:
        # languages named by the caller are their own bound, unless max_langs is given too
        return inp.max_langs if inp.relevant_langs is None or "max_langs" in inp.model_fields_set else MAX_LANGS

    def _plan(self, inp: PerspectivesInput) -> tuple[Query, LanguageChoice]:
        retriever = self._retriever()
        query = self.pipeline.query_for(ChainInput(question=inp.question, lang=inp.lang, query=inp.query))

        def ranked() -> list[str]:
            return [h.lang for h in retriever.retrieve(query, mode=IRMode.ALL, k=RANK_K).hits]

        choice = choose_langs(query.question, query.lang or "", retriever.languages, relevant_langs=inp.relevant_langs,
                              rules=self.rules,
                              territories=self.territories, max_langs=self._bound(inp), ranked=ranked)
        return query, choice

    @staticmethod
    def _one_store(query: Query, lang: str) -> Query:
        return query.model_copy(update={"target_lang": lang})

    @staticmethod
    def _agent_input(query: Query, lang: str) -> dict[str, Any]:
        # the view's Query goes on to each language's agent (its id kept), pointed at that store
        return {"question": query.question, "lang": query.lang, "mode": ONE_STORE, "target_lang": lang,
                "query": PerspectivesView._one_store(query, lang)}

    @staticmethod
    def _empty(lang: str, hits: Retrieval) -> Perspective:
        notes = "; ".join(hits.notes) or "the store returned no passage for this question"
        return Perspective(lang=lang, status="no_passages", note=f"no passages: {notes}; no answer was made")

    @staticmethod
    def _answered(lang: str, out: dict[str, Any]) -> Perspective:
        from xlrag.checks.substance import FLAGS, is_refusal, unverified

        answer, trace = out["answer"], out["trace"]
        # a refusal the agent let stand (its sources did not convince the refusal check) is no
        # position: compared, "the documents do not say" would disagree with every answer
        if not answer.answered or FLAGS["non_answer"] in answer.flags or is_refusal(answer.answer, answer.lang):
            return Perspective(lang=lang, status="not_an_answer", answer=answer, trace=trace,
                               note="the answer says nothing the question did not (or refuses) after the agent's "
                                    "repairs")
        reasons = unverified(answer)
        if reasons:
            return Perspective(lang=lang, status="unverified", answer=answer, trace=trace,
                               note=f"not compared: the answer is not verified ({', '.join(reasons)})")
        return Perspective(lang=lang, status="answered", answer=answer, trace=trace)

    # -- compare ------------------------------------------------------------------------------
    @staticmethod
    def _lexical(query: Query, perspectives: list[Perspective]) -> list[PairAgreement]:
        answered = [p for p in perspectives if p.status == "answered"]
        pairs = []
        for i, a in enumerate(answered):
            for b in answered[i + 1:]:
                agreement, score, reason = lexical_agreement(a.said or "", b.said or "", query.question, query.lang)
                pairs.append(PairAgreement(a=a.lang, b=b.lang, agreement=agreement, method="lexical", score=score,
                                           reason=reason))  # type: ignore[arg-type]
        return pairs

    @staticmethod
    def _result(query: Query, choice: LanguageChoice, perspectives: list[Perspective],
                pairs: list[PairAgreement], judge_calls: int) -> Perspectives:
        status, consensus, disagreements = verdict(perspectives, pairs, query.lang or "")
        answered = [p.lang for p in perspectives if p.status == "answered"]
        note = None
        if len(perspectives) < 2:
            note = (f"one language was chosen ({choice.reason}): a single perspective, nothing to compare"
                    if perspectives else "no store returned a passage for this question: no perspective")
        else:
            missing = ", ".join(f"{p.lang} ({p.status.replace('_', ' ')})" for p in perspectives
                                if p.status != "answered")
            if len(answered) < 2:
                note = f"only {len(answered)} of {len(perspectives)} perspectives answered; {missing}: " \
                       f"nothing to compare"
            elif missing:
                note = f"not compared: {missing}"
        by_lang = {p.lang: p for p in perspectives}
        costs = Costs(answers=sum(p.answer is not None for p in perspectives),
                      repairs=sum(len(p.trace.repairs) for p in by_lang.values() if p.trace is not None),
                      lexical_comparisons=len(pairs), judge_calls=judge_calls)
        return Perspectives(question=query.question, lang=query.lang or "", choice=choice, perspectives=perspectives,
                            pairs=pairs, status=status, consensus=consensus, disagreements=disagreements,
                            note=note, costs=costs)

    # -- Runnable -----------------------------------------------------------------------------
    def _run(self, value: Any, config: RunnableConfig) -> Perspectives:
        # blocking, the languages are answered one at a time: a local model answers one at a
        # time anyway; on an event loop (_arun) at once
        return run(self._view(value, config))

    async def _arun(self, value: Any, config: RunnableConfig) -> Perspectives:
        return await arun(self._view(value, config))

    def _view(self, value: Any, config: RunnableConfig) -> Steps[Perspectives]:
        query, choice = yield Call(self._plan, (_coerce(value),))
        perspectives = yield Together([self._one_lang(query, lang, config) for lang in choice.langs])
        pairs = yield Call(self._lexical, (query, perspectives))
        unsure = [i for i, p in enumerate(pairs) if p.agreement == "unsure"]
        verdicts = yield Together([
            Call(self.judge.judge, (query.question, self._said(perspectives, pairs[i].a),
                                    self._said(perspectives, pairs[i].b), query.lang or "en"), self.judge.ajudge)
            for i in unsure])
        for i, (agreement, reason) in zip(unsure, verdicts, strict=True):
            pairs[i] = judged(pairs[i], agreement, reason)
        return self._result(query, choice, perspectives, pairs, len(unsure))

    def _one_lang(self, query: Query, lang: str, config: RunnableConfig) -> Steps[Perspective]:
        hits = yield Call(self.pipeline.retrieve, (self._one_store(query, lang), ONE_STORE, config),
                          self.pipeline.aretrieve)
        if not hits.hits:
            return self._empty(lang, hits)
        out = yield Call(self.agent.invoke, (self._agent_input(query, lang), config), self.agent.ainvoke)
        return self._answered(lang, out)

    @staticmethod
    def _said(perspectives: list[Perspective], lang: str) -> str:
        return next(p.said or "" for p in perspectives if p.lang == lang)

    # LangChain's RunnableLambda opens the run and hands _run a config whose callbacks are its
    # children (as the answering chain does)
    def _steps(self) -> RunnableLambda:
        return RunnableLambda(self._run, afunc=self._arun, name=self.get_name())

    def invoke(self, input: Any, config: RunnableConfig | None = None) -> Perspectives:  # type: ignore[override]
        return self._steps().invoke(input, config)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None  # type: ignore[override]
                      ) -> Perspectives:
        return await self._steps().ainvoke(input, config)

