"""The citation format: "Cited Documents / Answer / Explanation" with <docN> markers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from xlrag.chains.parsing.common import (
    _CLOSERS,
    _STOP_LINE_RE,
    SENTENCE_FINAL,
    _cut_at_echo,
    _dedupe,
)
from xlrag.chains.parsing.names import _in_ranges
from xlrag.chains.parsing.results import CitationParse
from xlrag.chains.parsing.sentences import _first_sentence, sentences_with_markers
from xlrag.formats import (
    MARKER_DANGLING_RE,
    Section,
    find_markers,
    iter_markers,
    normalize_markers,
    strip_markers,
    words_pattern,
)
from xlrag.prompts.library import label_words

_SECTION_WORDS: dict[str, str] = {
    "cited": (
        r"cited\s+doc(?:ument)?s?|documents?\s+cited|docs\s+cited|citations?|cited\s+sources?|"
        r"sources?\s+cited|documentos\s+citados|цитируемые\s+документы|процитированные\s+документы|"
        r"引用(?:的)?文[档檔件書书]|المستندات\s+المذكورة|المستندات\s+المستشهد\s+بها"
    ),
    "answer": r"(?:final\s+)?(?:" + words_pattern(
        (*label_words("answer_label"), Section.ANSWER, Section.CHOICE, "option chosen", "selected option",
         "الجواب", "答え")
    ) + ")",
    "explanation": (
        r"explanation|reasoning|rationale|justification|explicación|explicação|spiegazione|"
        r"erklärung|объяснение|пояснение|пояснення|解释|解釋|説明|الشرح|التفسير|التوضيح|توضیح|"
        r"स्पष्टीकरण|คำอธิบาย|giải\s+thích|penjelasan|açıklama|설명"
    ),
}
_SECTION_GROUPS = "|".join(f"(?P<{kind}>{words})" for kind, words in _SECTION_WORDS.items())
_HEADER_LINE_RE = re.compile(
    r"^[ \t]*(?:(?:[#>*\-•+]|\d+[.)])[ \t]*)*(?:\*\*|__|\*)?[ \t]*"
    rf"(?:{_SECTION_GROUPS})"
    r"[ \t]*(?:\*\*|__|\*)?[ \t]*"
    r"(?:[:：][ \t]*(?:\*\*|__)?|[-–—](?=\s)|(?=[ \t]*$))",
    re.IGNORECASE | re.MULTILINE,
)
# Tiny models sometimes put several sections on one line; only the canonical English spelling
# with a colon is trusted mid-line, because "answer:" also occurs in ordinary prose.
_HEADER_INLINE_RE = re.compile(
    rf"(?<=\S)[ \t]+(?:\*\*)?(?:(?P<cited>{re.escape(Section.CITED)}|{re.escape(Section.CITED.capitalize())})"
    rf"|(?P<answer>{re.escape(Section.ANSWER)}|{re.escape(Section.CHOICE)})"
    rf"|(?P<explanation>{re.escape(Section.EXPLANATION)}))(?:\*\*)?:(?:\*\*)?"
)
_FENCE_RE = re.compile(r"^[ \t]*```[\w-]*[ \t]*$\n?", re.MULTILINE)
# what no finished answer line ends with: a list's separator, "and", an opened bracket or quote
# (a bracket opened and never closed anywhere in it is unfinished too)
_UNFINISHED_RE = re.compile(r"(?:[,;、，،&(\[{«“‘„]|\band)\s*$", re.IGNORECASE)
_LIST_LIKE_RE = re.compile(
    r"(?:[\s\d,;、，،&/+().\[\]<>#*_\-]|\b(?:and|y|et|e|und|и|和|及|و)\b)*", re.IGNORECASE
)


@dataclass(frozen=True)
class _Section:
    kind: str
    start: int  # of the header
    value_start: int
    value_end: int


def _find_sections(text: str) -> list[_Section]:
    heads: dict[int, tuple[str, int]] = {}
    for regex in (_HEADER_LINE_RE, _HEADER_INLINE_RE):
        for m in regex.finditer(text):
            kind = m.lastgroup
            if kind is None:
                continue
            start = m.start() if regex is _HEADER_LINE_RE else m.start(kind)
            if not any(start <= s < m.end() or s <= start < heads[s][1] for s in heads):
                heads[start] = (kind, m.end())
    ordered = sorted(heads.items())
    sections: list[_Section] = []
    for i, (start, (kind, value_start)) in enumerate(ordered):
        value_end = ordered[i + 1][0] if i + 1 < len(ordered) else len(text)
        sections.append(_Section(kind, start, value_start, value_end))
    return sections


def opens_with_section(text: str) -> bool:
    """Whether ``text`` starts with a section header, in any spelling the parser knows (a
    model that skipped the cited-documents line and wrote "الإجابة:" first)."""
    sections = _find_sections(text)
    return bool(sections) and not text[: sections[0].start].strip()


def _cited_numbers(value: str) -> list[int]:
    markers = iter_markers(value)
    found = [(m.start, n) for m in markers for n in m.numbers]
    remainder = list(value)
    for m in markers:
        remainder[m.start : m.end] = " " * (m.end - m.start)
    rest = "".join(remainder)
    # "Cited Documents: 0, 2" is a list of documents; "in 1990" in a sentence is not.
    if _LIST_LIKE_RE.fullmatch(rest):
        found.extend((d.start(), int(d.group(0))) for d in re.finditer(r"\d+", rest))
    return _dedupe(n for _, n in sorted(found))


def _tidy_block(text: str) -> str:
    s = re.sub(r"[ \t]+", " ", text)
    s = re.sub(r" *\n *", "\n", s)
    s = re.sub(r"\n{3,}", "\n\n", s)
    return s.strip().strip("*_").strip()


# a list item: a bullet, or a number (any script's digits) and a point or bracket
_LIST_ITEM_RE = re.compile(r"^[ \t]*(?:[-*•·‣]|\(?\d{1,3}[.)、])[ \t]+")
_INTRODUCES = (":", "：")


def _answer_block(value: str) -> str:
    """The answer section's first paragraph (a base model rambles on after its answer), and,
    when that paragraph introduces a list ("the holidays are:"), the list paragraphs after it:
    the answer is the list, and the intro alone says nothing."""
    paragraphs = re.split(r"\n[ \t]*\n", value.strip())
    if not paragraphs[0].rstrip().endswith(_INTRODUCES):
        return paragraphs[0]
    items = []
    for paragraph in paragraphs[1:]:
        if not _LIST_ITEM_RE.match(paragraph):
            break
        items.append(paragraph.strip())
    return "\n".join([paragraphs[0].rstrip(), *items])


def _ends_complete(value: str) -> bool:
    """Whether a section's text ends the way a finished sentence or list does."""
    s = value.rstrip().rstrip(_CLOSERS + " \t\n")
    if not s:
        return True
    markers = iter_markers(s)
    if markers and markers[-1].end == len(s):
        return True  # "... is Spanish <doc0>", "... (see <doc0>)"
    last = s[-1]
    if last in SENTENCE_FINAL:
        return True
    # Thai, Lao, Khmer, Myanmar do not end sentences with punctuation: cannot tell.
    return _in_ranges(last, ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1780, 0x17FF)))


