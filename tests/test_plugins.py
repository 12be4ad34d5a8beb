"""Plugins by entry point: a package installed with pip that declares an ``xlrag.plugins`` entry
point is seen by xlrag with no import; a broken one or one taking a built-in's name is a one-line
warning naming its package, and xlrag starts without it.

The packages are real wheels installed by pip (``--target`` a temporary folder, put on the
subprocess's path) so that the venv the other tests share is not changed."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from xlrag import registry

XLRAG = str(Path(sys.executable).parent / "xlrag")

TOY = '''
import hashlib

import numpy as np

import xlrag.indexes.fusion  # a plugin importing xlrag's own providers leaves them xlrag's
from xlrag.registry import register


class HashEmbedder:
    """Bags of hashed character 3-grams: a model-free embedder for the test."""

    name = "toy-hash"
    dim = 64

    def embed(self, texts, role):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            t = f"  {text.lower()}  "
            for j in range(len(t) - 2):
                out[i, int(hashlib.md5(t[j:j + 3].encode()).hexdigest(), 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


@register("embedder", "toy-hash")
def _toy(cfg):
    return HashEmbedder()


@register("fusion", "toy-first")
def _first(scores):
    return [1.0 / r for r in range(1, len(scores) + 1)]


class EnglishFirst:
    """English passages first, the others after them in their order."""

    name = "toy_english_first"
    chooses = False

    def postprocess(self, hits, query, k):
        return sorted(hits, key=lambda h: h.lang != "en")[:k]


@register("postprocessor", "toy_english_first")
def _english_first(config, embedder):
    return EnglishFirst()


@register("mode", "toy_last_store")
class LastStore:
    """Only the store whose language comes last in the alphabet."""

    name = "toy_last_store"

    def plan(self, query, query_lang, available, k):
        from xlrag.indexes.policies import RetrievalPlan, StoreQuery

        last = sorted(available)[-1:]
        return RetrievalPlan(policy=self.name, query_lang=query_lang, k=k,
                             searches=[StoreQuery(store=s, text=query.question, quota=k) for s in last])
'''

BROKEN = "raise ImportError('the toy vendor SDK is missing')\n"
TAKER = ("from xlrag.registry import register\n\n@register('fusion', 'rrf')\n"
         "def _mine(scores):\n    return list(scores)\n")


def _wheel(folder: Path, dist: str, module: str, source: str) -> Path:
    """A wheel of one module declaring it as an ``xlrag.plugins`` entry point."""
    info = f"{dist.replace('-', '_')}-0.1.dist-info"
    files = {
        f"{module}.py": source,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.1\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: xlrag-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/entry_points.txt": f"[{registry.PLUGIN_GROUP}]\n{module} = {module}\n",
    }

    def digest(text: str) -> str:
        raw = hashlib.sha256(text.encode()).digest()
        return "sha256=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    record = "".join(f"{name},{digest(text)},{len(text.encode())}\n" for name, text in files.items())
    files[f"{info}/RECORD"] = record + f"{info}/RECORD,,\n"
    path = folder / f"{dist.replace('-', '_')}-0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    wheels = tmp_path_factory.mktemp("wheels")
    target = tmp_path_factory.mktemp("site")
    built = [_wheel(wheels, "xlrag-toy-plugin", "xlrag_toy_plugin", TOY),
             _wheel(wheels, "xlrag-broken-plugin", "xlrag_broken_plugin", BROKEN),
             _wheel(wheels, "xlrag-taker-plugin", "xlrag_taker_plugin", TAKER)]
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-index", "--no-deps",
                    "--target", str(target), *map(str, built)], check=True, capture_output=True, text=True)
    return target


def _env(site: Path) -> dict[str, str]:
    root = Path(__file__).resolve().parents[1]
    return os.environ | {"PYTHONPATH": os.pathsep.join([str(root), str(site)]), "ANONYMIZED_TELEMETRY": "False"}


def test_an_installed_plugin_is_seen_without_an_import_and_bad_ones_are_one_line_warnings(site):
    code = ("import json, warnings\n"
            "warnings.simplefilter('always')\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    from xlrag import registry\n"
            "    out = {'embedder': registry.available('embedder'), 'plugins': registry.plugins(),\n"
            "           'rrf': registry.get('fusion', 'rrf').__module__}\n"
            "out['warnings'] = [str(w.message) for w in caught if 'plugin' in str(w.message)]\n"
            "from langchain_core.language_models.fake_chat_models import GenericFakeChatModel\n"
            "from xlrag.chains.pipeline import Pipeline\n"
            "from xlrag.config import XlragConfig\n"
            "cfg = XlragConfig(postprocess=['toy_english_first', 'rerank', 'context'])\n"
            "pipe = Pipeline.from_config(cfg, llm=GenericFakeChatModel(messages=iter([])), mode='no_ir')\n"
            "out['steps'] = [s.name for s in pipe.passage_steps]\n"
            "from xlrag.server.ui import mode_descriptions\n"
            "out['modes'] = {m.name: m.description for m in mode_descriptions()}\n"
            "print(json.dumps(out))\n")
    run = subprocess.run([sys.executable, "-c", code], env=_env(site), capture_output=True, text=True, check=True)
    out = json.loads(run.stdout)
    assert "toy-hash" in out["embedder"]
    assert sorted(out["plugins"]["xlrag-toy-plugin"]) == [["embedder", "toy-hash"], ["fusion", "toy-first"],
                                                          ["mode", "toy_last_store"],
                                                          ["postprocessor", "toy_english_first"]]
    # a plugin's passage step is named in postprocess: like a built-in one, and runs where it is listed
    assert out["steps"] == ["toy_english_first", "none", "context"]
    assert out["plugins"]["xlrag-broken-plugin"] == [] and out["plugins"]["xlrag-taker-plugin"] == []
    assert out["rrf"] == "xlrag.indexes.fusion"  # a plugin cannot take a built-in's name
    # the server's list of modes (/v1/modes, the web page's menu) names the plugin's, after the built-ins
    assert list(out["modes"])[-1] == "toy_last_store" and list(out["modes"])[:2] == ["auto", "no_ir"]
    assert out["modes"]["toy_last_store"] == "Only the store whose language comes last in the alphabet."
    broken = [w for w in out["warnings"] if "xlrag-broken-plugin" in w]
    taker = [w for w in out["warnings"] if "xlrag-taker-plugin" in w]
    assert len(broken) == 1 and "the toy vendor SDK is missing" in broken[0] and "\n" not in broken[0]
    assert len(taker) == 1 and "'rrf'" in taker[0] and "xlrag already has" in taker[0]


def test_the_cli_indexes_and_retrieves_with_a_plugins_embedder_and_fusion(site, tmp_path):
    corpus = tmp_path / "corpus.jsonl"
    rows = [{"id": "kenya", "lang": "en", "text": "Kenya's emergency number is 999 for police."},
            {"id": "italy", "lang": "en", "text": "Italy's emergency number is 112 for police."},
            {"id": "japan", "lang": "de", "text": "Japans Notrufnummer ist 110."}]
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    env, index = _env(site), str(tmp_path / "ix")
    subprocess.run([XLRAG, "index", "-c", str(corpus), "-i", index, "--embedder", "toy-hash"], env=env,
                   capture_output=True, text=True, check=True)
    run = subprocess.run([XLRAG, "retrieve", "Kenya emergency number", "-i", index, "--embedder", "toy-hash",
                          "--mode", "all", "--fusion", "toy-first", "--channels", "dense", "--json"],
                         env=env, capture_output=True, text=True, check=True)
    hits = json.loads(run.stdout)
    assert hits[0]["doc_id"] == "kenya"
    # the plugin's IR mode, by name, from the CLI: only the last store ("en") is searched
    run = subprocess.run([XLRAG, "retrieve", "Japans Notrufnummer", "-i", index, "--embedder", "toy-hash",
                          "--mode", "toy_last_store", "--channels", "dense", "--json"],
                         env=env, capture_output=True, text=True, check=True)
    assert {h["store"] for h in json.loads(run.stdout)} == {"en"}
    # without the plugin installed the name is unknown, in one line
    bare = subprocess.run([XLRAG, "retrieve", "Kenya", "-i", index, "--embedder", "toy-hash", "--channels", "dense"],
                          env=_env(tmp_path / "nothing"), capture_output=True, text=True)
    assert (bare.returncode != 0 and "toy-hash" in bare.stderr
            and len(bare.stderr.strip().splitlines()) == 1), bare.stderr
