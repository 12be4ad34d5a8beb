"""A passage's sentences, as the support check reads them (ICU's, with its corrections)."""

from __future__ import annotations

import pytest

from xlrag.checks.sentences import sentences, split_sentences


def test_icu_splits_sentences_and_keeps_names_with_initials_whole():
    text = "Dr. Smith met Nicholas E. Golovin in the U.S. in 1958. Golovin led the committee."
    assert split_sentences(text, "en") == ["Dr. Smith met Nicholas E. Golovin in the U.S. in 1958.",
                                           "Golovin led the committee."]


def test_an_ordinal_ends_no_sentence():
    assert split_sentences("Tesla starb am 7. Januar 1943. Er war 86.", "de") == [
        "Tesla starb am 7. Januar 1943.", "Er war 86."]


@pytest.mark.parametrize(("text", "lang", "n"), [
    ("第一句话。第二句话！第三句", "zh", 3),
    ("केन्या में आपातकालीन टेलीफ़ोन नंबर 959 है। पुलिस दिन-रात जवाब देती है।", "hi", 2),
    ("លេខទូរស័ព្ទគឺ 959។ ឧទ្យានជាតិត្រូវបានបង្កើតឡើងនៅឆ្នាំ 1960។", "km", 2),
    ("ኣብ ኬንያ ቁጽሪ ተሌፎን 959 እዩ። ቀዳማይ ፓርክ ኣብ 1960 ተመስሪቱ።", "ti", 2),
])
def test_every_script_s_full_stop_ends_a_sentence(text, lang, n):
    assert len(split_sentences(text, lang)) == n


def test_thai_without_full_stops_is_cut_at_its_clauses_each_number_with_its_own():
    # ICU finds no sentence in Thai: it has no terminator. The test bed's page, and the two years
    page = ("หมายเลขโทรศัพท์ฉุกเฉินในเคนยาคือ 959 ตำรวจ หน่วยกู้ชีพ และหน่วยดับเพลิงรับสายที่โทรเข้าหมายเลขนี้"
            "ตลอดทั้งวันทั้งคืน อุทยานแห่งชาติแห่งแรกของประเทศนี้ก่อตั้งขึ้นในปี ค.ศ. 1960")
    parts = split_sentences(page, "th")
    assert len(parts) == 3 and parts[0].endswith("959 ตำรวจ หน่วยกู้ชีพ") and parts[2].endswith("ค.ศ. 1960")
    two = split_sentences("เทสลาได้รับสิทธิบัตรในปี 1900 ในปี 1915 เขาได้รับการเสนอชื่อเข้าชิงรางวัลโนเบล", "th")
    assert two == ["เทสลาได้รับสิทธิบัตรในปี 1900", "ในปี 1915 เขาได้รับการเสนอชื่อเข้าชิงรางวัลโนเบล"]


def test_a_list_under_a_heading_has_the_heading_as_context_and_the_title_is_left_out():
    text = ("Kingdom of Tonga\n**Emergency numbers in Kingdom of Tonga:  \n**\n\n"
            "  * Police - Ambulance - Fire Service  \n+676 7401064  \n+676 8819010\n\n"
            "## Social Traditions and Holidays\n\n  * There are several religious occasions.")
    found = sentences(text, title="Kingdom of Tonga", lang="en")
    assert "Kingdom of Tonga" not in [s.text for s in found]
    item = next(s for s in found if "7401064" in s.text)
    # a list item continued on the next lines is one sentence, under its bold heading
    assert item.text == "* Police - Ambulance - Fire Service +676 7401064 +676 8819010"
    assert item.context == ("**Emergency numbers in Kingdom of Tonga:",)
    last = found[-1]
    assert last.text == "* There are several religious occasions." and last.context == (
        "## Social Traditions and Holidays",)
