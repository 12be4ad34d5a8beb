"""Parse LLM replies in the two BordIRlines answer formats.

* multiple choice: the model is asked for the letter of one option ("A) Spain\\nB) ...");
* citation format: "Cited Documents: <doc0>, <doc2>" / "Answer: ..." (or "Chosen Option: ...")
  / "Explanation: ... <doc0> ...".

The replies come from tiny base models as well as vendor chat models, so the parsers are
deliberately forgiving about layout (case, markdown, marker spelling, truncation, echoed
prompts) and deliberately strict about meaning: `parse_mc` never guesses between two options
with equal standing, and `parse_citation` only counts document numbers written as document
markers, never bare numbers in prose.

Everything here is pure string processing: no model calls, no I/O.
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, Field

from xlrag.formats import Section, label_words, words_pattern

__all__ = [
    "CitationParse",
    "MCParse",
    "find_markers",
    "normalize_markers",
    "parse_citation",
    "parse_mc",
    "sentences_with_markers",
    "strip_markers",
]


# ---------------------------------------------------------------------------
# Result models
# ---------------------------------------------------------------------------


class MCParse(BaseModel):
    """Outcome of reading a multiple-choice reply."""

    index: int | None = None
    option: str | None = None
    status: Literal["ok", "unparseable", "ambiguous"]
    # How the choice was recognised: "header-letter", "header-name", "header-alias",
    # "letter", "name" or "alias". None unless status == "ok".
    method: str | None = None
    reason: str | None = None


class CitationParse(BaseModel):
    """Outcome of reading a reply in the Cited Documents / Answer / Explanation format.

    `cited` and `inline` keep out-of-range numbers (they are also listed in `invalid`) so that
    citation metrics can penalise them instead of silently dropping them.
    """

    cited: list[int] = Field(default_factory=list)
    inline: list[int] = Field(default_factory=list)
    answer: str | None = None
    explanation: str | None = None
    invalid: list[int] = Field(default_factory=list)
    truncated: bool = False
    missing: list[str] = Field(default_factory=list)
    status: Literal["ok", "partial", "unparseable"]


# ---------------------------------------------------------------------------
# Shared text helpers
# ---------------------------------------------------------------------------

# Sentence terminators. The "spaced" ones only end a sentence before whitespace (so "3.5",
# "U.S.A" and URLs survive); the others end a sentence wherever they occur because the
# scripts that use them (CJK, Arabic, Devanagari, Urdu) do not put spaces after them.
_TERM_SPACED = ".!?…"
_TERM_CLOSED = "。！？؟।॥۔"
_SENTENCE_FINAL = frozenset(_TERM_SPACED + _TERM_CLOSED)
# Characters that may trail a terminator and still belong to the sentence.
_CLOSERS = "\"'”’»)]}）」』】*_"

# Prompt labels (see xlrag/prompts/*.yaml) plus common chat-template turn tokens. A line that
# starts with one of these after the reply has begun means the model is writing the next
# prompt, so parsing stops there.
# The prompt-file labels come from the prompt library itself (one owner: xlrag.formats); the
# rest are chat-template roles and spellings no shipped prompt uses but models write.
_QUESTION_LABELS = (
    words_pattern((*label_words("question_label"), *label_words("documents_label")))
    + r"|query|q|user|human|instructions?|context|input|options?|passages?|問題"
)
_STOP_LINE_RE = re.compile(
    rf"^[ \t]*(?:\*\*|__|#+[ \t]*)?(?:{_QUESTION_LABELS})[ \t]*\d*[ \t]*(?:\*\*|__)?[ \t]*[:：]",
    re.IGNORECASE | re.MULTILINE,
)
_TURN_TOKEN_RE = re.compile(
    r"<end_of_turn>|<start_of_turn>|<\|im_end\|>|<\|im_start\|>|<\|endoftext\|>|<\|eot_id\|>"
    r"|<\|end\|>|</s>|<eos>"
)


def _is_word(ch: str) -> bool:
    # Letters, digits and combining marks: Devanagari vowel signs are marks, and must not
    # count as a word boundary inside "भारतीय".
    return ch == "_" or unicodedata.category(ch)[0] in "LNM"


def _dedupe(items: Iterable[int]) -> list[int]:
    seen: set[int] = set()
    out: list[int] = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def _cut_at_echo(text: str) -> tuple[str, bool]:
    """Drop everything from a chat turn token or an echoed prompt line onwards.

    A prompt label only counts once the reply has started (some base models open by echoing
    the current question, which the callers handle themselves).
    """
    cut = len(text)
    turn = _TURN_TOKEN_RE.search(text)
    if turn:
        cut = turn.start()
    first = len(text) - len(text.lstrip())
    for m in _STOP_LINE_RE.finditer(text, first + 1, cut):
        if text[first : m.start()].strip():
            cut = m.start()
            break
    return text[:cut], cut < len(text)


# ---------------------------------------------------------------------------
# Document markers
# ---------------------------------------------------------------------------

_OPEN = "[<＜〈\\[［]"
_CLOSE = "[>＞〉\\]］]"
_KW = "(?:doc(?:ument(?:os|o|s)?|s)?|документ(?:ами|ах|ов|ы|а|е|у)?)"
_NUM_SEP = "[ \\t]*[_#\\-]?[ \\t]*"
_LIST_SEP = "[ \\t]*[,;、，،/&][ \\t]*"
_MARKER_RE = re.compile(
    # "<doc0, doc2>" / "[doc0; 2]": one bracket around several numbers.
    f"(?P<list>{_OPEN}[ \\t]*{_KW}{_NUM_SEP}\\d+(?:{_LIST_SEP}(?:{_KW}{_NUM_SEP})?\\d+)+[ \\t]*{_CLOSE})"
    # "<doc0>", "<doc 1>", "[doc1]", "<Doc1>", "＜doc１＞".
    f"|(?P<wrapped>{_OPEN}[ \\t]*{_KW}{_NUM_SEP}\\d+[ \\t]*{_CLOSE})"
    # "documents 0 and 2", "docs 1, 3".
    "|(?P<plural>(?<![^\\W_])(?:documentos|documents|docs|документы|документах|документов)[ \\t]+\\d+"
    "(?:[ \\t]*(?:,|、|،|&|and|or|y|e|o|и|или)[ \\t]*\\d+)+(?!\\d))"
    # "doc1", "Doc 1", "document 1", and an unclosed "<doc1" in mid-text.
    f"|(?P<bare>(?:{_OPEN}[ \\t]*)?(?<![^\\W_]){_KW}{_NUM_SEP}\\d+(?!\\d))",
    re.IGNORECASE,
)
# An opening bracket or a half-written marker at the very end: generation stopped mid-marker.
_DANGLING_RE = re.compile(
    f"{_OPEN}[ \\t]*(?:d(?:o(?:c(?:u[a-z]*)?)?)?)?[ \\t]*\\d*[ \\t]*$", re.IGNORECASE
)


@dataclass(frozen=True)
class _Marker:
    start: int
    end: int
    numbers: tuple[int, ...]


def _iter_markers(text: str) -> list[_Marker]:
    found: list[_Marker] = []
    for m in _MARKER_RE.finditer(text):
        # Keywords contain no digits, so every digit run in the match is a document number.
        numbers = tuple(int(d) for d in re.findall(r"\d+", m.group(0)))
        found.append(_Marker(m.start(), m.end(), numbers))
    return found


def find_markers(text: str) -> list[int]:
    """Document numbers cited in `text`, in order of first appearance."""
    return _dedupe(n for marker in _iter_markers(text) for n in marker.numbers)


def _canonical(m: re.Match[str]) -> str:
    numbers = [int(d) for d in re.findall(r"\d+", m.group(0))]
    if m.lastgroup == "plural":
        # Keep the connectors ("and", ",") and turn each number into a marker.
        body = re.sub(r"^\S+[ \t]+", "", m.group(0))
        return re.sub(r"\d+", lambda d: f"<doc{int(d.group(0))}>", body)
    return ", ".join(f"<doc{n}>" for n in numbers)


def normalize_markers(text: str) -> str:
    """Rewrite every marker variant ("[doc1]", "Doc 1", "document 1", ...) as "<docN>"."""
    return _MARKER_RE.sub(_canonical, text)


def _tidy_line(text: str) -> str:
    """Collapse whitespace and clean up the punctuation that removing markers leaves behind."""
    s = re.sub(r"\*\*|__", "", text)
    s = re.sub(r"\s+", " ", s)
    s = re.sub(r"[(\[（［]\s*(?:[,;、，،]\s*)*[)\]）］]", "", s)  # "()" left by "(<doc0>)"
    s = re.sub(r"\s+([,.;:!?。，、！？؟،।॥۔)\]）])", r"\1", s)
    s = re.sub(r"[,;、，،]+(?=[.!?。！？؟।॥۔]|$)", "", s)  # "Spain,." left by "Spain <doc0>, <doc1>."
    s = re.sub(r"([,;、，،])[,;、，،]+", r"\1", s)
    s = re.sub(r"\s+", " ", s)
    return s.strip(" ,;、，،")


def strip_markers(text: str) -> str:
    """`text` without document markers, on one line, with whitespace tidied."""
    return _tidy_line(_MARKER_RE.sub(" ", text))


# ---------------------------------------------------------------------------
# Sentences
# ---------------------------------------------------------------------------

_ABBREVIATIONS = frozenset(
    {"e.g", "i.e", "etc", "cf", "vs", "mr", "mrs", "ms", "dr", "st", "no", "approx", "jr",
     "sr", "u.s", "u.k", "a.d", "b.c", "p.ej", "sra", "т.е", "т.к", "г", "гг"}
)


def _is_spaced_boundary(text: str, i: int, marker_starts: Mapping[int, _Marker]) -> bool:
    j = i + 1
    if j < len(text) and not (
        text[j].isspace() or text[j] in _CLOSERS or text[j] in _SENTENCE_FINAL
        or j in marker_starts
    ):
        return False  # "3.5", "U.S.A", "example.com"
    if text[i] != ".":
        return True
    word = re.search(r"([^\W\d_]+(?:\.[^\W\d_]+)*)$", text[max(0, i - 40) : i])
    if word and word.group(1).casefold() in _ABBREVIATIONS:
        return False
    line_start = text.rfind("\n", 0, i) + 1
    if re.fullmatch(r"[ \t>*\-•]*\d+", text[line_start:i]):
        return False  # "1." numbering a list item
    rest = text[j : j + 8].lstrip(" \t")
    # "e.g. the" / "approx. two": a lowercase continuation is not a new sentence.
    return not (rest[:1].isalpha() and rest[:1].islower() and rest[:1].isascii())


def _absorb_markers(text: str, end: int, marker_starts: Mapping[int, _Marker]) -> int:
    """Extend a sentence over markers written after its terminator.

    "Spain.<doc0> Next" and "Spain. <doc0>\\n" cite the finished sentence; in "Spain. <doc0>
    says ..." the marker is the subject of the next sentence and stays with it.
    """
    n = len(text)
    j = end
    while j in marker_starts:  # glued to the terminator
        j = marker_starts[j].end
    k = j
    saw = False
    while True:
        p = k
        while p < n and text[p] in " \t,;、，،":
            p += 1
        if p in marker_starts:
            k = marker_starts[p].end
            saw = True
            continue
        break
    if saw and (p >= n or text[p] == "\n" or text[p] in _SENTENCE_FINAL):
        j = p
        while j < n and (text[j] in _SENTENCE_FINAL or text[j] in _CLOSERS):
            j += 1
    return j


def _sentence_spans(text: str) -> list[tuple[int, int]]:
    markers = _iter_markers(text)
    marker_starts = {m.start: m for m in markers}
    spans: list[tuple[int, int]] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        if i in marker_starts:
            i = marker_starts[i].end
            continue
        ch = text[i]
        if ch == "\n":
            spans.append((start, i))
            start = i = i + 1
            continue
        if ch in _TERM_CLOSED or (ch in _TERM_SPACED and _is_spaced_boundary(text, i, marker_starts)):
            end = i + 1
            while end < n and (text[end] in _SENTENCE_FINAL or text[end] in _CLOSERS):
                end += 1
            end = _absorb_markers(text, end, marker_starts)
            spans.append((start, end))
            start = i = end
            continue
        i += 1
    spans.append((start, n))
    return spans


def sentences_with_markers(explanation: str) -> list[tuple[str, list[int]]]:
    """Split text into sentences, each with the document numbers it cites.

    Sentences end at . ! ? … 。 ！ ？ ؟ । ۔ and at line breaks; text without any (e.g. Thai) is
    one sentence. The returned sentence text has its markers removed, ready to be compared
    with document text; markers standing alone between sentences go to the sentence before.
    """
    result: list[tuple[str, list[int]]] = []
    pending: list[int] = []
    for s, e in _sentence_spans(explanation or ""):
        segment = explanation[s:e]
        numbers = find_markers(segment)
        clean = strip_markers(segment)
        if not any(_is_word(c) for c in clean):
            if result:
                text, prev = result[-1]
                result[-1] = (text, _dedupe([*prev, *numbers]))
            else:
                pending.extend(numbers)
            continue
        result.append((clean, _dedupe([*pending, *numbers])))
        pending = []
    return result


def _first_sentence(text: str) -> str | None:
    for line in text.splitlines():
        sentences = sentences_with_markers(line)
        if sentences:
            return sentences[0][0]
    return None


# ---------------------------------------------------------------------------
# Multiple choice
# ---------------------------------------------------------------------------

# Characters accepted as option labels, mapped to the Latin letter they stand for.
_LABELS: dict[str, str] = {c: c for c in string.ascii_uppercase}
_LABELS.update({c: c.upper() for c in string.ascii_lowercase})
_LABELS.update(
    {
        # Cyrillic capitals that look exactly like Latin ones (keyboard/tokeniser drift);
        # Б has no Latin twin but is unambiguously the second item of a Russian list.
        "А": "A", "В": "B", "С": "C", "Е": "E", "Б": "B", "а": "A", "с": "C", "е": "E",
        # Greek: Α Β Γ Δ Ε both look like and are ordered like A-E.
        "Α": "A", "Β": "B", "Γ": "C", "Δ": "D", "Ε": "E",
        "α": "A", "β": "B", "γ": "C", "δ": "D", "ε": "E",
        # Arabic and Hebrew lists are conventionally labelled in abjad order.
        "أ": "A", "ا": "A", "ب": "B", "ج": "C", "د": "D",
        "א": "A", "ב": "B", "ג": "C", "ד": "D",
    }
)
# Labels that may stand without a delimiter at the end of a reply ("... is ب"); lowercase
# Latin/Cyrillic/Greek letters are excluded because they are words ("a", "а", "с").
_STRONG_LABELS = "".join(c for c in _LABELS if not c.islower())
_L = "[" + "".join(re.escape(c) for c in _LABELS) + "]"
_LS = "[" + "".join(re.escape(c) for c in _STRONG_LABELS) + "]"

_OPEN_BRACKETS = "([（【"
_CLOSE_BRACKETS = ")]）】"
# Characters that may follow a label letter directly: "B)", "B.", "B:", "**B**", "B,".
_AFTER_LABEL = frozenset(")]）】.:：,،;!?*_\"”»。，！？、")

# Every answer label the prompts use, the English section names, and other spellings
# models write.
_ANSWER_WORDS_RE = words_pattern(
    (*label_words("answer_label"), Section.ANSWER, Section.CHOICE, "option chosen", "selected option",
     "correct option", "choice", "cevap", "الجواب", "答え", "정답", "תשובה", "απάντηση")
)
_MC_HEADER_RE = re.compile(
    rf"(?P<colon>(?<![^\W_])(?:(?:final|correct|my|the)\s+)?(?:{_ANSWER_WORDS_RE})(?:\*\*|\*|__)?\s*[:：])"
    r"|(?P<phrase>(?<![^\W_])(?:(?:the|my)\s+)?(?:(?:correct|right|final|best)\s+)?"
    r"(?:answer|option|choice)\s+(?:is|would\s+be|will\s+be)\s*[:：]?"
    r"|(?<![^\W_])i\s+(?:would\s+)?(?:choose|pick|select|go\s+with)\s*[:：]?"
    r"|(?<![^\W_])la\s+respuesta(?:\s+correcta)?\s+es\s*[:：]?"
    r"|(?<![^\W_])правильный\s+ответ\s*[:：\-—]?)",
    re.IGNORECASE,
)
_LEAD_DECOR_RE = re.compile(r"[\s*_#>`\"'“”«»„•\-–—:：]*")
_LEAD_WORD_RE = re.compile(
    r"(?:the\s+)?(?:correct\s+)?(?:option|choice|letter|opción|opcion|вариант|الخيار|选项|選項|選択肢)"
    r"\s*[:：#]?\s*",
    re.IGNORECASE,
)
_BRACKET_LETTER_RE = re.compile(rf"[(\[（【]\s*({_L})\s*[)\]）】]")
_CLOSE_LETTER_RE = re.compile(rf"(?<![^\W_])({_L})[)）]")
_OPTWORD_LETTER_RE = re.compile(
    r"(?<![^\W_])(?i:option|choice|letter|answer|opción|opcion|respuesta|вариант|ответ|الخيار|"
    rf"الإجابة|选项|選項|選択肢|答案)\s*(?i:is\s*)?[:：#]?\s*[(\[]?({_L})(?![^\W_])(?P<after>.?)"
)
_PAIR_LETTER_RE = re.compile(
    rf"(?<![^\W_])({_LS})\s*(?:,|&|/|(?i:and|or|nor|y|o|и|или|أو|או|ή))\s*({_LS})(?![^\W_])"
)
_END_LETTER_RE = re.compile(rf"(?<![^\W_])({_LS})[\s.!)）*_\]]*$")
# Words allowed between the items of an echoed option list: "A) Morocco or B) Spain".
_LIST_GAP_RE = re.compile(
    r"[\s,;/|]*(?:(?:or|o|ou|oder|ovvero|atau|hoặc|veya|ya da|или|або|أو|یا|या|או|ή|或|或者|还是|還是|か|또는|หรือ)"
    r"[\s,;/|]*)?",
    re.IGNORECASE,
)

# Combining marks dropped when comparing names: Latin/Greek/Cyrillic accents, Hebrew points,
# Arabic harakat and hamza carriers (so "إسبانيا" == "اسبانيا"). Japanese dakuten and
# Devanagari signs change the word and are kept.
_DROP_MARKS = ((0x0300, 0x036F), (0x0591, 0x05C7), (0x0610, 0x061A), (0x064B, 0x065F),
               (0x0670, 0x0670), (0x06D6, 0x06ED))
_CHAR_FOLD = str.maketrans(
    {
        "’": "'", "‘": "'", "ʼ": "'", "`": "'", "“": '"', "”": '"',
        "ـ": "",  # tatweel
        "ٱ": "ا", "ى": "ي", "ی": "ي", "ک": "ك", "ة": "ه", "ہ": "ه",
        "‐": "-", "‑": "-", "–": "-", "—": "-",
    }
)
# Scripts written without spaces between words: names match as plain substrings there.
_UNSPACED = ((0x0E00, 0x0EFF), (0x1000, 0x109F), (0x1100, 0x11FF), (0x1780, 0x17FF),
             (0x2E80, 0x9FFF), (0xA960, 0xA97F), (0xAC00, 0xD7FF), (0xF900, 0xFAFF),
             (0x20000, 0x3FFFF))
_ARABIC_CLITICS = "وفبلك"  # wa-, fa-, bi-, li-, ka- ("لإسبانيا" = "to Spain")
_HEBREW_CLITICS = "והבלמשכ"
_INFLECTING_VOWELS = frozenset("аяоеёыиьйуюэєії" "αηοιυωες")


def _in_ranges(ch: str, ranges: Iterable[tuple[int, int]]) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in ranges)


@lru_cache(maxsize=8192)  # replies repeat a small alphabet; folding is per character
def _fold_char(ch: str) -> str:
    if ch.isspace():
        return " "
    kept = "".join(c for c in unicodedata.normalize("NFD", ch) if not _in_ranges(c, _DROP_MARKS))
    return unicodedata.normalize("NFC", kept).casefold().translate(_CHAR_FOLD)


def _fold(text: str) -> tuple[str, list[int]]:
    """Fold `text` for name comparison, with the source index of every folded character."""
    out: list[str] = []
    index: list[int] = []
    for i, ch in enumerate(text):
        for c in _fold_char(ch):
            if c == " " and out and out[-1] == " ":
                continue
            out.append(c)
            index.append(i)
    return "".join(out), index


def _fold_name(name: str) -> str:
    return _fold(unicodedata.normalize("NFKC", name))[0].strip(" ")


@dataclass(frozen=True)
class _Form:
    """One spelling of an option name, as searched for in folded text."""

    text: str
    index: int
    method: str  # "name" | "alias"
    left_bounded: bool
    right_bounded: bool
    clitics: str
    inflects: bool


@dataclass(frozen=True)
class _Hit:
    start: int
    end: int
    index: int
    method: str


def _script_of(ch: str) -> str:
    cp = ord(ch)
    if 0x0600 <= cp <= 0x06FF or 0x0750 <= cp <= 0x077F:
        return "arabic"
    if 0x0590 <= cp <= 0x05FF:
        return "hebrew"
    if 0x0400 <= cp <= 0x052F or 0x0370 <= cp <= 0x03FF:
        return "inflecting"
    if _in_ranges(ch, _UNSPACED):
        return "unspaced"
    return "other"


def _make_forms(options: Sequence[str], aliases: Mapping[int, Sequence[str]] | None) -> list[_Form]:
    spelled: dict[str, dict[int, str]] = {}

    def add(name: str, index: int, method: str) -> None:
        # Options are sometimes passed pre-labelled ("A) Spain"); the label is not part of the name.
        folded = _fold_name(re.sub(r"^\s*[A-Za-z][)）]\s+", "", name))
        if not folded:
            return
        variants = [folded]
        if _script_of(folded[0]) == "arabic" and folded.startswith("ال"):
            variants.append("ل" + folded[1:])  # li- + al- contracts to "لل"
        for v in variants:
            by_index = spelled.setdefault(v, {})
            if by_index.get(index) != "name":
                by_index[index] = method

    for i, option in enumerate(options):
        add(option, i, "name")
    for i, names in (aliases or {}).items():
        if not 0 <= i < len(options):
            raise ValueError(f"alias index {i} is outside the {len(options)} options")
        if isinstance(names, str):
            names = [names]
        for name in names:
            add(name, i, "alias")

    forms: list[_Form] = []
    for text, by_index in spelled.items():
        if len(by_index) != 1:
            continue  # the same spelling names two options, so it cannot tell them apart
        (index, method), = by_index.items()
        first, last = _script_of(text[0]), _script_of(text[-1])
        clitics = {"arabic": _ARABIC_CLITICS, "hebrew": _HEBREW_CLITICS}.get(first, "")
        forms.append(
            _Form(
                text=text, index=index, method=method,
                left_bounded=first != "unspaced", right_bounded=last != "unspaced",
                clitics=clitics, inflects=last == "inflecting" and len(text) >= 4,
            )
        )
    return forms


def _find_hits(text: str, forms: Sequence[_Form]) -> list[_Hit]:
    """Non-overlapping option-name occurrences in `text`; the longest match wins overlaps."""
    folded, source = _fold(text)
    n = len(folded)
    candidates: list[tuple[int, int, _Form]] = []
    for form in forms:
        pattern = form.text
        if form.inflects and pattern[-1] in _INFLECTING_VOWELS:
            pattern = pattern[:-1]  # "Украина" -> "Украин" to accept "Украине", "Украины"
        pos = folded.find(pattern)
        while pos != -1:
            start, end = pos, pos + len(pattern)
            ok = True
            if form.inflects:
                # Russian/Greek case endings: up to three more letters of the same word.
                k = end
                while k < n and _is_word(folded[k]) and k - end < 3:
                    k += 1
                if k < n and _is_word(folded[k]):
                    ok = False
                end = k
            elif form.right_bounded and end < n and _is_word(folded[end]):
                ok = False
            if ok and form.left_bounded and start > 0 and _is_word(folded[start - 1]):
                k, taken = start, 0
                while k > 0 and taken < 2 and folded[k - 1] in form.clitics:
                    k -= 1
                    taken += 1
                if taken == 0 or (k > 0 and _is_word(folded[k - 1])):
                    ok = False
                start = k
            if ok:
                candidates.append((start, end, form))
            pos = folded.find(pattern, pos + 1)
    candidates.sort(key=lambda c: (-(c[1] - c[0]), c[0]))
    chosen: list[tuple[int, int, _Form]] = []
    for cand in candidates:
        if all(cand[1] <= c[0] or cand[0] >= c[1] for c in chosen):
            chosen.append(cand)
    hits = [_Hit(source[s], source[e - 1] + 1, f.index, f.method) for s, e, f in chosen]
    return sorted(hits, key=lambda h: h.start)


class _Ambiguous(Exception):
    """Two readings of the reply conflict (internal control flow; never escapes parse_mc)."""


@dataclass(frozen=True)
class _Signal:
    index: int
    method: str  # "letter" | "name" | "alias"
    end: int


def _letter(index: int) -> str:
    return chr(ord("A") + index)


class _MCReader:
    def __init__(self, text: str, options: Sequence[str], forms: Sequence[_Form]) -> None:
        self.options = options
        self.n = len(options)
        hits = _find_hits(text, forms)
        self.masked_listing = False
        self.text = self._mask_listings(text, hits)
        self.hits = [h for h in hits if self.text[h.start : h.end].strip()]
        self.hit_starts = {h.start: h for h in self.hits}
        # Out-of-range letters: "strong" ones stood where an answer goes (header value, first
        # token) and contradict any other reading; others only explain an unparseable reply.
        self.rejected: list[str] = []
        self.rejected_strong: list[str] = []

    # -- helpers -------------------------------------------------------------

    def _label_index(self, ch: str, strong: bool = True) -> int | None:
        index = ord(_LABELS[ch]) - ord("A")
        if index >= self.n:
            letter = _LABELS[ch]
            for bucket in (self.rejected, self.rejected_strong) if strong else (self.rejected,):
                if letter not in bucket:
                    bucket.append(letter)
            return None
        return index

    def _skip_spaces(self, p: int, end: int, extra: str = "") -> int:
        while p < end and (self.text[p] in " \t" or self.text[p] in extra):
            p += 1
        return p

    def _mask_listings(self, text: str, hits: Sequence[_Hit]) -> str:
        """Blank out echoed option lists ("A) Morocco or B) Spain") so they are not answers.

        A list is at least two consecutive labels, starting at A, each followed by its own
        option name and separated only by whitespace, commas or "or".
        """
        starts = {h.start: h for h in hits}
        # "(A) Spain" matches both label patterns; keep one pair per name, from the earliest start.
        by_end: dict[int, tuple[int, int, int]] = {}
        for m in [*_CLOSE_LETTER_RE.finditer(text), *_BRACKET_LETTER_RE.finditer(text)]:
            index = ord(_LABELS[m.group(1)]) - ord("A")
            p = m.end()
            while p < len(text) and text[p] in " \t":
                p += 1
            hit = starts.get(p)
            if hit is not None and hit.index == index:
                if hit.end not in by_end or m.start() < by_end[hit.end][0]:
                    by_end[hit.end] = (m.start(), hit.end, index)
        pairs = sorted(by_end.values())
        chars = list(text)
        i = 0
        while i < len(pairs):
            j = i
            while (
                j + 1 < len(pairs)
                and pairs[j + 1][2] == pairs[j][2] + 1
                and _LIST_GAP_RE.fullmatch(text, pairs[j][1], pairs[j + 1][0])
            ):
                j += 1
            if j > i and pairs[i][2] == 0:
                for k in range(pairs[i][0], pairs[j][1]):
                    if chars[k] != "\n":
                        chars[k] = " "
                self.masked_listing = True
            i = j + 1
        return "".join(chars)

    def _letter_token(self, p: int, end: int, allow_word: bool) -> tuple[int | None, int] | None:
        """A label letter at `p` that stands alone, as (option index or None, end of token)."""
        t = self.text
        q = p
        bracketed = q < end and t[q] in _OPEN_BRACKETS
        if bracketed:
            q = self._skip_spaces(q + 1, end)
        if q >= end or t[q] not in _LABELS:
            return None
        ch = t[q]
        q += 1
        if bracketed:
            q = self._skip_spaces(q, end)
            if q < end and t[q] in _CLOSE_BRACKETS:
                return self._label_index(ch), q + 1
            return None
        if q >= end or t[q] == "\n":
            return self._label_index(ch), q
        if t[q] in _AFTER_LABEL:
            return self._label_index(ch), q + 1
        if t[q] in " \t":
            r = self._skip_spaces(q, end)
            if r >= end or t[r] == "\n" or t[r] in "-–—":
                return self._label_index(ch), r
            if ch in string.ascii_uppercase:
                if r in self.hit_starts:
                    return self._label_index(ch), r  # "B United Kingdom"
                # "B because ...". "A" and "I" are excluded: in English they are words.
                if allow_word and ch not in "AI":
                    return self._label_index(ch), q
        return None

    def _lead(self, p: int, end: int, allow_word: bool) -> _Signal | None:
        """The choice stated at the very start of t[p:end], if any."""
        t = self.text
        p = _LEAD_DECOR_RE.match(t, p, end).end()  # type: ignore[union-attr]
        word = _LEAD_WORD_RE.match(t, p, end)
        if word:
            p = word.end()
        token = self._letter_token(p, end, allow_word)
        if token is not None:
            index, q = token
            if index is None:
                return None
            r = self._skip_spaces(q, end, "-–—:：")
            hit = self.hit_starts.get(r)
            if hit is not None and hit.index != index:
                raise _Ambiguous(
                    f"letter {_letter(index)} ({self.options[index]!r}) is followed by the name "
                    f"of option {_letter(hit.index)} ({self.options[hit.index]!r})"
                )
            return _Signal(index, "letter", hit.end if hit is not None else q)
        hit = self.hit_starts.get(p)
        if hit is None:
            return None
        # A name only leads when it stands as the answer ("Spain." / "Spain, because ..."),
        # not as the subject of a sentence that goes on to name other options.
        q = hit.end
        while q < end and t[q] in _CLOSERS:
            q += 1
        q = self._skip_spaces(q, end)
        if q < end and t[q] not in "\n.!?。！？:：-–—()（）":
            if t[q] not in ",;，；、،":
                return None
            nxt = self._skip_spaces(q + 1, end)
            if nxt in self.hit_starts and self.hit_starts[nxt].index != hit.index:
                return None
        return _Signal(hit.index, hit.method, hit.end)

    def _anywhere(self, start: int, end: int) -> dict[int, str]:
        """Every option pointed at inside t[start:end] by a standalone letter or a name."""
        t = self.text[start:end]
        found: dict[int, str] = {}

        def letter(ch: str) -> None:
            index = self._label_index(ch, strong=False)
            if index is not None:
                found[index] = "letter"

        for m in _BRACKET_LETTER_RE.finditer(t):
            letter(m.group(1))
        for m in _CLOSE_LETTER_RE.finditer(t):
            letter(m.group(1))
        for m in _OPTWORD_LETTER_RE.finditer(t):
            ch, after = m.group(1), m.group("after")
            # "option B because" counts; "Answer: A country ..." does not.
            if not after or after == "\n" or after in _AFTER_LABEL or (
                ch in string.ascii_uppercase and ch not in "AI"
            ):
                letter(ch)
        for m in _PAIR_LETTER_RE.finditer(t):
            letter(m.group(1))
            letter(m.group(2))
        m_end = _END_LETTER_RE.search(t)
        if m_end:
            letter(m_end.group(1))
        for hit in self.hits:
            if start <= hit.start and hit.end <= end:
                if found.get(hit.index) not in ("letter", "name"):
                    found[hit.index] = hit.method
        return found

    def _describe(self, indices: Iterable[int]) -> str:
        return ", ".join(f"{_letter(i)} ({self.options[i]!r})" for i in sorted(indices))

    def _result(self, index: int, method: str, reason: str) -> MCParse:
        return MCParse(
            index=index, option=self.options[index], status="ok", method=method, reason=reason
        )

    # -- levels --------------------------------------------------------------

    def _header_value(self, m: re.Match[str]) -> tuple[int, int]:
        t = self.text
        start = m.end()
        line_end = t.find("\n", start)
        end = len(t) if line_end == -1 else line_end
        if not t[start:end].strip(" \t*_#:："):
            # "Answer:\nB" - the value is on the next non-empty line.
            for line in re.finditer(r"[^\n]+", t[end:]):
                if line.group(0).strip(" \t*_#:："):
                    start, end = end + line.start(), end + line.end()
                    break
        nxt = _MC_HEADER_RE.search(t, start, end)
        if nxt:
            end = nxt.start()
        return start, end

    def parse(self) -> MCParse:
        # 1. An explicit header ("Answer: B", "Chosen Option: A) Spain", "The answer is B").
        #    The first header that says anything wins: later ones are repeats or echoes.
        for m in _MC_HEADER_RE.finditer(self.text):
            start, end = self._header_value(m)
            header = m.group(0).strip()
            signal = self._lead(start, end, allow_word=True)
            if signal is not None:
                return self._result(
                    signal.index, f"header-{signal.method}", f"value of header {header!r}"
                )
            found = self._anywhere(start, end)
            if len(found) == 1:
                (index, method), = found.items()
                return self._result(index, f"header-{method}", f"value of header {header!r}")
            if len(found) > 1:
                raise _Ambiguous(f"header {header!r} names {self._describe(found)}")
        # 2. The reply opens with a letter or an option name ("B) ...", "Spain. Because ...").
        signal = self._lead(0, len(self.text), allow_word=True)
        if signal is not None:
            return self._result(signal.index, signal.method, "first token of the reply")
        # 3. A line that is nothing but a choice ("...reasoning...\nB").
        whole_lines: dict[int, str] = {}
        for line in re.finditer(r"[^\n]+", self.text):
            signal = self._lead(line.start(), line.end(), allow_word=False)
            if signal is None:
                continue
            rest = self.text[signal.end : line.end()]
            if not any(_is_word(c) for c in rest):
                whole_lines.setdefault(signal.index, signal.method)
        if len(whole_lines) == 1:
            (index, method), = whole_lines.items()
            return self._result(index, method, "a line consisting only of the choice")
        # 4. Anything anywhere, provided it all points at one option.
        found = self._anywhere(0, len(self.text))
        if len(found) == 1:
            (index, method), = found.items()
            if self.rejected_strong:
                raise _Ambiguous(
                    f"letter {', '.join(self.rejected_strong)} is not one of the {self.n} options, "
                    f"but the reply also names {self._describe(found)}"
                )
            return self._result(index, method, "the only option mentioned")
        if len(found) > 1:
            raise _Ambiguous(f"the reply names {self._describe(found)} with equal standing")
        if self.masked_listing:
            raise _Ambiguous("the reply only repeats the list of options")
        if self.rejected:
            return MCParse(
                status="unparseable",
                reason=f"letter {', '.join(self.rejected)} is beyond the {self.n} options",
            )
        return MCParse(status="unparseable", reason="no option letter or option name found")


def parse_mc(
    output: str,
    options: Sequence[str],
    aliases: Mapping[int, Sequence[str]] | None = None,
) -> MCParse:
    """Read which option a multiple-choice reply picked.

    `options` are the option texts in prompt order (A, B, ...); `aliases` maps an option index
    to other names for it (e.g. the claimant's name in the query language). Evidence is
    ranked: an answer header, then the first token of the reply, then a line holding only the
    choice, then anything anywhere. A rank that points at two different options makes the
    result "ambiguous"; the parser never picks between them.
    """
    if not options:
        raise ValueError("parse_mc needs at least one option")
    if len(options) > 26:
        raise ValueError("parse_mc supports at most 26 options (A-Z)")
    text = unicodedata.normalize("NFKC", output or "").replace("\r\n", "\n")
    text, _ = _cut_at_echo(text)
    if not text.strip():
        return MCParse(status="unparseable", reason="empty output")
    reader = _MCReader(text, options, _make_forms(options, aliases))
    try:
        return reader.parse()
    except _Ambiguous as exc:
        return MCParse(status="ambiguous", reason=str(exc))


# ---------------------------------------------------------------------------
# Citation format
# ---------------------------------------------------------------------------

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


def _cited_numbers(value: str) -> list[int]:
    markers = _iter_markers(value)
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


def _ends_complete(value: str) -> bool:
    """Whether a section's text ends the way a finished sentence or list does."""
    s = value.rstrip().rstrip(_CLOSERS + " \t\n")
    if not s:
        return True
    markers = _iter_markers(s)
    if markers and markers[-1].end == len(s):
        return True  # "... is Spanish <doc0>", "... (see <doc0>)"
    last = s[-1]
    if last in _SENTENCE_FINAL:
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
    dangling = _DANGLING_RE.search(text.rstrip())
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
        # A base model without an Explanation header rambles on after the answer: keep the
        # first paragraph as the answer (its markers still count as inline citations).
        paragraph = re.split(r"\n[ \t]*\n", value("answer").strip(), maxsplit=1)[0]
        header_answer = strip_markers(paragraph) or None
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
        missing=missing,
        status=status,
    )
