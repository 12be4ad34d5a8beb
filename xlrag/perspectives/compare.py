"""Do two perspectives' answers say the same thing? Lexically first, the calibrated judge only when unsure.

Both answers are in the user's language, so their words can be compared directly. What is
compared is what each answer *adds* to the question (:func:`xlrag.checks.lexical.added_tokens`):
"Crimea belongs to Russia" and "Crimea belongs to Ukraine" share most of their words, yet
what they add ("russia", "ukraine") shares none. The score is the overlap coefficient of the
added words' character n-grams (n-grams survive inflection: "Ukraine" and "Ukraine's"):
the share of the shorter addition found in the longer, so an answer that says the same and
more still agrees.

- score >= :data:`AGREE_AT`: agree, unless the answers hold different numbers, one says
  yes/no/not where the other does not ("belongs to Russia" and "does not belong to Russia"
  add nearly the same words), or one addition is held by a much longer one
  (:data:`CONTAINED_UNDER`): then unsure;
- score < :data:`DISAGREE_BELOW`: disagree;
- otherwise, when an answer adds nothing, or when the two are in different scripts (the
  same name in two scripts shares no n-gram): unsure, and :class:`AgreementJudge` decides.

On the judge-calibration items (a gold answer and a response known to say the same thing or
not, non-answers left out), the words decide 170 of 398 pairs and are right on every one;
the judge takes the other 228 (``validation`` in benchmarks/results/perspectives.json).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from xlrag.checks.lexical import added_tokens, char_ngrams, dominant_script, has_no_space_script
from xlrag.checks.substance import polarity_words
from xlrag.judges.lexical import DEFAULT_THRESHOLD
from xlrag.judges.panel import JudgePanel, PanelVerdict, default_panel
from xlrag.perspectives.models import (
    Consensus,
    Disagreement,
    PairAgreement,
    Perspective,
    Side,
    Status,
)

__all__ = ["AGREE_AT", "CONTAINED_UNDER", "DISAGREE_BELOW", "AgreementJudge", "judged", "lexical_agreement",
           "verdict"]

# The share of n-grams at which the lexical judge takes one text to hold another (calibrated:
# 0.96 accuracy on 376 items of known truth, benchmarks/results/judges.json): the shorter
# answer's addition held by the other's to that degree says the same thing in other words.
AGREE_AT = DEFAULT_THRESHOLD
# Below this, the additions share at most a stray n-gram or two ("the", an ending): answers
# naming different things ("Russia" / "Ukraine", "308" / "24") score 0 to 0.2. Between the
# two bounds wording and content cannot be told apart by n-grams: the LLM decides.
DISAGREE_BELOW = 0.25
# An addition under half the other's size is held by it, not matched: "Madrid" inside "the
# capital is Madrid, the largest city is Barcelona". On the calibration items every lexical
# "agree" that was wrong (36 of 156) was of this shape; the LLM decides these.
CONTAINED_UNDER = 0.5
_DIGITS = re.compile(r"\d+")


def lexical_agreement(first: str, second: str, question: str, lang: str | None) -> tuple[str, float | None, str]:
    """``(agreement, score, reason)`` from the words alone; see the module's docstring."""
    a, b = added_tokens(first, question, lang), added_tokens(second, question, lang)
    if not a or not b:
        return "unsure", None, "an answer adds nothing to the question's words"
    ja, jb = " ".join(a), " ".join(b)
    scripts = dominant_script(ja), dominant_script(jb)
    if None not in scripts and scripts[0] != scripts[1]:  # None: digits only, no script to differ
        # the same name in two scripts shares no n-gram ("Jared Allen" / "Джаред Аллен"): on the
        # calibration items, 40 of 42 such pairs of one answer scored "disagree" before this
        return "unsure", None, f"the answers are in different scripts ({scripts[0]}, {scripts[1]})".lower()
    n = 2 if has_no_space_script(f"{ja} {jb}") else 3
    ga, gb = char_ngrams(ja, lang, n), char_ngrams(jb, lang, n)
    if not ga or not gb:
        return "unsure", None, "an answer adds too little to compare"
    score = len(ga & gb) / min(len(ga), len(gb))
    if score < DISAGREE_BELOW:
        return "disagree", score, f"what they add to the question shares {score:.0%} of its n-grams"
    if score < AGREE_AT:
        return "unsure", score, f"what they add shares {score:.0%} of its n-grams (between " \
                                f"{DISAGREE_BELOW:.0%} and {AGREE_AT:.0%})"
    na, nb = set(_DIGITS.findall(ja)), set(_DIGITS.findall(jb))
    if na and nb and na != nb:
        return "unsure", score, f"similar words, different numbers ({', '.join(sorted(na ^ nb))})"
    polar = polarity_words(lang)
    pa, pb = polar.intersection(a), polar.intersection(b)
    if pa != pb:
        return "unsure", score, f"similar words, but only one says {', '.join(sorted(pa ^ pb))!r}"
    if min(len(ga), len(gb)) < CONTAINED_UNDER * max(len(ga), len(gb)):
        return "unsure", score, "one answer holds the other and says much more: words cannot tell whether " \
                                "the rest changes what it says"
    return "agree", score, f"what they add to the question shares {score:.0%} of its n-grams"


