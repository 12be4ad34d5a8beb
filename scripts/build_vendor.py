#!/usr/bin/env python
"""Build the vendored data excerpts shipped with xlrag.

Reads the shared source data (default ``../shared/data`` next to the repository
root) once and writes small, attributed excerpts so that xlrag never needs the
shared folder at run time:

* ``xlrag/data/travel/``      Travel (Amiraz et al. 2025), CC BY 4.0
* ``xlrag/data/xquad/``       XQuAD (Artetxe et al. 2020), CC BY-SA 4.0
* ``xlrag/data/borderlines/`` BorderLines (Li et al. 2024), no explicit licence
* ``xlrag/data/NOTICE.md``    index of the above
* ``tests/data/bad/``         small malformed / odd corpora for error tests
* ``tests/data/README.md``    provenance of the test files

Deterministic: fixed seed, fixed selections, sorted inputs, stable JSON
(``ensure_ascii=False``, ``\\n`` line ends). Re-running gives identical files.
Needs the repository's environment: pyarrow for ``corpus.parquet`` and
``xlrag.languages`` for language codes.

Usage::

    python scripts/build_vendor.py
    python scripts/build_vendor.py --shared /path/to/shared/data
    python scripts/build_vendor.py --travel DIR --xquad DIR --borderlines DIR
"""


from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Run from a checkout, the script uses that checkout's xlrag, installed or not.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vendor_data.borderlines import build_borderlines
from vendor_data.common import DEFAULT_SHARED, REPO_ROOT, write_text
from vendor_data.fixtures import NOTICE, build_test_fixtures
from vendor_data.travel import build_travel
from vendor_data.xquad import build_xquad


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--shared",
        type=Path,
        default=DEFAULT_SHARED,
        help="root of the shared data (default: ../shared/data beside the repository, here %(default)s)",
    )
    ap.add_argument("--travel", type=Path, help="travel dir (default: SHARED/travel)")
    ap.add_argument("--xquad", type=Path, help="xquad dir (default: SHARED/xquad)")
    ap.add_argument(
        "--borderlines", type=Path, help="borderlines dir (default: SHARED/borderlines)"
    )
    ap.add_argument(
        "--out-root",
        type=Path,
        default=REPO_ROOT,
        help="repository root to write into (default: %(default)s)",
    )
    args = ap.parse_args(argv)
    travel = args.travel or args.shared / "travel"
    xquad = args.xquad or args.shared / "xquad"
    bl = args.borderlines or args.shared / "borderlines"
    for src in (travel, xquad, bl):
        if not src.is_dir():
            ap.error(f"source folder {src} does not exist; pass --shared or --travel/--xquad/--borderlines")
    data_out = args.out_root / "xlrag" / "data"

    t = build_travel(travel, data_out / "travel")
    x = build_xquad(xquad, data_out / "xquad")
    b = build_borderlines(bl, data_out / "borderlines")
    write_text(
        data_out / "NOTICE.md",
        NOTICE.format(
            travel_docs=t["docs"],
            travel_q=t["queries"],
            xquad_docs=x["docs"],
            xquad_q=x["queries"],
            xquad_dis=x["distractors"],
            bl_t=b["territories"],
            bl_q=b["queries"],
        ),
    )
    f = build_test_fixtures(travel, xquad, bl, args.out_root / "tests" / "data" / "bad")
    print("travel:", t)
    print("xquad:", x)
    print("borderlines:", b)
    print("tests/data/bad:", f)


if __name__ == "__main__":
    main()
