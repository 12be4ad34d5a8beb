"""Items of known truth for judge calibration, built from the vendored data.

In every vendored language (XQuAD: ar, de, en, es, ru, zh; the travel set: ar, en), seeded,
in equal numbers per dataset, language and kind:

- correct: the gold answer (``gold``); the passage sentence that holds it
  (``gold_in_sentence``); the parallel question's gold in another script
  (``parallel_gold``: "Jared Allen" for the Russian question); the gold span, judged against
  the passage sentence that holds it as the gold (``span_of_sentence``: a concise answer to a
  question whose gold is written as a sentence, as the travel set's are);
- wrong: the gold of the other question on the same passage, sharing no word with this one
  (``other_gold``), and the same in another script (``parallel_other_gold``: a judge that
  takes every answer in another script for correct is caught here); the question itself
  (``echo``); a sentence of the same language from an article about something else
  (``wrong_sentence``; in the travel set, another question's answer); nothing, a ``<docN>``
  marker or a line of the answer-format template
  (``non_answer``); against a sentence gold as in ``span_of_sentence``, the span that answers
  another question on the passage, from another sentence (``other_span_of_sentence``) or
  from the very sentence that is the gold (``same_sentence_other_span``: words of the gold
  that do not answer this question, which a judge reading words alone cannot tell).

Each maker refuses a question it cannot build the kind from honestly (a number has no other
script; a sentence that holds the gold is not wrong), and the next question is taken.
"""

from __future__ import annotations

import json
import random
import re
from collections import defaultdict
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

from xlrag.checks.lexical import dominant_script, tokenize
from xlrag.errors import ConfigError
from xlrag.judges.lexical import SENTENCE_GOLD_TOKENS
from xlrag.languages import normalize_code

__all__ = [
    "CORRECT_KINDS",
    "KINDS",
    "TRAVEL_KINDS",
    "CalibrationItem",
    "build_items",
    "stratified",
    "vendored_langs",
]

Kind = Literal["gold", "gold_in_sentence", "parallel_gold", "span_of_sentence", "other_gold", "parallel_other_gold",
               "echo", "wrong_sentence", "non_answer", "other_span_of_sentence", "same_sentence_other_span"]
KINDS: tuple[str, ...] = get_args(Kind)
CORRECT_KINDS = frozenset(KINDS[:4])
# The travel set's gold answers are written, not spans, and it has no parallel questions
# and one question per document: only these kinds can be built from it.
TRAVEL_KINDS: tuple[str, ...] = ("gold", "echo", "wrong_sentence", "non_answer")
XQUAD_PER_KIND = 7
TRAVEL_PER_KIND = 5

_DATA = Path(__file__).resolve().parent.parent / "data"
# XQuAD questions whose gold span in one language says something else than in the others
# (checked by hand over all 95 parallel sets): "المظاهرات" (the demonstrations) where the
# others say "nonviolent". Their parallel golds are never offered as a correct answer.
_MISALIGNED = frozenset({
    ("5725cc38ec44d21400f3d5bb", "ar"), ("5725cc38ec44d21400f3d5bb", "zh"),
    ("5727213c708984140094da36", "ar"), ("5726da89dd62a815002e92b2", "ar"),
    ("570d28bdb3d812140066d4a4", "ar"), ("5727f3193acd2414000df0a6", "zh"),
    ("572663a9f1498d1400e8ddf2", "ar"), ("56e16182e3433e1400422e29", "ru"),
})
_SENTENCE = re.compile(r"(?<=[.!?。！？؟])\s*|\n+")
_MARKER_ANSWERS = ("", "<doc1>", "<doc0>, <doc2>")
# What a maker builds: the answer and a note, and the gold to judge against when it is not
# the question's own.
Made = tuple[str, str] | tuple[str, str, list[str]]


