#!/usr/bin/env python
"""Regenerate the web page's pictures in the docs (``docs/how-to/img/ui-*.png``).

    python scripts/screenshots.py                    # or: make screenshots
    python scripts/screenshots.py --out /tmp/shots   # elsewhere

The pictures are taken by the browser tests themselves (tests/server/test_ui_browser.py),
at the moments they check: the same server, index and scripted model, so a picture shows
what a passing test saw, and changes only when the page does. Needs the ``dev`` extra and
Debian's ``chromium`` and ``chromium-driver`` (``make browser``); about a minute and a half.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout: that checkout's tests and xlrag

from tests.server.browser import SCREENSHOTS, missing  # noqa: E402

OUT = ROOT / "docs" / "how-to" / "img"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"folder for the PNGs (default {OUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    why = missing()
    if why is not None:
        print(f"screenshots: {why}", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, SCREENSHOTS: str(args.out.resolve()), "PYTHONPATH": str(ROOT),
           "ANONYMIZED_TELEMETRY": "False"}
    # the scripted-model tests only: the real model's answer would differ from run to run
    done = subprocess.run([sys.executable, "-m", "pytest", "tests/server/test_ui_browser.py", "-m", "not slow",
                           "-q", "-p", "no:cacheprovider"], cwd=ROOT, env=env, check=False)
    if done.returncode == 0:
        print("\n".join(str(p.relative_to(ROOT) if p.is_relative_to(ROOT) else p)
                        for p in sorted(args.out.glob("ui-*.png"))))
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
