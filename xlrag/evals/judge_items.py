"""Judging a file of answers with a panel (``xlrag eval judge``), resumably.

Input: one JSON object per line, ``{"id", "question", "lang", "answer", "gold": [...]}``.
The whole file is validated before anything is judged, so a bad row stops the run with
its line number and nothing is written. Output: each input row with ``verdict``
(true, false, or null when no judge cast a valid vote) and ``votes`` (``{"judge", "vote",
"valid", "reason"}``), appended and fsynced as each row is judged, under a file lock. A
rerun skips the ids already in the output, so a killed run loses at most the row in flight.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from xlrag.errors import ConfigError, CorpusError, CorpusRowError, UnknownLanguageError
from xlrag.jsonl import read_objects
from xlrag.judges.panel import JudgePanel, PanelConfig, PanelVerdict
from xlrag.languages import normalize_code
from xlrag.locking import FolderLock
from xlrag.outputs import check_output, jsonl_kind, read_appended
from xlrag.text import capped

__all__ = ["JudgeItem", "judge_file", "load_panel", "read_items", "verdict_row"]

_SHAPE = '{"id", "question", "lang", "answer", "gold": [...]}'
# what `eval judge --out` holds: a file of anything else is refused, never truncated
VERDICT_FILE = jsonl_kind("verdicts", "verdicts.jsonl", "id", "verdict", "votes")


class JudgeItem(BaseModel):
    """One row to judge."""

    model_config = ConfigDict(extra="forbid")

    id: str | int
    question: str = Field(min_length=1)
    lang: str
    answer: str = Field(description="the response judged; empty is allowed (it is judged a non-answer)")
    gold: list[str] = Field(min_length=1, description="the gold answers; the response is right if it gives one")

    @field_validator("lang")
    @classmethod
    def _known_lang(cls, v: str) -> str:
        try:
            return normalize_code(v)
        except UnknownLanguageError as e:
            raise ValueError(str(e)) from None

    @field_validator("gold")
    @classmethod
    def _non_empty_golds(cls, v: list[str]) -> list[str]:
        if not all(g.strip() for g in v):
            raise ValueError("a gold answer is empty; give each gold answer's text")
        return v


def load_panel(path: str | Path) -> PanelConfig:
    """The panel in a YAML file: a panel (``judges: [...]``, ``tie_break``) or an experiment
    whose ``judges:`` section is one."""
    from xlrag.evals.experiment import read_yaml, validate_as

    path = Path(path)
    shape = ("has no judges: section; write judges: [{kind: lexical}, {provider: local, model: ...}] (a panel) "
             "or an experiment with one")
    data = read_yaml(path, "panel file", "give a YAML file with a judges: list", shape)
    if "judges" not in data:
        raise ConfigError(f"{path} {shape}")
    section = data["judges"] if isinstance(data["judges"], dict) else data
    return validate_as(PanelConfig, section, f"{path}: judges")


def _why(e: ValidationError) -> str:
    err = e.errors()[0]
    field = ".".join(str(x) for x in err["loc"])
    if err["type"] == "missing":
        return f"field {field!r} is missing; each row is {_SHAPE}"
    if err["type"] == "extra_forbidden":
        return f"unknown field {field!r}; each row is {_SHAPE}"
    return f"{field}: {err['msg'].removeprefix('Value error, ')}"


def read_items(path: str | Path) -> list[tuple[dict[str, Any], JudgeItem]]:
    """Every row of ``path`` as read and as validated; the first bad row is an error with
    its line number (invalid JSON, a missing or unknown field, an unknown language, an id
    given twice), and so is a file with no rows."""
    path = Path(path)
    rows: list[tuple[dict[str, Any], JudgeItem]] = []
    seen: dict[str, int] = {}
    for n, row in read_objects(path, "items"):
        try:
            item = JudgeItem.model_validate(row)
        except ValidationError as e:
            raise CorpusRowError(path, n, _why(e), skippable=False) from None
        key = str(item.id)
        if key in seen:
            raise CorpusRowError(path, n, f"id {capped(key)} is also on line {seen[key]}; give each row its own id",
                                 skippable=False)
        seen[key] = n
        rows.append((row, item))
    if not rows:
        raise CorpusError(f"items file {path} has no rows; write one JSON object per line: {_SHAPE}")
    return rows


def verdict_row(row: dict[str, Any], verdict: PanelVerdict) -> dict[str, Any]:
    """The input row with the panel's ``verdict`` and every judge's vote."""
    as_bool = {"correct": True, "incorrect": False, "invalid": None}
    votes = [{"judge": v.judge, "vote": as_bool[v.verdict], "valid": v.verdict != "invalid",
              "reason": v.reason if v.verdict == "invalid" else v.justification} for v in verdict.votes]
    return {**row, "verdict": as_bool[verdict.verdict], "tie": verdict.tie, "votes": votes}


def _locked(out: Path) -> FolderLock:
    """One `xlrag eval judge` writing ``out`` at a time (the lock beside it names its holder)."""
    return FolderLock(out.parent, out.name, lambda holder: ConfigError(
        f"another `xlrag eval judge` is writing {out} ({holder}); wait for it to finish or give another --out"))


def _done(out: Path, labels: list[str]) -> set[str]:
    """Ids already judged in ``out`` (a torn last line is cut off), by the same panel."""
    done: set[str] = set()
    for n, rec in enumerate(read_appended(out, VERDICT_FILE, repair=True), 1):
        judged = [v.get("judge") for v in rec.get("votes") or []]
        if judged != labels:
            raise ConfigError(f"{out}:{n} was judged by {judged}, not by this panel {labels}; give another "
                              f"--out, or the --panel that wrote it")
        done.add(str(rec.get("id")))
    return done


def judge_file(items: str | Path, out: str | Path, panel: PanelConfig, *, llm_cache: Any = None,
               progress: Callable[[int, int], None] | None = None) -> dict[str, int]:
    """Judge every row of ``items`` not yet in ``out``; ``{"judged", "skipped", "true", "false",
    "null", "invalid_votes"}``. ``llm_cache``: a LangChain cache for the LLM judges' calls."""
    rows = read_items(items)
    out = check_output(out, "--out", VERDICT_FILE)
    judges = JudgePanel(panel)
    summary = {"judged": 0, "skipped": 0, "true": 0, "false": 0, "null": 0, "invalid_votes": 0}
    with _locked(out):
        done = _done(out, judges.labels)
        todo = [(row, item) for row, item in rows if str(item.id) not in done]
        summary["skipped"] = len(rows) - len(todo)
        if todo and llm_cache is not None:
            for model in judges.models():
                model.cache = llm_cache
        if progress:
            progress(summary["skipped"], len(rows))
        with out.open("a", encoding="utf-8") as fh:
            for row, item in todo:
                pv = judges.judge(item.question, item.gold, item.answer, item.lang)
                rec = verdict_row(row, pv)
                fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
                summary["judged"] += 1
                summary[{True: "true", False: "false", None: "null"}[rec["verdict"]]] += 1
                summary["invalid_votes"] += sum(not v["valid"] for v in rec["votes"])
                if progress:
                    progress(summary["skipped"] + summary["judged"], len(rows))
    return summary
