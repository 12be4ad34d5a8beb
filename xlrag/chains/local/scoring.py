"""Yes/no relevance read from a local llama.cpp model's next-token logits.

One forward pass per (question, passage) pair, no sampling: the score is
logP("yes") - logP("no") at the position after the prompt. The prompt is laid out as
``head + question + middle + passage + tail`` in tokens, with the instruction and the
question first, so consecutive candidates of one question share everything up to the
passage and llama.cpp keeps that prefix in its KV cache: only the passage and the short
tail are evaluated again (``reuse_prefix``; benchmarks/rerank_methods.py measures it).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from xlrag.errors import ConfigError, ProviderError

__all__ = ["LogitScorer"]

# Placeholders cut out of the rendered prompt: the template's own text is tokenised with
# special tokens on, the question and the passage with them off, so a passage containing
# "<|im_end|>" stays text and cannot close the turn.
_Q, _P = "\x00QUESTION\x00", "\x00PASSAGE\x00"
# The answer words as a model may start its reply; each that is one token in the vocabulary
# counts, so a model answering "Yes" is read as well as one answering " yes".
_YES = ("yes", "Yes", "YES", " yes", " Yes", " YES")
_NO = ("no", "No", "NO", " no", " No", " NO")


def _logsumexp(values: np.ndarray) -> float:
    top = float(values.max())
    return top + math.log(float(np.exp(values - top).sum()))


class LogitScorer:
    """Scores passages for a question with a shared llama.cpp model (``LocalLlamaChat.native()``).

    ``user_text(question, passage)`` is the instruction as the user turn; instruct models get it
    through the GGUF's chat template, base models as a plain prompt ending in ``Answer:``.
    """

    def __init__(self, llama: Any, lock: Any, model_name: str, user_text: Any, *, chat: bool,
                 max_passage_tokens: int, reuse_prefix: bool = True):
        self.llama, self.lock, self.model_name = llama, lock, model_name
        self.max_passage_tokens = max_passage_tokens
        self.reuse_prefix = reuse_prefix
        self.evaluated = 0  # tokens run through the model, for the prefix-reuse measurement
        self.prompted = 0  # tokens in the prompts, reused or not
        self._yes, self._no = self._answer_ids(_YES), self._answer_ids(_NO)
        if not self._yes or not self._no:
            raise ConfigError(
                f"the local model {model_name} has no single token for 'yes' or 'no', so its logprobs cannot "
                f"score passages; set rerank.scoring: grade (the model's written 0-3 reply) or choose another "
                f"rerank.llm")
        text = user_text(_Q, _P)
        template = llama.metadata.get("tokenizer.chat_template") if chat else None
        if template:
            from llama_cpp.llama_chat_format import Jinja2ChatFormatter

            eos, bos = llama.token_eos(), llama.token_bos()
            fmt = Jinja2ChatFormatter(template=template,
                                      eos_token=llama._model.token_get_text(eos) if eos != -1 else "",
                                      bos_token=llama._model.token_get_text(bos) if bos != -1 else "")
            rendered = fmt(messages=[{"role": "user", "content": text}]).prompt
        else:
            # a base model continues the text: the next token after "Answer:" is the verdict
            rendered = f"{text}\nAnswer:"
        head, rest = rendered.split(_Q, 1)
        middle, tail = rest.split(_P, 1)
        # BPE vocabularies hold " word" as one token: the space before the question and the
        # passage goes with them, as it would in the prompt tokenised whole
        self._q_space, self._p_space = head.endswith(" "), middle.endswith(" ")
        head, middle = head.removesuffix(" "), middle.removesuffix(" ")
        bos_text = llama._model.token_get_text(llama.token_bos()) if llama.token_bos() != -1 else None
        # The template may write the BOS itself (gemma's does); add one only when it does not
        add_bos = bool(llama._model.add_bos_token()) and not (bos_text and head.startswith(bos_text))
        self._head = self._tok(head, special=True, bos=add_bos)
        self._middle = self._tok(middle, special=True)
        self._tail = self._tok(tail, special=True)

    def _tok(self, text: str, *, special: bool = False, bos: bool = False) -> list[int]:
        return list(self.llama.tokenize(text.encode("utf-8"), add_bos=bos, special=special)) if text else []

    def _answer_ids(self, words: Sequence[str]) -> list[int]:
        ids = {t[0] for w in words if len(t := self._tok(w)) == 1}
        return sorted(ids)

    def passage_tokens(self, passage: str) -> list[int]:
        """The passage's tokens, cut to ``max_passage_tokens``: the bound on each candidate's cost."""
        return self._tok(" " * self._p_space + passage)[: self.max_passage_tokens]

    def question_tokens(self, question: str) -> list[int]:
        return self._tok(" " * self._q_space + question)

    def prompt_tokens(self, question: str, passage: str) -> list[int]:
        return [*self._head, *self.question_tokens(question), *self._middle, *self.passage_tokens(passage),
                *self._tail]

    def _eval(self, tokens: list[int]) -> None:
        """Evaluate ``tokens``, re-running only what differs from the context's previous prompt."""
        llama = self.llama
        if len(tokens) > llama.n_ctx():
            raise ProviderError(
                f"a rerank prompt has {len(tokens)} tokens, over the local model's context of {llama.n_ctx()}; "
                f"lower rerank.max_passage_tokens or raise rerank.llm.n_ctx (or shorten the question)")
        keep = 0
        if self.reuse_prefix and llama.n_tokens:
            prev = np.asarray(llama.input_ids[: llama.n_tokens])
            n = min(len(prev), len(tokens))
            diff = np.nonzero(prev[:n] != np.asarray(tokens[:n]))[0]
            keep = int(diff[0]) if len(diff) else n
            # at least the last token runs again: its logits are the ones read
            keep = min(keep, len(tokens) - 1)
            # a recurrent model cannot drop the end of its memory: start over
            if keep and not llama._ctx.kv_cache_seq_rm(-1, keep, -1):
                keep = 0
        if not keep:
            llama.reset()
        llama.n_tokens = keep
        llama.eval(tokens[keep:])
        self.evaluated += len(tokens) - keep
        self.prompted += len(tokens)

    def score(self, question: str, passages: Sequence[str]) -> list[float]:
        import llama_cpp

        q = self.question_tokens(question)
        prompts = [[*self._head, *q, *self._middle, *self.passage_tokens(p), *self._tail] for p in passages]
        out = []
        with self.lock:  # the native context is shared process-wide (loaded.shared_model)
            for tokens in prompts:
                self._eval(tokens)
                # eval keeps no logits unless logits_all (n_ctx x n_vocab floats): read the last row
                ptr = llama_cpp.llama_get_logits_ith(self.llama.ctx, -1)
                logits = np.ctypeslib.as_array(ptr, shape=(self.llama.n_vocab(),))
                # the softmax's normaliser cancels in the difference of the two log-probabilities
                out.append(_logsumexp(logits[self._yes]) - _logsumexp(logits[self._no]))
        return out
