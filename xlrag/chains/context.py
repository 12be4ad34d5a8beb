"""Context selection: what of each shown passage the LLM reads, in what order, in which layout.

A small model reading five whole passages pays for every token in prompt time, and the
passages written from one template (Travel's country pages) bury the one line that answers.
:class:`ContextSelector` keeps, of each passage, its title and the segments (runs of whole
sentences) closest to the question by the retriever's own multilingual embedder, so the
scores are cross-lingual: an Arabic question picks the line of an English page. The passage
keeps its place and its ``<docN>`` number; the checks and the citations still read the whole
passage, so a citation resolves to it as before. ``benchmarks/answers.py`` measures it.

It is a :class:`~xlrag.indexes.postprocess.PassagePostprocessor` (``context`` in
``postprocess:``): what it keeps of a passage is the hit's ``shown_text``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from xlrag.chains.echo import strip_markup
from xlrag.chains.parsing.sentences import sentences_with_markers
from xlrag.config import ContextConfig, ContextOrder
from xlrag.formats import PromptLayout
from xlrag.indexes.splitting import passage_body
from xlrag.registry import register
from xlrag.schema import Hit, Query

if TYPE_CHECKING:
    from xlrag.config import XlragConfig
    from xlrag.indexes.embedders import Embedder

__all__ = ["ContextSelector", "segments_of"]

# the settings' defaults are ContextConfig's: the selector built without a config agrees with it
_DEFAULTS = {name: field.default for name, field in ContextConfig.model_fields.items()}

GAP = "…"  # stands where left-out text was, so the model does not read two segments as one


def segments_of(text: str, max_chars: int) -> list[str]:
    """``text`` as runs of whole sentences of up to ``max_chars`` characters (a longer sentence
    is a run of its own), markup dropped: a bullet list's short lines travel together, so a
    heading stays with the numbers under it."""
    out: list[str] = []
    run: list[str] = []
    size = 0
    for sentence, _ in sentences_with_markers(text):
        sentence = strip_markup(sentence)
        if not sentence:
            continue
        if run and size + len(sentence) + 1 > max_chars:
            out.append("\n".join(run))
            run, size = [], 0
        run.append(sentence)
        size += len(sentence) + 1
    if run:
        out.append("\n".join(run))
    return out


class ContextSelector:
    """Each hit's text cut to its title and its ``segments`` best segments, in text order
    (``segments=None``: whole passages, only the order applies); ``layout`` is the prompt's
    (:meth:`PromptLibrary.build_messages <xlrag.prompts.PromptLibrary.build_messages>`).

    Segment vectors are kept in a bounded cache (``cache_size`` segments): a chat, the agent's
    repairs and the perspectives view show the same passages again.
    """

    name = "context"
    chooses = False

    def __init__(self, embedder: Embedder | None = None, *, segments: int | None = None,
                 segment_chars: int = _DEFAULTS["segment_chars"], order: ContextOrder = _DEFAULTS["order"],
                 layout: PromptLayout = _DEFAULTS["layout"], cache_size: int = 4096):
        if segments is not None and embedder is None:
            raise ValueError("ContextSelector needs an embedder to choose segments")
        self.embedder = embedder
        self.segments, self.segment_chars, self.order, self.layout = segments, segment_chars, order, layout
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    @classmethod
    def from_config(cls, config: ContextConfig, embedder: Embedder | None) -> ContextSelector:
        """The selector ``context:`` describes."""
        segments = config.segments if config.select == "segments" else None
        return cls(embedder, segments=segments, segment_chars=config.segment_chars, order=config.order,
                   layout=config.layout)

    def postprocess(self, hits: list[Hit], query: Query, k: int) -> list[Hit]:
        """``hits`` in the order shown, each with what the model reads of it (``shown_text``)."""
        shown = self.ordered(hits)
        if self.segments is None or self.embedder is None:
            return shown
        return [h.model_copy(update={"shown_text": text})
                for h, text in zip(shown, self.shown(query.question, shown), strict=True)]

    def ordered(self, hits: Iterable[Hit]) -> list[Hit]:
        """The hits in the order shown: the retriever's (best first), or reversed, so the best
        passage is read last, nearest the question."""
        shown = list(hits)
        return shown if self.order == "best_first" else shown[::-1]

    def _embed(self, texts: list[str]) -> np.ndarray:
        assert self.embedder is not None  # noqa: S101  (shown() checks)
        todo = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if todo:
            for t, v in zip(todo, self.embedder.embed(todo, "passage"), strict=True):
                self._vectors[t] = v / (np.linalg.norm(v) or 1.0)
        for t in texts:
            self._vectors.move_to_end(t)
        while len(self._vectors) > self._cache_size:
            self._vectors.popitem(last=False)
        return np.vstack([self._vectors[t] for t in texts]) if texts else np.zeros((0, 1), dtype=np.float32)

    def shown(self, question: str, hits: Sequence[Hit]) -> list[str]:
        """The text shown for each of ``hits``, in their order."""
        if self.segments is None or self.embedder is None:
            return [h.passage.text for h in hits]
        parts = [segments_of(passage_body(h.passage), self.segment_chars) for h in hits]
        flat = [s for p in parts for s in p]
        if not flat:
            return [h.passage.text for h in hits]
        q = self.embedder.embed([question], "query")[0]
        scores = self._embed(flat) @ (q / (np.linalg.norm(q) or 1.0))
        out, i = [], 0
        for hit, segs in zip(hits, parts, strict=True):
            mine = scores[i : i + len(segs)]
            i += len(segs)
            if len(segs) <= self.segments:
                kept = list(range(len(segs)))
            else:
                kept = sorted(np.argsort(-mine, kind="stable")[: self.segments].tolist())
            lines = [hit.passage.title] if hit.passage.title else []
            prev = -1
            for j in kept:
                if j != prev + 1:
                    lines.append(GAP)
                lines.append(segs[j])
                prev = j
            if prev != len(segs) - 1:
                lines.append(GAP)
            out.append("\n".join(lines))
        return out


@register("postprocessor", "context")
def _context_step(config: XlragConfig, embedder: Embedder | None) -> ContextSelector:
    return ContextSelector.from_config(config.context, embedder)
