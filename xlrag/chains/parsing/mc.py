"""Multiple-choice replies: which one option the model chose, never a guess."""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from xlrag.chains.parsing.common import _CLOSERS, _cut_at_echo, _is_word
from xlrag.chains.parsing.names import _find_hits, _Form, _Hit, _make_forms
from xlrag.chains.parsing.results import MCParse
from xlrag.formats import OPTION_LETTERS, Section, words_pattern
from xlrag.prompts.library import label_words

# Characters accepted as option labels, mapped to the Latin letter they stand for.
_LABELS: dict[str, str] = {c: c for c in OPTION_LETTERS}
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
            if ch in OPTION_LETTERS:
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
                ch in OPTION_LETTERS and ch not in "AI"
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
