"""From parsed model output to validated citations.

``<docN>`` markers are resolved against the passages the model was shown. When the
model gives no usable citation (tiny models often don't), each answer sentence is
attributed post hoc to its most similar passage by embedding similarity; those
citations are marked ``source="post_hoc"`` so they are never passed off as the
model's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from xlrag.chains.parsing import sentences_with_markers, strip_markers
from xlrag.indexes.embedders import Embedder
from xlrag.indexes.store import LanguageStores
from xlrag.schema import Citation, Hit

__all__ = ["PostHocCiter", "resolve_markers"]


def resolve_markers(markers: Iterable[int], hits: Sequence[Hit], text: str | None = None,
                    source: str = "model") -> list[Citation]:
    """One citation per distinct marker; markers beyond the shown passages are flagged invalid."""
    out: list[Citation] = []
    seen: set[int] = set()
    for n in markers:
        if n in seen:
            continue
        seen.add(n)
        if 0 <= n < len(hits):
            h = hits[n]
            out.append(Citation(marker=n, passage_id=h.id, doc_id=h.doc_id, lang=h.lang, valid=True,
                                source=source, text=text))
        else:
            out.append(Citation(marker=n, valid=False, source=source, text=text))
    return out


class PostHocCiter:
    """Cite for each answer sentence the passage it is closest to (a citer, not an attributor:
    it cites by similarity; *attribution* in xlrag is an LLM's judgement, :mod:`xlrag.checks.attribution`).

    A sentence is embedded in E5's query role and compared with the stored passage
    vectors (read back from the index, not re-embedded). A sentence gets a citation
    only if its best passage clears ``min_score``; E5 cosines are compressed into
    roughly 0.7-0.9, so the default keeps only clearly related pairs.
    """

    def __init__(self, embedder: Embedder, stores: LanguageStores | None = None, min_score: float = 0.80):
        self.embedder = embedder
        self.stores = stores
        self.min_score = min_score

    def _passage_vectors(self, hits: Sequence[Hit]) -> np.ndarray:
        vecs: dict[str, np.ndarray] = {}
        if self.stores is not None:
            for store in {h.store for h in hits}:
                vecs.update(self.stores.get_embeddings(store, [h.id for h in hits if h.store == store]))
        missing = [h for h in hits if h.id not in vecs]
        if missing:
            for h, v in zip(missing, self.embedder.embed([h.passage.text for h in missing], "passage"), strict=True):
                vecs[h.id] = v
        return np.vstack([vecs[h.id] for h in hits])

    def cite(self, text: str, hits: Sequence[Hit]) -> list[Citation]:
        """A ``post_hoc`` citation for each sentence of ``text`` whose closest passage clears ``min_score``."""
        sentences = [strip_markers(s).strip() for s, _ in sentences_with_markers(text)]
        sentences = [s for s in sentences if len(s) >= 3]
        if not sentences or not hits:
            return []
        sims = self.embedder.embed(sentences, "query") @ self._passage_vectors(hits).T
        out: list[Citation] = []
        for sentence, row in zip(sentences, sims, strict=True):
            best = int(np.argmax(row))
            if row[best] >= self.min_score:
                h = hits[best]
                out.append(Citation(marker=best, passage_id=h.id, doc_id=h.doc_id, lang=h.lang, valid=True,
                                    source="post_hoc", text=sentence, score=float(row[best])))
        return out