def parse_citation(
    output: str,
    n_docs: int,
    answer_header: Literal[Section.ANSWER, Section.CHOICE] | str = Section.ANSWER,
) -> CitationParse:
    """Read a reply in the "Cited Documents / Answer / Explanation" format.

    Sections are found by header wherever a line starts with one (any case, markdown, a few
    translated spellings); the first block holding all three sections wins when the reply
    repeats itself, and an echoed next question or chat turn token ends the reply.
    """
    if n_docs < 0:
        raise ValueError("n_docs must be >= 0")
    answer_name = answer_header.rstrip(":").strip()
    expected = {"cited": Section.CITED.value, "answer": answer_name, "explanation": Section.EXPLANATION.value}
    text = (output or "").replace("\r\n", "\n")
    # Chat models like to wrap the whole reply in a code fence.
    text = _FENCE_RE.sub("", text)
    text, echo_cut = _cut_at_echo(text)

    truncated = False
    dangling = MARKER_DANGLING_RE.search(text.rstrip())
    if dangling and not echo_cut:
        truncated = True
        text = text[: dangling.start()]

    sections = _find_sections(text)
    # A header seen again starts the next block: the model is repeating itself or answering a
    # question it made up. The first complete block wins, else the first block.
    blocks: list[list[_Section]] = []
    for section in sections:
        if not blocks or any(s.kind == section.kind for s in blocks[-1]):
            blocks.append([])
        blocks[-1].append(section)
    chosen = next((b for b in blocks if len(b) == len(expected)), blocks[0] if blocks else [])
    chosen_first = not blocks or chosen is blocks[0]
    block_end = len(text)
    if chosen:
        later = [s.start for s in sections if s.start > chosen[-1].start]
        if later:
            block_end = min(later)
        chosen = [
            _Section(s.kind, s.start, s.value_start, min(s.value_end, block_end)) for s in chosen
        ]
    by_kind = {s.kind: s for s in chosen}
    reaches_end = not echo_cut and block_end == len(text)

    def value(kind: str) -> str:
        s = by_kind.get(kind)
        return text[s.value_start : s.value_end] if s else ""

    cited: list[int] = _cited_numbers(value("cited")) if "cited" in by_kind else []
    inline_spans: list[tuple[int, int]] = [
        (by_kind[k].value_start, by_kind[k].value_end) for k in ("answer", "explanation")
        if k in by_kind
    ]

    header_answer: str | None = None
    if "answer" in by_kind:
        # its markers still count as inline citations
        header_answer = strip_markers(_answer_block(value("answer"))) or None
    answer = header_answer
    first_header = chosen[0].start if chosen else len(text)
    # Text before the first header, minus an echoed "Question: ..." line at the very start.
    preamble = ""
    if chosen_first:
        lines = text[:first_header].split("\n")
        preamble = "\n".join(line for line in lines if not _STOP_LINE_RE.match(line))
    if answer is None and preamble.strip():
        # No Answer header: a base model often just starts with the answer.
        answer = _first_sentence(preamble)
        if answer:
            inline_spans.insert(0, (0, first_header))

    explanation: str | None = None
    if "explanation" in by_kind:
        explanation = _tidy_block(normalize_markers(value("explanation"))) or None

    inline = _dedupe(
        n for start, end in sorted(inline_spans) for n in find_markers(text[start:end])
    )
    invalid = _dedupe(n for n in [*cited, *inline] if n < 0 or n >= n_docs)

    missing: list[str] = []
    if "cited" not in by_kind:
        missing.append(expected["cited"])
    if header_answer is None:
        missing.append(expected["answer"])
    if explanation is None:
        missing.append(expected["explanation"])

    if chosen and reaches_end and not truncated:
        last = max(chosen, key=lambda s: s.value_start)
        tail = text[last.value_start : last.value_end]
        if last.kind == "cited":
            truncated = bool(re.search(r"(?:[,;、，،&]|\band)\s*$", tail.strip(), re.IGNORECASE))
        else:
            # An empty last section means the reply stopped right after writing its header.
            truncated = not tail.strip() or not _ends_complete(tail)
    elif not chosen and reaches_end and not truncated:
        spans = [s for s in sentences_with_markers(text) if s[0]]
        truncated = len(spans) > 1 and not _ends_complete(text)

    # the answer line itself unfinished: the reply ends inside it, on what no finished answer ends
    # with (a short answer with no full stop, "Nicholas E. Golovin", is finished)
    answer_cut = False
    if "answer" in by_kind and reaches_end and max(chosen, key=lambda s: s.value_start).kind == "answer":
        tail = value("answer").strip()
        opened = any(tail.count(a) > tail.count(b) for a, b in ("()", "[]", "{}", "«»", "“”", "（）"))
        answer_cut = bool(dangling and not echo_cut) or not tail or opened or bool(_UNFINISHED_RE.search(tail))

    if answer is None and explanation is None and not cited and not inline:
        status: Literal["ok", "partial", "unparseable"] = "unparseable"
    elif missing or truncated:
        status = "partial"
    else:
        status = "ok"
    return CitationParse(
        cited=cited,
        inline=inline,
        answer=answer,
        explanation=explanation,
        invalid=invalid,
        truncated=truncated,
        answer_cut=answer_cut,
        missing=missing,
        status=status,
    )
