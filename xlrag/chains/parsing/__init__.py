"""Parse LLM replies in the two BordIRlines answer formats.

* multiple choice: the model is asked for the letter of one option ("A) Spain\\nB) ...");
* citation format: "Cited Documents: <doc0>, <doc2>" / "Answer: ..." (or "Chosen Option: ...")
  / "Explanation: ... <doc0> ...".

The replies come from tiny base models as well as vendor chat models, so the parsers are
deliberately forgiving about layout (case, markdown, marker spelling, truncation, echoed
prompts) and deliberately strict about meaning: `parse_mc` never guesses between two options
with equal standing, and `parse_citation` only counts document numbers written as document
markers, never bare numbers in prose.

Everything here is string processing: no model calls; the label lists are derived once from
the shipped prompt files (xlrag.formats).
"""

from __future__ import annotations

from xlrag.chains.parsing.citation import parse_citation
from xlrag.chains.parsing.mc import parse_mc
from xlrag.chains.parsing.results import CitationParse, MCParse
from xlrag.chains.parsing.sentences import sentences_with_markers
from xlrag.formats import find_markers, normalize_markers, strip_markers

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
