"""What the pipeline sends the model, fingerprinted: a refactor that should change nothing shows
the same digests.

Every demo question (five languages) in each of its IR modes and in each answer format goes
through ``Pipeline.from_config`` (the default config over the demo index) up to the request:
language, mode, retrieval, the passage steps, the localized prompt. Each request's passage ids
and messages are hashed; no model is run (a scripted chat model stands in, and prepare stops
before it). Run at two commits and compare ``digest``: equal digests mean every answer
benchmark sends the same prompts over the same passages, so its committed figures stand.

    python benchmarks/request_fingerprint.py [--out request_fingerprint.json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import write_json
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

import xlrag
from xlrag.chains.pipeline import Pipeline
from xlrag.config import XlragConfig
from xlrag.demo import DEMO_QUESTIONS, build_demo_index

FORMATS = ("citation", "answer")


def _digest(value: object) -> str:
    return hashlib.sha256(json.dumps(value, ensure_ascii=False, sort_keys=True).encode()).hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="request_fingerprint.json")
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        build_demo_index(index)
        cfg = XlragConfig(index_dir=index)
        for fmt in FORMATS:
            pipeline = Pipeline.from_config(cfg, llm=GenericFakeChatModel(messages=iter([])), fmt=fmt)
            try:
                for q in DEMO_QUESTIONS:
                    for mode in q.modes:
                        inp = {"question": q.text, "lang": q.lang, "mode": mode,
                               **({"relevant_langs": list(q.relevant_langs)} if q.relevant_langs else {})}
                        state = pipeline.prepare(inp)
                        request = state.request
                        assert request is not None
                        # a passage by its document and text: its id holds a digest of the corpus
                        # file's path, which differs between two checkouts
                        sent = {"passages": [[h.doc_id, _digest(h.passage.text)] for h in state.hits],
                                "messages": [(m.type, m.content) if hasattr(m, "type") else list(m)
                                             for m in request.messages],
                                "kwargs": sorted(request.kwargs)}
                        rows.append({"format": fmt, "lang": q.lang, "mode": mode,
                                     "passages": [h.doc_id for h in state.hits], "digest": _digest(sent)})
            finally:
                pipeline.close()
    # the commit of the xlrag imported (run a checkout's package with this script: PYTHONPATH=...)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                            cwd=Path(xlrag.__file__).resolve().parent).stdout.strip()
    out = {"commit": commit, "requests": len(rows), "digest": _digest([r["digest"] for r in rows]), "rows": rows}
    write_json(args.out, out)
    print(f"{len(rows)} requests, digest {out['digest'][:16]} ({commit})")


if __name__ == "__main__":
    main()
