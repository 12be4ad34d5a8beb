"""Vendors' native citations, mapped onto xlrag's ``<docN>`` citation model.

* Cohere (v2 chat with ``documents=``): ``AIMessage.additional_kwargs["citations"]``
  holds SDK ``Citation`` objects with a character span (``start``/``end``/``text``)
  and ``sources[i].id``, the passage id we sent.
* Anthropic (messages with ``document`` blocks, citations enabled): text content
  blocks carry ``citations`` of ``char_location`` dicts with ``document_index``, the
  position of the document block we sent (= the ``<docN>`` number).

Both become ``Citation(source="vendor")`` with the cited span as ``text``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from xlrag.schema import Citation, Hit

__all__ = ["anthropic_citations", "anthropic_documents", "cohere_citations", "cohere_documents"]


def _get(obj: Any, name: str, default: Any = None) -> Any:
    return obj.get(name, default) if isinstance(obj, dict) else getattr(obj, name, default)


def cohere_documents(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    return [{"id": h.id, "data": {"title": h.passage.title or "", "text": h.passage.text, "lang": h.lang}}
            for h in hits]


def anthropic_documents(hits: Sequence[Hit]) -> list[dict[str, Any]]:
    return [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": h.passage.text},
             "title": h.passage.title or h.doc_id, "citations": {"enabled": True}} for h in hits]


def _citation(n: int, hits: Sequence[Hit], span: str | None) -> Citation:
    if 0 <= n < len(hits):
        h = hits[n]
        return Citation(marker=n, passage_id=h.id, doc_id=h.doc_id, lang=h.lang, valid=True, source="vendor", text=span)
    return Citation(marker=n, valid=False, source="vendor", text=span)


def cohere_citations(message: Any, hits: Sequence[Hit]) -> list[Citation]:
    """Cohere's citation spans: ``sources[i].id`` is the passage id we sent."""
    out: list[Citation] = []
    kwargs = getattr(message, "additional_kwargs", None) or {}
    position = {h.id: i for i, h in enumerate(hits)}
    for c in kwargs.get("citations") or []:
        for src in _get(c, "sources", None) or []:
            sid = _get(src, "id")
            if sid is None:
                continue
            n = position.get(str(sid), -1)
            out.append(_citation(n, hits, _get(c, "text")) if n >= 0 else
                       Citation(marker=-1, valid=False, source="vendor", text=_get(c, "text")))
    return out


def anthropic_citations(message: Any, hits: Sequence[Hit]) -> list[Citation]:
    """Anthropic's ``char_location`` citations: ``document_index`` is the <docN> number."""
    out: list[Citation] = []
    content = getattr(message, "content", None)
    if isinstance(content, list):
        for block in content:
            for c in (_get(block, "citations", None) or []) if isinstance(block, dict) else []:
                idx = _get(c, "document_index")
                if idx is not None:
                    out.append(_citation(int(idx), hits, _get(c, "cited_text")))
    return out
