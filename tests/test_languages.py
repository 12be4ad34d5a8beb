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
