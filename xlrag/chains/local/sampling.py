"""Greedy sampling under a grammar that checks the grammar only when it must.

llama-cpp-python puts the grammar in the sampler chain before the choice, so at every step it
decodes and matches each of the vocabulary's tokens (151,936 for qwen2.5) against the grammar:
about as long per answer as pinned prefixes save (benchmarks/answers.py, #33's ``form`` arm).
llama.cpp's own sampler (common/sampling.cpp) chooses first and asks the grammar about the
chosen token alone, applying the grammar to the whole vocabulary only when that token is
rejected. Under greedy choice the two give the same token: the highest-scoring token, if the
grammar allows it, is also the highest-scoring allowed one. So this is used only at temperature 0,
where it is exact; a sampled choice keeps llama-cpp-python's chain.
"""

from __future__ import annotations

import ctypes
from typing import Any

from xlrag.errors import ConfigError

__all__ = ["GrammarLast"]


class GrammarLast:
    """Stands in for llama-cpp-python's ``LlamaSampler`` (``sample`` and ``accept``) in a
    generation: ``chain`` is that generation's sampler built without the grammar (penalties, then
    greedy), ``grammar`` a compiled ``LlamaGrammar``. ``rejected`` counts the steps whose first
    choice the grammar refused (each then paid a whole-vocabulary pass)."""

    def __init__(self, llama: Any, chain: Any, grammar: Any):
        import llama_cpp
        import numpy as np

        self._lib, self._chain = llama_cpp, chain
        self._grammar = llama_cpp.llama_sampler_init_grammar(
            llama._model.vocab, grammar._grammar.encode("utf-8"), grammar._root.encode("utf-8"))
        if not self._grammar:
            raise ConfigError("llama.cpp could not build a sampler for the answer grammar; "
                              "set llm.grammar: false")
        n = llama._n_vocab
        self._n = n
        self._data = (llama_cpp.llama_token_data * n)()
        self._view = np.ctypeslib.as_array(self._data)  # a structured view: id, logit, p
        self._ids = np.arange(n, dtype=np.int32)
        self._one = llama_cpp.llama_token_data()
        self.rejected = 0

    def _candidates(self, ctx: Any, idx: int) -> Any:
        import numpy as np

        logits = self._lib.llama_get_logits_ith(ctx.ctx, idx)
        self._view["id"] = self._ids
        self._view["logit"] = np.ctypeslib.as_array(logits, shape=(self._n,))
        self._view["p"] = 0.0
        return self._lib.llama_token_data_array(
            data=ctypes.cast(self._data, self._lib.llama_token_data_p), size=self._n, selected=-1,
            sorted=False)

    def _allows(self, token: int) -> bool:
        # a ctypes int field takes and gives a Python int; llama_cpp annotates it as c_int32
        self._one.id, self._one.logit, self._one.p = token, 1.0, 0.0  # type: ignore[assignment]
        single = self._lib.llama_token_data_array(
            data=ctypes.pointer(self._one), size=1, selected=-1, sorted=False)
        self._lib.llama_sampler_apply(self._grammar, ctypes.byref(single))
        return self._one.logit != float("-inf")

    def sample(self, ctx: Any, idx: int = -1) -> int:
        cur = self._candidates(ctx, idx)
        self._lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(cur))
        token = int(self._data[cur.selected].id)
        if not self._allows(token):
            self.rejected += 1
            cur = self._candidates(ctx, idx)
            self._lib.llama_sampler_apply(self._grammar, ctypes.byref(cur))
            self._lib.llama_sampler_apply(self._chain.sampler, ctypes.byref(cur))
            token = int(self._data[cur.selected].id)
        self.accept(token)
        return token

    def accept(self, token: int) -> None:
        self._lib.llama_sampler_accept(self._grammar, token)
        self._chain.accept(token)

    def reset(self) -> None:
        self._lib.llama_sampler_reset(self._grammar)
        self._chain.reset()

    def close(self) -> None:
        if getattr(self, "_grammar", None):  # None also when __init__ failed before making it
            self._lib.llama_sampler_free(self._grammar)
            self._grammar = None
        if getattr(self, "_chain", None) is not None:
            self._chain.close()

    def __del__(self) -> None:
        self.close()