class CalibrationItem(BaseModel):
    """One response of known truth to one question."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    dataset: Literal["xquad", "travel"]
    lang: str
    kind: Kind
    truth: bool
    question: str
    gold: list[str]
    answer: str
    note: str = ""


@cache
def _rows(dataset: str, what: str) -> tuple[dict[str, Any], ...]:
    path = _DATA / dataset / f"{what}.jsonl"
    return tuple(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def vendored_langs() -> list[str]:
    """The languages of the vendored questions, the ones items can be built in."""
    return sorted({q["lang"] for ds in ("xquad", "travel") for q in _rows(ds, "queries")})


def _norm(text: str, lang: str) -> str:
    return f" {' '.join(tokenize(text, lang))} "


def _holds(text: str, part: str, lang: str) -> bool:
    """``part``'s normalised tokens, in order, inside ``text``'s."""
    return bool(part.strip()) and _norm(part, lang) in _norm(text, lang)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


def _template_answers(lang: str) -> list[str]:
    """What a model that copies the format instead of answering says: the shipped citation
    format's example lines in ``lang`` (since #33 the bare headers) and the answer line's
    placeholder alone (since #33 none: empty)."""
    from xlrag.prompts import ANSWER_HEADER, PromptLibrary

    lines = PromptLibrary().render("citation_format", lang, answer_header=ANSWER_HEADER).splitlines()[1:]
    placeholder = [x.removeprefix(ANSWER_HEADER).strip() for x in lines if x.startswith(ANSWER_HEADER)]
    return [*placeholder, *(x.strip() for x in lines if x.strip())]


def _non_answer(q: dict, lang: str, rng: random.Random) -> Made | None:
    options = [*_MARKER_ANSWERS, *_template_answers(lang)]
    answer = rng.choice(options)
    return answer, "empty" if not answer else "a marker or a template line"


class _XQuAD:
    def __init__(self) -> None:
        self.queries = _rows("xquad", "queries")
        self.docs = {d["id"]: d for d in _rows("xquad", "corpus")}
        self.parallel: dict[str, dict[str, dict]] = defaultdict(dict)
        self.by_doc: dict[str, list[dict]] = defaultdict(list)
        for q in self.queries:
            self.parallel[q["id"].rsplit("-", 1)[0]][q["lang"]] = q
            self.by_doc[q["gold_doc_id"]].append(q)

    def gold(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        return q["answers"][0], "the gold answer"

    def _sentences_holding(self, q: dict, gold: str) -> list[str]:
        return [s for s in _sentences(self.docs[q["gold_doc_id"]]["text"])
                if gold in s and len(s) > len(gold) + 5 and len(s) <= 400]

    def gold_in_sentence(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        found = self._sentences_holding(q, q["answers"][0])
        return (rng.choice(found), "the gold passage's sentence that holds the gold answer") if found else None

    def _sentence_gold(self, q: dict, lang: str) -> str | None:
        """The passage sentence that holds ``q``'s gold, to judge against as a sentence gold:
        one with at least :data:`SENTENCE_GOLD_TOKENS` tokens and a gold the question does not hold."""
        gold = q["answers"][0]
        if _holds(q["question"], gold, lang):
            return None
        found = [s for s in self._sentences_holding(q, gold) if len(tokenize(s, lang)) >= SENTENCE_GOLD_TOKENS]
        return found[0] if len(found) == 1 else None  # two sentences with the span: which one is meant?

    def span_of_sentence(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        sentence = self._sentence_gold(q, lang)
        return (q["answers"][0], "the gold span, against the passage sentence that holds it", [sentence]) \
            if sentence else None

    def _other_span(self, q: dict, lang: str, inside: bool) -> Made | None:
        sentence = self._sentence_gold(q, lang)
        if sentence is None:
            return None
        mine = set(tokenize(q["answers"][0], lang))
        for o in self.by_doc[q["gold_doc_id"]]:
            span = o["answers"][0]
            if o["id"] == q["id"] or mine & set(tokenize(span, lang)) or _holds(q["question"], span, lang):
                continue
            if _holds(sentence, span, lang) == inside:
                where = "the gold sentence itself" if inside else "another sentence of the passage"
                return span, f"the gold span of {o['id']}, from {where}, against the sentence gold", [sentence]
        return None

    def other_span_of_sentence(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        return self._other_span(q, lang, inside=False)

    def same_sentence_other_span(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        return self._other_span(q, lang, inside=True)

    def _in_otherdominant_script(self, q: dict, source: dict, lang: str, rng: random.Random) -> Made | None:
        """``source``'s gold in a parallel language whose script is not that of ``q``'s gold
        (English when it qualifies), unless it holds ``q``'s gold or the other way round."""
        gold = q["answers"][0]
        own = dominant_script(gold)
        base = source["id"].rsplit("-", 1)[0]
        if own is None or (base, lang) in _MISALIGNED:
            return None  # a number reads the same in every language
        others = []
        for other, pq in sorted(self.parallel[base].items()):
            alt = pq["answers"][0]
            script = dominant_script(alt)
            if other == lang or script is None or script == own or (base, other) in _MISALIGNED:
                continue
            if _holds(alt, gold, lang) or _holds(gold, alt, lang):
                continue
            others.append((other, alt))
        if not others:
            return None
        english = [x for x in others if x[0] == "en"]
        return english[0] if english else rng.choice(others)

    def parallel_gold(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        found = self._in_otherdominant_script(q, q, lang, rng)
        return (found[1], f"the gold answer of the parallel {found[0]} question") if found else None

    def _other(self, q: dict, lang: str) -> dict | None:
        """The first other question on ``q``'s passage whose gold shares no word with ``q``'s."""
        mine = set(tokenize(q["answers"][0], lang))
        return next((o for o in self.by_doc[q["gold_doc_id"]]
                     if o["id"] != q["id"] and not mine & set(tokenize(o["answers"][0], lang))), None)

    def other_gold(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        other = self._other(q, lang)
        return (other["answers"][0], "the gold answer of another question on the same passage") if other else None

    def parallel_other_gold(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        other = self._other(q, lang)
        found = self._in_otherdominant_script(q, other, lang, rng) if other else None
        if found is None or any(_holds(found[1], g, lang) for g in q["answers"]):
            return None
        return found[1], (f"the gold answer of another question on the same passage, from its parallel {found[0]} "
                          "question")

    def echo(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        return None if _holds(q["question"], q["answers"][0], lang) else (q["question"], "the question")

    def wrong_sentence(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        article = self.docs[q["gold_doc_id"]]["metadata"]["article"]
        docs = sorted(d for d, doc in self.docs.items() if doc["lang"] == lang
                      and doc["metadata"]["article"] != article)
        rng.shuffle(docs)
        for doc in docs:
            found = [s for s in _sentences(self.docs[doc]["text"]) if 30 <= len(s) <= 300
                     and not any(_holds(s, g, lang) for g in q["answers"])]
            if found:
                return rng.choice(found), f"a sentence of {doc} (another article)"
        return None

    non_answer = staticmethod(_non_answer)


class _Travel:
    def __init__(self) -> None:
        self.queries = _rows("travel", "queries")

    def gold(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        return q["answer"], "the gold answer"

    def echo(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        return None if _holds(q["question"], q["answer"], lang) else (q["question"], "the question")

    def wrong_sentence(self, q: dict, lang: str, rng: random.Random) -> Made | None:
        others = [o for o in self.queries if o["lang"] == lang and o["gold_doc_id"] != q["gold_doc_id"]
                  and not _holds(o["answer"], q["answer"], lang)]
        if not others:
            return None
        other = rng.choice(others)
        return other["answer"], f"the gold answer of {other['id']} (another document)"

    non_answer = staticmethod(_non_answer)


def build_items(langs: Sequence[str] | None = None, seed: int = 0, xquad_per_kind: int = XQUAD_PER_KIND,
                travel_per_kind: int = TRAVEL_PER_KIND) -> list[CalibrationItem]:
    """The calibration items in ``langs`` (default: every vendored language), the same for
    the same seed: per dataset, language and kind, the first questions of a seeded shuffle
    for which that kind can be built."""
    known = vendored_langs()
    wanted = [normalize_code(x) for x in langs] if langs else known
    stray = [x for x in wanted if x not in known]
    if stray:
        raise ConfigError(f"no vendored calibration data in {', '.join(stray)}; choose from {', '.join(known)}")
    items: list[CalibrationItem] = []
    for dataset, source, kinds, per_kind in (("xquad", _XQuAD(), KINDS, xquad_per_kind),
                                             ("travel", _Travel(), TRAVEL_KINDS, travel_per_kind)):
        for lang in wanted:
            queries = [q for q in source.queries if q["lang"] == lang]
            for kind in kinds if queries else ():
                order = sorted(queries, key=lambda q: q["id"])
                random.Random(f"{seed}:{dataset}:{lang}:{kind}").shuffle(order)
                made = 0
                for q in order:
                    if made == per_kind:
                        break
                    built = getattr(source, kind)(q, lang, random.Random(f"{seed}:{q['id']}:{kind}"))
                    if built is None:
                        continue
                    gold = q["answers"] if dataset == "xquad" else [q["answer"]]
                    items.append(CalibrationItem(
                        id=f"{dataset}:{q['id']}:{kind}", dataset=dataset, lang=lang, kind=kind,
                        truth=kind in CORRECT_KINDS, question=q["question"],
                        gold=built[2] if len(built) == 3 else gold, answer=built[0], note=built[1]))
                    made += 1
    return items


def stratified(items: Sequence[CalibrationItem], limit: int | None) -> list[CalibrationItem]:
    """The first ``limit`` items taken in turn from each (dataset, language, kind) cell.

    The cells are visited along diagonals (language i starts at kind i), so that a limit
    smaller than the number of cells still spreads over every language and every kind.
    """
    if limit is None or limit >= len(items):
        return list(items)
    cells: dict[tuple[str, str, str], list[CalibrationItem]] = defaultdict(list)
    for item in items:
        cells[(item.dataset, item.lang, item.kind)].append(item)
    groups = list(dict.fromkeys((d, lang) for d, lang, _ in cells))
    order = sorted(cells, key=lambda c: ((KINDS.index(c[2]) - groups.index(c[:2])) % len(KINDS),
                                         groups.index(c[:2])))
    out: list[CalibrationItem] = []
    depth = 0
    while len(out) < limit:
        out += [cells[c][depth] for c in order if depth < len(cells[c])][: limit - len(out)]
        depth += 1
    return out
