"""The LLM reranker (``rerank.name: llm``): any configured chat model reorders the fused list.

The paper's "retrieve 20, rerank, keep 5" offline: a
:class:`~xlrag.indexes.postprocess.PassagePostprocessor` (the hook lives with retrieval; this
implementation lives with the chat models).

* ``pointwise`` (default): one prompt per (question, passage). Local llama.cpp models score
  logP("yes") - logP("no") from their next-token logits (:mod:`xlrag.chains.local.scoring`,
  one forward pass, the question's prefix cached across candidates); OpenAI-compatible APIs
  the same from ``top_logprobs``; other vendors by a 0-3 grade parsed from the reply.
* ``listwise``: one prompt with every candidate numbered; the model writes the best numbers.

Each passage is cut to ``rerank.max_passage_tokens``, so a query costs at most about
``candidates x (max_passage_tokens + prompt)`` tokens. benchmarks/rerank_methods.py holds
the figures behind the defaults.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from xlrag.config import LLMConfig, RerankConfig
from xlrag.errors import ConfigError, ProviderError
from xlrag.registry import register
from xlrag.schema import Hit, Query

__all__ = ["DEFAULT_RERANK_LLM", "ChatScorer", "LLMReranker", "ListwiseScorer", "Scorer", "pointwise_text"]

log = logging.getLogger(__name__)

#: The reranker's model when ``rerank.llm`` is None (chosen in benchmarks/rerank_methods.py).
DEFAULT_RERANK_LLM = LLMConfig(provider="local", model="qwen2.5-coder-1.5b-instruct")
#: Providers whose API returns token log-probabilities (``rerank.scoring: auto`` uses them).
LOGPROB_PROVIDERS = ("local", "openai")

# The instructions are in English whatever the languages of question and passage: small
# models follow English instructions best, the verdict tokens read ("yes"/"no") are then the
# same for every language pair, and one fixed instruction keeps the cached prompt prefix
# identical across queries. The question and passage stay as they are.
_POINTWISE = ("You judge search results. The question and the passage may be in different languages.\n\n"
              "Question: {question}\n\nPassage: {passage}\n\n"
              "Does the passage answer or help answer the question? Answer yes or no.")
_GRADE = ("You judge search results. The question and the passage may be in different languages.\n\n"
          "Question: {question}\n\nPassage: {passage}\n\n"
          "How well does the passage answer the question? Reply with one digit: 3 it answers it, "
          "2 it helps answer it, 1 same topic but no answer, 0 unrelated.")
_LISTWISE = ("You judge search results. The question and the passages may be in different languages.\n\n"
             "Question: {question}\n\n{passages}\n\nQuestion: {question}\n"
             "Which passages answer or help answer the question? Reply with their numbers only, "
             "best first, separated by commas.")


def pointwise_text(question: str, passage: str) -> str:
    """The user turn of the pointwise yes/no prompt: instruction and question first, passage last."""
    return _POINTWISE.format(question=question, passage=passage)


class Scorer(Protocol):
    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage, higher is better."""


def _cutter(llm: Any, max_tokens: int) -> Callable[[str], str]:
    """Cuts a passage to ``max_tokens``: exactly with a local model's tokenizer; for vendors, whose
    tokenizers are not at hand offline, at 4 characters per token (English's rule of thumb; CJK
    text may then run to ~2x the tokens, still bounded)."""
    from xlrag.chains.local.runtime import LocalLlamaChat

    if isinstance(llm, LocalLlamaChat):
        llama, _ = llm.native()

        def cut(text: str) -> str:
            ids = llama.tokenize(text.encode("utf-8"), add_bos=False, special=False)
            if len(ids) <= max_tokens:
                return text
            return llama.detokenize(ids[:max_tokens]).decode("utf-8", errors="ignore")

        return cut
    return lambda text: text[: max_tokens * 4]


def _text(reply: Any) -> str:
    return str(getattr(reply, "text", None) or getattr(reply, "content", reply) or "")


