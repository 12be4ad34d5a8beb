"""Yes and no: the words that answer a yes/no question, and answers that say both.

A small model translating "Citizens of the UAE need no visa" into Arabic writes "لا، أحتاج
إلى تأشيرة لزيارة اليابان." ("No, I need a visa to visit Japan."): its first word answers
no, the rest restates the question as true. Each half passes every other check (the
answer adds a word to the question; it cites the page), so without this module the reply
was shown as verified. :func:`contradicts_itself` reads the verdict word that opens an
answer ("No," "نعم،" "Nein.") and whether the rest, a restatement of the question, is
negated: "no" before an unnegated restatement, or "yes" before a negated one, answers
both ways.

It reads words only, so it stays silent wherever the words cannot tell: a question that is
itself negated ("Don't I need a visa?"), a rest that says more than the question (a
restatement plus new facts is left alone), and languages whose negation is a suffix
(Turkish, Persian) or whose "yes" is also a verb (Vietnamese "có"), which have no table
here. Its items of known truth are ``tests/checks/data/yes_no.jsonl``.
"""

from __future__ import annotations

import re
from functools import cache

from xlrag.checks.lexical import char_ngrams, normalize_answer, tokenize

__all__ = ["contradicts_itself", "glued_negation", "negated", "polarity_words"]

# lang → (yes, no, negations): "no" opens an answer; a negation negates a clause. Languages
# whose negation is a word; the others answer "" (nothing to read).
_WORDS: dict[str, tuple[str, str, str]] = {
    "en": ("yes", "no", "no not never cannot"),
    "es": ("sí si", "no", "no nunca"),
    "de": ("ja", "nein", "nicht kein keine keinen nie"),
    "fr": ("oui", "non", "pas jamais"),
    "it": ("sì", "no", "non mai"),
    "pt": ("sim", "não", "não nunca"),
    "ru": ("да", "нет", "не нет никогда"),
    "uk": ("так", "ні", "не ні"),
    "ar": ("نعم", "لا", "لا ليس ليست لست لن لم"),
    "hi": ("हाँ हां", "नहीं", "नहीं"),
    "el": ("ναι", "όχι", "δεν όχι"),
    "ro": ("da", "nu", "nu"),
    "he": ("כן", "לא", "לא"),
}
# Languages with a yes and a no but no negation words to read: their polarity words still
# count as words an answer adds (:func:`polarity_words`), never as a verdict to check.
_VERDICT_ONLY: dict[str, str] = {"tr": "evet hayır değil", "vi": "có không", "fa": "بله نه"}

# English writes its negation into the verb ("don't", "can't", "isn't")
_EN_CONTRACTED = re.compile(r"n[’']t\b", re.IGNORECASE)
# The verdict word stands alone: "No, ..." / "لا، ..." / "Nein." ("No information ..." and
# "لا أحتاج" open with a negation, not a verdict)
_VERDICT = re.compile(r"^\W*(\w+)\s*[,،.!;:、，。](.*)$", re.DOTALL)
# Arabic writes "لا" before a verb, and a small model glues them: "لاحتاج" for "لا أحتاج"
_AR_NEGATION_PREFIXES = ("لا", "لن", "لم")
# Share of the rest's character n-grams the question holds for the rest to be the question
# restated (the non-answer check's echo share)
RESTATES = 0.85


@cache
def _sets(lang: str) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """``lang``'s yes, no and negation words as sets (read per token: made once)."""
    return tuple(frozenset(w.split()) for w in _WORDS[lang])  # type: ignore[return-value]


@cache
def polarity_words(lang: str | None) -> frozenset[str]:
    """The words of ``lang`` that answer a yes/no question by themselves, negations included
    (empty for a language without a list)."""
    if (lang or "") in _VERDICT_ONLY:
        return frozenset(_VERDICT_ONLY[lang or ""].split())
    return frozenset(" ".join(_WORDS.get(lang or "", ())).split())


def glued_negation(token: str, asked: frozenset[str] | set[str], lang: str | None) -> bool:
    """Whether ``token`` is a negation glued to one of the question's words (``asked``)."""
    if lang != "ar" or len(token) < 4 or not token.startswith(_AR_NEGATION_PREFIXES):
        return False
    rest = token[2:]
    return any(rest == t or t.endswith(rest) or rest.endswith(t[1:]) for t in asked if len(t) >= 3)


def negated(text: str, lang: str | None, asked: frozenset[str] | set[str] = frozenset()) -> bool:
    """Whether ``text`` holds a negation of ``lang``. ``asked``: the question's tokens, against
    which an Arabic "لا" glued to a question's verb is read as a negation."""
    if lang == "en" and _EN_CONTRACTED.search(text):
        return True
    words = _sets(lang)[2] if lang in _WORDS else frozenset()
    for token in tokenize(text, lang):
        if token in words or glued_negation(token, asked, lang):
            return True
    return False


def contradicts_itself(answer: str, question: str, lang: str | None) -> str | None:
    """Why ``answer`` answers the yes/no ``question`` both ways, or None. Both texts are
    visible text with ``lang``'s spellings folded (the caller's job)."""
    if lang not in _WORDS:
        return None
    m = _VERDICT.match(answer.strip())
    if m is None:
        return None
    yes, no, negations = _sets(lang)
    verdict = normalize_answer(m.group(1), lang)
    rest = m.group(2).strip()
    if verdict not in yes | no or not rest:
        return None
    asked = set(tokenize(question, lang))
    if negated(question, lang, asked):
        return None  # "Don't I need a visa?" "No, I need one": words cannot tell
    rest_negated = negated(rest, lang, asked)
    kept = " ".join(t for t in tokenize(rest, lang) if t not in negations)
    own = char_ngrams(kept, lang)
    if not own or len(own & char_ngrams(question, lang)) < RESTATES * len(own):
        return None  # the rest says more than the question: words cannot tell what
    if verdict in no and not rest_negated:
        return f"the answer says {m.group(1)!r}, then restates the question as true"
    if verdict in yes and rest_negated:
        return f"the answer says {m.group(1)!r}, then restates the question negated"
    return None