class AgreementJudge:
    """Whether two answers say the same thing, asked of the calibrated judge panel: the first
    answer as the reference, the second as the response, which is the question the panel
    answers in every evaluation (does this response say what the reference says?).

    ``panel`` defaults to :func:`~xlrag.judges.panel.default_panel`, the one ``xlrag eval
    calibrate`` chose offline: the lexical judge, which compares answers in two scripts by
    multilingual embedding. On the calibration items the words leave unsure it is right on
    0.79 (``validation`` in benchmarks/results/perspectives.json); the default local model
    asked "do these two answers say the same thing?" was right on 0.62 there, so no LLM is
    asked unless the panel holds one. An invalid verdict leaves the pair unsure."""

    def __init__(self, panel: JudgePanel | None = None):
        self.panel = panel if panel is not None else JudgePanel(default_panel())

    @staticmethod
    def _strip(text: str) -> str:
        from xlrag.chains.parsing import strip_markers

        return strip_markers(text).strip()

    @staticmethod
    def _read(v: PanelVerdict) -> tuple[str, str]:
        why = "; ".join(x.justification or x.reason or x.verdict for x in v.votes)
        if v.verdict == "invalid":
            return "unsure", f"the judge gave no verdict ({why})"
        return ("agree" if v.verdict == "correct" else "disagree"), f"the judge: {why}"

    def judge(self, question: str, first: str, second: str, lang: str) -> tuple[str, str]:
        """``(agreement, reason)``: agree, disagree, or unsure when the panel has no verdict."""
        return self._read(self.panel.judge(question, [self._strip(first)], self._strip(second), lang))

    async def ajudge(self, question: str, first: str, second: str, lang: str) -> tuple[str, str]:
        return self._read(await self.panel.ajudge(question, [self._strip(first)], self._strip(second), lang))


def judged(lexical: PairAgreement, agreement: str, reason: str) -> PairAgreement:
    """The pair as the judge decided it, its lexical score kept."""
    return lexical.model_copy(update={"agreement": agreement, "method": "judge",
                                      "reason": f"{reason} (lexical: {lexical.reason})"})


def _side(p: Perspective) -> Side:
    return Side(lang=p.lang, answer=p.said or "", citations=p.citations)


def _groups(langs: Sequence[str], pairs: Sequence[PairAgreement]) -> list[list[str]]:
    """The perspectives linked by agreements, where every pair inside agrees (size >= 2)."""
    agree = {frozenset((p.a, p.b)) for p in pairs if p.agreement == "agree"}
    seen: set[str] = set()
    out = []
    for start in langs:
        if start in seen:
            continue
        group, todo = [], [start]
        while todo:
            x = todo.pop()
            if x in group:
                continue
            group.append(x)
            todo += [y for y in langs if frozenset((x, y)) in agree and y not in group]
        seen.update(group)
        ordered = [x for x in langs if x in group]
        if len(ordered) > 1 and all(frozenset((x, y)) in agree for i, x in enumerate(ordered)
                                    for y in ordered[i + 1:]):
            out.append(ordered)
    return out


def _representative(members: list[Perspective], user_lang: str) -> tuple[Perspective, str]:
    def own(p: Perspective) -> int:
        return sum(c.source != "post_hoc" for c in p.citations)

    # max keeps the first of equals: the order the languages were chosen in
    best = max(members, key=lambda p: (own(p), p.lang == user_lang))
    why = f"the {best.lang} answer cites {own(best)} passage(s) itself, the most in the group"
    if best.lang == user_lang and sum(own(p) == own(best) for p in members) > 1:
        why += "; of the answers citing as many, it is from sources in the user's language"
    return best, why


def verdict(perspectives: Sequence[Perspective], pairs: Sequence[PairAgreement],
            user_lang: str) -> tuple[Status, list[Consensus], list[Disagreement]]:
    """The status, the consensus groups and the disagreement points of compared perspectives."""
    answered = [p for p in perspectives if p.status == "answered"]
    if len(answered) < 2:
        return "single", [], []
    by_lang = {p.lang: p for p in answered}
    consensus = []
    for group in _groups([p.lang for p in answered], pairs):
        chosen, why = _representative([by_lang[x] for x in group], user_lang)
        consensus.append(Consensus(langs=group, chosen=_side(chosen), why_chosen=why))
    disagreements = [Disagreement(sides=[_side(by_lang[p.a]), _side(by_lang[p.b])], method=p.method,
                                  score=p.score, reason=p.reason) for p in pairs if p.agreement == "disagree"]
    if disagreements:
        return "disagreement", consensus, disagreements
    if all(p.agreement == "agree" for p in pairs) and len(consensus) == 1:
        return "consensus", consensus, []
    return "unsure", consensus, []
