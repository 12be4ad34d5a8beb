"""The vendored excerpts are exactly what ``scripts/build_vendor.py`` makes from the shared data."""

from __future__ import annotations

import filecmp
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"


@pytest.mark.skipif(not SHARED.is_dir(), reason="the shared source data is not beside this checkout")
def test_the_build_reproduces_every_vendored_file(tmp_path):
    subprocess.run([sys.executable, str(ROOT / "scripts" / "build_vendor.py"), "--shared", str(SHARED),
                    "--out-root", str(tmp_path)], check=True, capture_output=True)
    built = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    assert len(built) > 20
    differ = [str(p) for p in built if not filecmp.cmp(tmp_path / p, ROOT / p, shallow=False)]
    assert not differ, f"rerun scripts/build_vendor.py and commit: {differ}"
