"""Which languages' sources to compare for a question, and what chose them.

In order, the first that names two languages with a store in the index wins:

1. ``given``: the caller's ``relevant_langs``, exactly (an unknown code or one with no store is an
   error: the caller asked for it by name);
2. ``rule``: the first agent rule (``agent.rules``) whose name the question holds, the rule
   the agent's routing sends to ``rel_langs`` (:meth:`xlrag.config.AgentRule.first_named`);
3. ``claimants``: the claimants' languages of a BorderLines territory the question names
   (the vendored excerpt, :func:`xlrag.borderlines.load_territories`);
4. ``top_by_retrieval``: the languages of the best-ranked passages over every store
   (mode ``all``), in the order of their first passage.

For a rule and for claimants the user's language comes first, as in BordIRlines'
``rel_langs`` mode (the question's language plus the relevant ones): a user asking in
English about Crimea sees what the English, Russian and Ukrainian sources say. A language
a rule or a territory names but the index lacks is left out with a note, never searched
(an empty store would answer closed-book). At most ``max_langs`` are kept, in order.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Sequence

from xlrag.borderlines import Territory
from xlrag.config import AgentRule
from xlrag.errors import InvalidArgumentError, LanguageNotIndexedError, UnknownLanguageError
from xlrag.languages import normalize_code
from xlrag.perspectives.models import LanguageChoice

__all__ = ["choose_langs", "contested", "parse_lang", "territory_named"]


def parse_lang(code: str, available: Sequence[str], where: str = "relevant_langs") -> str:
    """``code`` normalised; an unknown one is an error that suggests the nearest code (a
    language's English name, "Ukrainian" → 'uk', or the closest store of the index)."""
    try:
        return normalize_code(code)
    except UnknownLanguageError:
        pass
    suggestion = None
    try:
        import langcodes

        suggestion = normalize_code(str(langcodes.find(code)))
    except (LookupError, ValueError, UnknownLanguageError):
        close = difflib.get_close_matches(code.lower(), list(available), n=1, cutoff=0.5)
        suggestion = close[0] if close else None
    raise UnknownLanguageError(code, where=where, suggestion=suggestion)


def _rule(question: str, rules: Sequence[AgentRule]) -> tuple[list[str], str] | None:
    found = AgentRule.first_named(question, tuple(rules))  # the agent's routing reads the same rule
    if found is None:
        return None
    rule, hit = found
    return [normalize_code(x) for x in rule.relevant_langs], f"rule naming {hit!r} (agent.rules)"


def territory_named(question: str, territories: Sequence[Territory]) -> Territory | None:
    """The first territory whose name (or one of its '/'-separated names) the question holds."""
    folded = question.casefold()
    for t in territories:
        if any(name.strip().casefold() in folded for name in t.territory.split("/") if name.strip()):
            return t
    return None


def contested(question: str, rules: Sequence[AgentRule], territories: Sequence[Territory]
              ) -> tuple[str, list[str], str] | None:
    """``(source, languages, reason)`` when an agent rule or a disputed territory names the
    question's entity; None when neither does."""
    found = _rule(question, rules)
    if found is not None:
        return "rule", *found
    t = territory_named(question, territories)
    if t is not None:
        return "claimants", list(dict.fromkeys(normalize_code(x) for x in t.langs)), \
            f"claimants of {t.territory} ({', '.join(t.claimants)})"
    return None


def choose_langs(question: str, user_lang: str, available: Sequence[str], *, relevant_langs: Sequence[str] | None,
                 rules: Sequence[AgentRule], territories: Sequence[Territory], max_langs: int,
                 ranked: Callable[[], list[str]]) -> LanguageChoice:
    """The languages to compare (see the module's docstring). ``ranked`` gives the languages
    of a retrieval over every store, best first; it is only called when nothing else chose."""
    available, langs = list(available), relevant_langs
    if langs is not None:
        if not langs:
            raise InvalidArgumentError("relevant_langs", "a list of one or more language codes, e.g. ['ru', 'uk']",
                                       langs)
        chosen = list(dict.fromkeys(parse_lang(x, available) for x in langs))
        for lang in chosen:
            if lang not in available:
                raise LanguageNotIndexedError(lang, available)
        if len(chosen) > max_langs:
            raise InvalidArgumentError("relevant_langs", f"at most max_langs={max_langs} languages (raise max_langs)",
                                       chosen)
        return LanguageChoice(langs=chosen, source="given", reason="given by the caller")
    notes: list[str] = []
    found = contested(question, rules, territories)
    if found is not None:
        source, wanted, reason = found
        wanted = list(dict.fromkeys([user_lang, *wanted]))
        have = [x for x in wanted if x in available]
        notes += [(f"the question's language {x!r} has no store in this index" if x == user_lang else
                   f"{reason} names {x!r}, which has no store in this index") for x in wanted if x not in available]
        if len(have) >= 2:
            if len(have) > max_langs:
                notes.append(f"kept the first {max_langs} of {len(have)} languages (raise max_langs for more)")
            return LanguageChoice(langs=have[:max_langs], source=source, reason=reason, notes=notes)  # type: ignore[arg-type]
        notes.append(f"{reason}: fewer than two of its languages have a store; the best-ranked stores were taken")
    top = list(dict.fromkeys(ranked()))
    return LanguageChoice(langs=top[:max_langs], source="top_by_retrieval",
                          reason="the languages of the best-ranked passages over every store (mode all)",
                          notes=notes)
