import pytest

from xlrag.detect import LinguaDetector
from xlrag.errors import UnknownLanguageError
from xlrag.languages import native_name, normalize, normalize_code


@pytest.mark.parametrize(
    ("code", "expected"),
    [
        ("zhs", ("zh", "Hans")),
        ("zht", ("zh", "Hant")),
        ("zh-Hans", ("zh", "Hans")),
        ("zh-Hant", ("zh", "Hant")),
        ("iw", ("he", None)),
        ("ara", ("ar", None)),
        ("EN", ("en", None)),
        ("pt-BR", ("pt", None)),
        ("tl", ("tl", None)),
    ],
)
def test_normalize(code, expected):
    assert tuple(normalize(code)) == expected


@pytest.mark.parametrize("code", ["xx", "xx-notalang", "", "qqq", "12"])
def test_unknown_codes_raise(code):
    with pytest.raises(UnknownLanguageError, match="ISO 639"):
        normalize(code)


def test_native_names():
    assert native_name("ar") == "العربية"
    assert native_name("de") == "Deutsch"
    assert native_name("iw") == "עברית"
    assert normalize_code("zh-TW") == "zh"


def test_lingua_detects_real_questions():
    det = LinguaDetector()
    assert det.detect("Wie viele Punkte hat die Verteidigung der Panthers zugelassen?") == "de"
    assert det.detect("كم نقطة تخلى عنها دفاع البانثرز؟") == "ar"
    assert det.detect("黑豹队的防守丢了多少分？") == "zh"
    assert det.detect("¿Cuántos puntos permitió la defensa de los Panthers?") == "es"


def test_candidate_restriction_helps_short_text():
    assert LinguaDetector(["en", "ar"]).detect("visa") == "en"


def test_vendored_borderlines_codes_come_from_normalize():
    # scripts/build_vendor.py derives each query's lang/script from normalize(); a
    # hand-kept code map there would drift from what xlrag stores and searches.
    import json
    from pathlib import Path

    import xlrag

    path = Path(xlrag.__file__).parent / "data" / "borderlines" / "territories.jsonl"
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    pairs = {(q["upstream_code"], q["lang"], q["script"]) for r in rows for q in r["queries"].values()}
    assert {"zhs", "zht"} <= {code for code, _, _ in pairs}
    for code, lang, script in pairs:
        assert tuple(normalize(code)) == (lang, script), code