class ChatScorer:
    """Pointwise through a LangChain chat model: yes/no logprobs (OpenAI's ``top_logprobs``) or a
    0-3 grade read from the reply. Requests run ``concurrency`` at a time."""

    def __init__(self, llm: Any, *, logprobs: bool, max_passage_tokens: int, concurrency: int, name: str):
        self.logprobs, self.concurrency, self.name = logprobs, concurrency, name
        self._cut = _cutter(llm, max_passage_tokens)
        self.llm = llm.bind(logprobs=True, top_logprobs=10) if logprobs else llm
        if logprobs:
            self._probe()

    def _probe(self) -> None:
        # Fail at construction, not after a query's first candidate: a server that drops the
        # logprobs field would otherwise look like a reranker scoring every passage alike.
        try:
            reply = self.llm.invoke([("user", pointwise_text("Is Paris in France?", "Paris is in France."))])
        except Exception as e:
            raise ConfigError(f"{self.name} did not answer a logprobs request ({type(e).__name__}: "
                              f"{str(e)[:160]}); set rerank.scoring: grade if it does not return logprobs") from e
        top = self._top(reply)
        if top is None:
            raise ConfigError(f"{self.name} returns no logprobs; set rerank.scoring: grade (its written 0-3 reply)")
        if not any(t["token"].strip().lower() in ("yes", "no") for t in top):
            # a base model continuing the text: its logprobs say nothing about the verdict
            raise ConfigError(f"{self.name} ranks neither 'yes' nor 'no' among its {len(top)} likeliest first tokens "
                              f"(it began {_text(reply)[:20]!r}); set rerank.scoring: grade, or choose an instruct "
                              "model")

    @staticmethod
    def _top(reply: Any) -> list[dict[str, Any]] | None:
        content = ((getattr(reply, "response_metadata", None) or {}).get("logprobs") or {}).get("content")
        return (content[0].get("top_logprobs") or None) if content else None

    def _verdict(self, reply: Any) -> float:
        top = self._top(reply)
        if top is None:
            raise ProviderError(f"{self.name} sent a reply without logprobs; set rerank.scoring: grade")
        yes = [t["logprob"] for t in top if t["token"].strip().lower() == "yes"]
        no = [t["logprob"] for t in top if t["token"].strip().lower() == "no"]
        # a word missing from the top list is at most as likely as the least likely one listed
        floor = min(t["logprob"] for t in top) - math.log(2)
        return _lse(yes or [floor]) - _lse(no or [floor])

    def _grade(self, reply: Any) -> float:
        text = _text(reply).strip()
        m = re.search(r"[0-3]", text)
        if m:
            return float(m.group())
        word = text.lower()[:12]
        if word.startswith("yes") or word.startswith("no"):
            return 2.0 if word.startswith("yes") else 0.0
        log.warning("the reranking model's reply %r is no grade; the passage scores 0", text[:40])
        return 0.0

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        template = _POINTWISE if self.logprobs else _GRADE
        prompts = [[("user", template.format(question=question, passage=self._cut(p)))] for p in passages]
        replies = self.llm.batch(prompts, config={"max_concurrency": self.concurrency})
        return [self._verdict(r) if self.logprobs else self._grade(r) for r in replies]


def _lse(values: Sequence[float]) -> float:
    top = max(values)
    return top + math.log(sum(math.exp(v - top) for v in values))


class ListwiseScorer:
    """All candidates in one prompt, numbered; the model writes the best numbers, best first.
    A listed passage scores ``n - position``; the unlisted score 0 and keep the fused order."""

    def __init__(self, llm: Any, *, max_passage_tokens: int):
        self.llm = llm
        self._cut = _cutter(llm, max_passage_tokens)
        self.last_reply = ""

    def prompt(self, question: str, passages: Sequence[str]) -> str:
        listed = "\n\n".join(f"[{i}] {self._cut(p)}" for i, p in enumerate(passages, 1))
        return _LISTWISE.format(question=question, passages=listed)

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        self.last_reply = _text(self.llm.invoke([("user", self.prompt(question, passages))]))
        n = len(passages)
        chosen = list(dict.fromkeys(int(x) for x in re.findall(r"\d+", self.last_reply) if 1 <= int(x) <= n))
        scores = [0.0] * n
        for pos, i in enumerate(chosen):
            scores[i - 1] = float(n - pos)
        return scores


