"""Judges: a panel of LLM judges with a majority vote (:mod:`xlrag.judges.panel`) and the
lexical judge that needs no model (:mod:`xlrag.judges.lexical`).

The product runs them (the perspectives view compares its languages' answers with them) and
the evaluation harness (:mod:`xlrag.evals`) scores runs with them, so they live below both:
nothing below ``evals/`` and ``cli/`` imports the harness.
"""
