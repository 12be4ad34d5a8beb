"""Shared by the dataset builders: the fixed selections, and deterministic I/O and text trimming."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_SHARED = REPO_ROOT.parent / "shared" / "data"

SEED = 20250521
TRAVEL_PER_PAIR = 6
TRAVEL_PAIRS = [("en", "en"), ("en", "ar"), ("ar", "en"), ("ar", "ar")]
TRAVEL_ID_PREFIX = "travel-"
# Pages with fewer words than this only say "no data for this country"
# (Niue, Micronesia); questions whose gold page is one of them are not sampled.
TRAVEL_MIN_GOLD_WORDS = 50

XQUAD_LANGS = ["ar", "de", "en", "es", "ru", "zh"]
XQUAD_QUESTIONS_PER_PARAGRAPH = 2
# XRAG-style controlled contexts need distractors from the same article as the gold paragraph:
# the other paragraphs of the first XQUAD_DISTRACTOR_ARTICLES articles, in every language
XQUAD_DISTRACTOR_ARTICLES = 16

# Well-known disputed territories (>= 2 claimants), by their exact
# `Territory` value in disputed_territories.csv.
BORDERLINES_TERRITORIES = [
    "Ceuta",
    "Gibraltar",
    "Falkland Islands",
    "Crimea",
    "Golan Heights",
    "Abu Musa",
    "Jammu and Kashmir",
    "South Kuril/Chishima Islands",
    "Dokdo/Takeshima",
    "Senkaku Islands",
    "Taiwan",
    "Kosovo",
    "Imia/Kardak",
]



def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False)


def write_jsonl(path: Path, rows) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(dumps(row) + "\n")
            n += 1
    return n


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        f.write(text.rstrip("\n") + "\n")


_EDGE = re.compile(r"^[\s\ufeff\u200b\u200e\u200f]+|[\s\ufeff\u200b\u200e\u200f]+$")


def clean(text: str) -> str:
    """Strip whitespace, byte-order marks and zero-width/direction marks at the edges."""
    return _EDGE.sub("", text)


def trim(text: str, limit: int) -> str:
    """Cut ``text`` to at most ``limit`` characters, at a whitespace boundary."""
    text = text.strip()
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip()


def first_sentences(text: str, limit: int) -> str:
    """Whole leading sentences of ``text`` within ``limit`` chars (at least one)."""
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", clean(text)) if s]
    out = sentences[0]
    for s in sentences[1:]:
        if len(out) + 1 + len(s) > limit:
            break
        out += " " + s
    return trim(out, limit)


def prose(text: str, limit: int) -> str:
    """First plain-prose paragraph of a markdown page (no heading, list, table
    or link), newlines folded, trimmed to ``limit`` chars."""
    for para in re.split(r"\n\s*\n", text):
        para = para.strip()
        if len(para) < 80 or para.startswith(("#", "*", "-", "_", "|", "[")):
            continue
        if "|" in para or "http" in para:
            continue
        return trim(" ".join(para.split()), limit)
    raise SystemExit("no prose paragraph found")


def extract_bibtex(readme: str) -> str:
    m = re.search(r"```bibtex\n(.*?)```", readme, re.S)
    if not m:
        raise SystemExit("no ```bibtex block found in the travel README")
    return m.group(1).strip()