class LLMReranker:
    """Reranks the first ``candidates`` hits with ``scorer``; the fused order breaks ties, and
    hits beyond ``candidates`` follow in their fused order."""

    name = "llm"
    chooses = True

    def __init__(self, scorer: Scorer, *, candidates: int | None = None, model: str = ""):
        self.scorer, self.candidates, self.model = scorer, candidates, model

    def postprocess(self, hits: list[Hit], query: Query, k: int) -> list[Hit]:
        n = len(hits) if self.candidates is None else self.candidates
        head, rest = list(hits[:n]), list(hits[n:])
        if not head:
            return []
        try:
            scores = self.scorer.score(query.question, [h.passage.text for h in head])
        except (ProviderError, ConfigError):
            raise
        except Exception as e:  # llama.cpp and the vendor SDKs raise their own error trees
            raise ProviderError(f"llm rerank with {self.model or 'the model'} failed: {e}") from e
        order = sorted(range(len(head)), key=lambda i: (-scores[i], i))
        ranked = [head[i].model_copy(update={"score": float(scores[i]), "rerank_score": float(scores[i])})
                  for i in order]
        return [h.model_copy(update={"rank": r}) for r, h in enumerate([*ranked, *rest][:k], 1)]


def _scoring(cfg: RerankConfig, llm_cfg: LLMConfig) -> str:
    if cfg.scoring != "auto":
        return cfg.scoring
    return "logprobs" if llm_cfg.provider in LOGPROB_PROVIDERS else "grade"


@register("reranker", "llm")
def _llm_reranker(cfg: RerankConfig) -> LLMReranker:
    from xlrag.chains.llms import build_llm
    from xlrag.chains.local.runtime import LocalLlamaChat

    llm_cfg = cfg.llm or DEFAULT_RERANK_LLM
    name = f"rerank.llm {llm_cfg.provider}:{llm_cfg.model or 'default'}"
    if cfg.method == "listwise":
        # the reply is a list of numbers: a few tokens per candidate, not the answer budget
        llm = build_llm(llm_cfg.model_copy(update={"max_tokens": min(llm_cfg.max_tokens, 4 * (cfg.candidates or 20))}))
        return LLMReranker(ListwiseScorer(llm, max_passage_tokens=cfg.max_passage_tokens),
                           candidates=cfg.candidates, model=name)
    scoring = _scoring(cfg, llm_cfg)
    if scoring == "logprobs" and llm_cfg.provider not in LOGPROB_PROVIDERS:
        raise ConfigError(f"{name} returns no logprobs (only {' and '.join(LOGPROB_PROVIDERS)} do); "
                          f"set rerank.scoring: grade (the model's written 0-3 reply)")
    # a verdict is one word or digit: a chatty model would otherwise be paid for max_tokens
    llm = build_llm(llm_cfg.model_copy(update={"max_tokens": 1 if scoring == "logprobs" else 4}))
    if scoring == "logprobs" and isinstance(llm, LocalLlamaChat):
        from xlrag.chains.local.scoring import LogitScorer

        llama, lock = llm.native()
        scorer: Scorer = LogitScorer(llama, lock, llm.model_name, pointwise_text, chat=llm.chat,
                                     max_passage_tokens=cfg.max_passage_tokens)
    else:
        scorer = ChatScorer(llm, logprobs=scoring == "logprobs", max_passage_tokens=cfg.max_passage_tokens,
                            concurrency=cfg.concurrency, name=name)
    return LLMReranker(scorer, candidates=cfg.candidates, model=name)
