"""The substance checks: hand-made cases, then their accuracy on the vendored XQuAD items."""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from importlib import resources
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.prompts.recorded import RECORDED_CITATION_FORMAT, recorded_format
from xlrag.checks.substance import (
    FLAGS,
    SUBSTANCE_CHECKS,
    Rendering,
    is_refusal,
    non_answer,
    refusal_cues,
    refusal_despite_evidence,
    restates_question,
    unsupported,
)
from xlrag.prompts import PromptLibrary


def _jsonl(name: str) -> list[dict]:
    text = resources.files("xlrag.data").joinpath(f"xquad/{name}").read_text("utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


QUERIES = _jsonl("queries.jsonl")
PASSAGES = {d["id"]: d["text"] for d in _jsonl("corpus.jsonl")}


def test_every_check_has_a_flag():
    assert set(FLAGS) == set(SUBSTANCE_CHECKS)


@pytest.mark.parametrize(("question", "lang"), [
    ("इस्लाम के प्रगतिशील नरमपंथी क्या अलग करना चाहते हैं?", "hi"),
    ("Ποιος κέρδισε το Super Bowl 50;", "el"),
    ("How many career sacks did Jared Allen have?", "en"),
    ("贾里德·艾伦职业生涯中有多少次擒杀？", "zh"),
])
def test_the_question_echoed_is_not_an_answer(question, lang):
    for echo in (question, question.rstrip("?;？"), f"{question} <doc0>", f"{question} <doc0> <doc2>"):
        f = non_answer(echo, question, lang)
        assert not f.passed and "repeats the question" in f.reason


@pytest.mark.parametrize("reply", ["", "   ", "<doc0>", "<doc1>, <doc2>", "...", "Answer: <doc0>"])
def test_empty_and_marker_only_replies_are_not_answers(reply):
    assert not non_answer(reply, "How many points did the Panthers give up?", "en").passed


@pytest.mark.parametrize(("answer", "question"), [
    ("France", "Which is larger, France or Spain?"),
    ("Jared Allen had 136 career sacks.", "How many career sacks did Jared Allen have?"),
    ("308", "How many points did the Panthers defense surrender?"),
    ("Die Panthers gaben 308 Punkte ab.", "Wie viele Punkte gab die Verteidigung der Panthers ab?"),
])
def test_short_and_question_shaped_answers_are_answers(answer, question):
    assert non_answer(answer, question).passed


def test_the_prompt_template_copied_is_not_an_answer():
    prompts = PromptLibrary()
    template = prompts.render("citation_format", "en", answer_header="Answer:")
    f = non_answer(template.splitlines()[0], "Who won?", "en", templates=[template])
    assert not f.passed and "template" in f.reason
    assert non_answer("Denver Broncos", "Who won?", "en", templates=[template]).passed


@pytest.mark.parametrize("lang", ["zh", "ar", "ru", "es"])
def test_the_templates_placeholder_under_its_english_label_is_not_an_answer(lang):
    # the labels stay English in every language; a placeholder is a short part of its line
    # ("Answer: 你的答案", shipped before #33), so the line is compared as the reader sees it,
    # labels stripped
    if lang in RECORDED_CITATION_FORMAT:
        template = recorded_format(lang, "Answer:")
        line = next(x for x in template.splitlines() if x.startswith("Answer:"))
        f = non_answer(line, "¿Quién ganó?", lang, templates=[template])
        assert not f.passed and "template" in f.reason
    # the shipped answer line holds none: copied, it says nothing
    shipped = PromptLibrary().render("citation_format", lang, answer_header="Answer:")
    line = next(x for x in shipped.splitlines() if x.startswith("Answer:"))
    assert line == "Answer:" and not non_answer(line, "¿Quién ganó?", lang, templates=[shipped]).passed


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(QUERIES))
def test_any_vendored_question_echoed_fails(q):
    assert not non_answer(q["question"], q["question"], q["lang"]).passed


def test_on_every_vendored_question_gold_answers_pass_and_echoes_fail():
    """Accuracy on 570 items of known truth each way: a gold span is an answer, the question is not."""
    gold_ok = sum(non_answer(q["answers"][0], q["question"], q["lang"]).passed for q in QUERIES)
    echo_caught = sum(not non_answer(q["question"], q["question"], q["lang"]).passed for q in QUERIES)
    assert echo_caught == len(QUERIES)
    assert gold_ok / len(QUERIES) >= 0.98, gold_ok


def test_support_is_found_in_the_gold_passage_and_not_in_another():
    """Known truth: a gold span is in its passage; another article's gold span, mostly, is not.
    Support by a sentence about the question (#51) costs right answers whose question the passage
    rephrases (0.981 → 0.928) and rejects more wrong ones (0.928 → 0.975);
    benchmarks/checks_testbed.py measures both rules in one run."""
    rng = random.Random(0)
    supported = wrong = 0
    for q in QUERIES:
        gold = PASSAGES[q["gold_doc_id"]]
        supported += unsupported(q["answers"][0], q["question"], [gold], q["lang"]).passed
        other = rng.choice([x for x in QUERIES if x["lang"] == q["lang"] and x["parallel_id"] != q["parallel_id"]])
        wrong += not unsupported(other["answers"][0], q["question"], [gold], q["lang"]).passed
    assert supported / len(QUERIES) >= 0.92, supported
    assert wrong / len(QUERIES) >= 0.95, wrong


def _same_passage_items() -> list[tuple[dict, str]]:
    """Each XQuAD question with another question's gold span taken from another sentence of
    the same passage: the issue's "1900", a number the cited passage holds in a sentence about
    something else. Known wrong."""
    from xlrag.checks.sentences import split_sentences

    items = []
    for q in QUERIES:
        text, gold = PASSAGES[q["gold_doc_id"]], q["answers"][0]
        gold_sentences = [x for x in split_sentences(text, q["lang"]) if gold in x]
        for o in QUERIES:
            span = o["answers"][0]
            if (o is q or o["gold_doc_id"] != q["gold_doc_id"] or span not in text or gold in span or span in gold
                    or any(span in x for x in gold_sentences)):
                continue
            items.append((q, span))
    return items


def test_an_answer_from_another_sentence_of_its_passage_is_unsupported():
    """268 known-wrong answers the passage holds, but not where it speaks of the question: the
    check before #51 passed 0.985 of them (it looked the words up anywhere in the passage)."""
    items = _same_passage_items()
    caught = sum(not unsupported(span, q["question"], [PASSAGES[q["gold_doc_id"]]], q["lang"]).passed
                 for q, span in items)
    assert len(items) == 268
    assert caught / len(items) >= 0.65, caught


TESLA_EN = ("Tesla was granted a patent for a wireless transmitter in 1900. In 1915 he was proposed for the Nobel "
            "Prize in Physics together with Edison.")
TESLA_TH = ("เทสลาได้รับสิทธิบัตรเครื่องส่งสัญญาณไร้สายในปี 1900 "
            "ในปี 1915 เขาได้รับการเสนอชื่อเข้าชิงรางวัลโนเบลสาขาฟิสิกส์ร่วมกับเอดิสัน")


@pytest.mark.parametrize(("question", "passage", "lang"), [
    ("When was Tesla proposed for the Nobel Prize?", TESLA_EN, "en"),
    # the language: Thai writes no full stop, so its sentences are its clauses
    ("เทสลาได้รับการเสนอชื่อเข้าชิงรางวัลโนเบลเมื่อใด", TESLA_TH, "th"),
])
def test_a_number_from_a_sentence_about_something_else_is_unsupported(question, passage, lang):
    # issue 51: "1900" was shown as verified: the number is in the cited passage, in a sentence about a patent
    wrong = unsupported("1900", question, [passage], lang)
    assert not wrong.passed and "about the question" in wrong.reason
    assert unsupported("1915", question, [passage], lang).passed


def _testbed_support() -> dict[str, list[tuple[bool, bool]]]:
    from xlrag.evals import testbed
    from xlrag.schema import Passage

    docs = {d.id: d for d in testbed.documents()}
    out: dict[str, list[tuple[bool, bool]]] = {}
    for q in testbed.questions():
        d = docs[testbed.gold_doc(q)]
        page = Passage(id=d.id, doc_id=d.id, text=f"{d.title}\n{d.text}", lang=d.lang, title=d.title)
        other = testbed.numbers(q.country)["park" if q.fact == "emergency" else "emergency"]
        asked = re.sub(r"[?？؟;;՞።\s]+$", "", q.question)  # the question's words, then the number
        for right, wrong in ((q.answer, other), (f"{asked} {q.answer}", f"{asked} {other}")):
            out.setdefault(q.lang, []).append((unsupported(right, q.question, [page], q.lang).passed,
                                               not unsupported(wrong, q.question, [page], q.lang).passed))
    return out


def test_in_every_language_of_the_test_bed_the_right_number_is_supported_and_the_other_is_not():
    """Each page holds its two numbers in different sentences: the question's number is
    supported, the other, cited from the same page, is not (bare, and after the question's
    words). Before #51 every other number passed."""
    from xlrag.evals import testbed

    found = _testbed_support()
    assert sorted(found) == testbed.languages() and len(found) >= 50
    for lang, pairs in found.items():
        assert all(right for right, _ in pairs), lang
        assert sum(wrong for _, wrong in pairs) / len(pairs) >= 0.9, lang
    assert sum(w for pairs in found.values() for _, w in pairs) / sum(map(len, found.values())) >= 0.99


def test_an_answer_from_a_passage_in_another_language_is_supported_through_its_translation():
    passage = "Die Verteidigung der Panthers gab nur 308 Punkte ab und belegte den sechsten Platz."
    answer = "La defensa cedió solo trescientos ocho puntos en la liga."
    assert not unsupported(answer, "¿Cuántos puntos?", [passage], "es").passed
    rendered = unsupported(answer, "¿Cuántos puntos?", [passage], "es",
                           renderings=[Rendering(answer="Die Verteidigung gab nur 308 Punkte ab.",
                                                 question="Wie viele Punkte?")])
    assert rendered.passed and "translation" in rendered.reason


KURIL_JA = "北方四島は日本に帰属する島々であり、日本は四島の返還を求めています。"  # borderlines kuril-ja-2


@pytest.mark.parametrize(("rendered", "supported"), [
    ("南クリル諸島は日本に属しています。", True),
    ("南クリル諸島はロシアに属しています。", False),
])
def test_a_translation_restating_the_question_is_read_beyond_the_translated_question(rendered, supported):
    """The perspectives view's Japanese answer: its translation names the islands as the
    translated question does, and the passage calls them 北方四島; what it adds decides."""
    question = "Who does the South Kuril Islands belong to?"
    answer = "The South Kuril Islands belong to " + ("Japan." if supported else "Russia.")
    found = unsupported(answer, question, [KURIL_JA], "en",
                        renderings=[Rendering(answer=rendered, question="南クリル諸島は誰のものですか？")])
    assert found.passed is supported, found.reason


def _parallel_items() -> list[tuple[dict, dict, dict, dict]]:
    """Every XQuAD question with its parallel question in each other language, and another
    article's parallel pair: (q, q in the passage's language, other, other in that language)."""
    rng = random.Random(0)
    by = {(q["parallel_id"], q["lang"]): q for q in QUERIES}
    langs = sorted({q["lang"] for q in QUERIES})
    items = []
    for q in QUERIES:
        for lang in langs:
            if lang == q["lang"] or (q["parallel_id"], lang) not in by:
                continue
            other = rng.choice([x for x in QUERIES if x["lang"] == q["lang"] and x["parallel_id"] != q["parallel_id"]
                                and (x["parallel_id"], lang) in by])
            items.append((q, by[(q["parallel_id"], lang)], other, by[(other["parallel_id"], lang)]))
    return items


def test_support_through_translations_on_parallel_items_of_known_truth():
    """2,850 pairs of XQuAD's parallel questions (each question, the passage in each other
    language): the gold answer in the passage's language is a perfect translation of it, and
    another article's gold answer is not supported. Answers come bare (the span) and restated
    (the question's words, then the span, as a small model writes them). Subtracting the
    translated question's words took the restated wrong answers rejected from 0.26 to 0.89 and
    the restated right ones from 0.95 to 0.98; bare spans 0.98 / 0.88 → 0.97 / 0.90. Support by a
    sentence about the question (#51): 0.90 right, 0.97 wrong, bare or restated alike (the
    question's words are the question's, however placed)."""
    def restated(q: dict, span: str) -> str:
        return f"{q['question'].rstrip('?？؟ ')} {span}"

    items = _parallel_items()
    tally = dict.fromkeys(("bare_right", "bare_wrong", "restated_right", "restated_wrong"), 0)
    for q, qb, other, ob in items:
        passage = [PASSAGES[qb["gold_doc_id"]]]
        for form, say in (("bare", lambda x, _q: x["answers"][0]),
                          ("restated", lambda x, q_: restated(q_, x["answers"][0]))):
            right = unsupported(say(q, q), q["question"], passage, q["lang"],
                                renderings=[Rendering(answer=say(qb, qb), question=qb["question"], lang=qb["lang"])])
            wrong = unsupported(say(other, q), q["question"], passage, q["lang"],
                                renderings=[Rendering(answer=say(ob, qb), question=qb["question"], lang=qb["lang"])])
            tally[f"{form}_right"] += right.passed
            tally[f"{form}_wrong"] += not wrong.passed
    rate = {k: v / len(items) for k, v in tally.items()}
    assert len(items) == 2850
    assert rate["restated_right"] >= 0.90 and rate["restated_wrong"] >= 0.96, rate
    assert rate["bare_right"] >= 0.90 and rate["bare_wrong"] >= 0.96, rate


def test_no_cited_passage_is_unsupported():
    assert not unsupported("308", "How many?", []).passed


@pytest.mark.parametrize(("reply", "lang"), [
    ("The documents do not contain this information.", "en"),
    ("لا توجد معلومات في الوثائق عن ذلك.", "ar"),
    ("文档中没有提到这个问题。", "zh"),
    ("Los documentos no contienen esa información <doc0>.", "es"),
    ("В документах нет информации об этом.", "ru"),
    ("Die Dokumente enthalten keine Angaben dazu.", "de"),
    ("Es tut mir leid, aber ich kann das nicht helfen.", "de"),  # seen from the local model
])
def test_refusals_are_recognised(reply, lang):
    assert is_refusal(reply, lang)


@pytest.mark.parametrize(("reply", "lang"), [
    ("308 points", "en"), ("Denver Broncos <doc0>", "en"), ("Keine der beiden Mannschaften verlor.", "de"),
])
def test_answers_are_not_refusals(reply, lang):
    assert not is_refusal(reply, lang)


def test_every_cue_is_a_refusal_in_its_own_language():
    for lang, cues in refusal_cues().items():
        for cue in cues:
            assert is_refusal(cue, lang), (lang, cue)


def test_a_refusal_with_the_answer_in_the_top_passage_fails():
    q = QUERIES[0]
    top = PASSAGES[q["gold_doc_id"]]
    refusal = "لا توجد معلومات عن ذلك في الوثائق."
    with_gold = refusal_despite_evidence(refusal, q["question"], top, q["lang"], gold=q["answers"])
    assert not with_gold.passed and "gold" in with_gold.reason
    elsewhere = PASSAGES[next(d for d in PASSAGES if d.endswith("-ar") and d != q["gold_doc_id"])]
    assert refusal_despite_evidence(refusal, q["question"], elsewhere, q["lang"], gold=q["answers"]).passed
    assert refusal_despite_evidence("308", q["question"], top, q["lang"], gold=q["answers"]).passed


def test_without_gold_the_lexical_signal_decides():
    question = "How many points did the Panthers defense surrender?"
    top = "The Panthers defense surrendered just 308 points, ranking sixth in the league."
    assert not refusal_despite_evidence("The documents do not say.", question, top, "en").passed
    unrelated = "Tesla was born in Smiljan in 1856 and moved to the United States."
    assert refusal_despite_evidence("The documents do not say.", question, unrelated, "en").passed


@pytest.mark.parametrize(("answer", "question", "lang"), [
    # seen from the local model: a sentence that restates the question around the answer word
    ("الطلاب ذهبوا إلى فيتنبرغ لسماع خطابات لوثر.", "من ذهب إلى فيتنبرغ لسماع خطابات لوثر؟", "ar"),
    ("Studenten strömten nach Wittenberg, um Luther sprechen zu hören.",
     "Wer strömte nach Wittenberg, um Luther sprechen zu hören?", "de"),
])
def test_a_restated_question_with_the_answer_in_it_is_an_answer(answer, question, lang):
    assert non_answer(answer, question, lang).passed


@pytest.mark.parametrize(("answer", "question", "lang"), [
    # seen from the local model: the question asked back, and the question's words rearranged
    ("منذ متى دخلت البكتيريا الزرقاء خلية؟", "منذ متى دخلت البكتيريا الزرقاء إلى خلية حقيقية النواة؟", "ar"),
    ("الخلايا الزرقاء دخلت البكتيريا الزرقاء منذ فترة طويلة.",
     "أي نوع من الخلايا دخلت البكتيريا الزرقاء منذ فترة طويلة؟", "ar"),
])
def test_the_question_asked_back_or_rearranged_is_not_an_answer(answer, question, lang):
    assert not non_answer(answer, question, lang).passed


@pytest.mark.parametrize(("question", "answer", "lang"), [
    # seen from the default model on the README's first question: "لا" glued to the question's verb
    ("هل أحتاج إلى تأشيرة لزيارة اليابان؟", "لاحتاج إلى تأشيرة لزيارة اليابان", "ar"),
    ("هل أحتاج إلى تأشيرة لزيارة اليابان؟", "لا أحتاج إلى تأشيرة لزيارة اليابان.", "ar"),
    ("Do I need a visa to visit Japan?", "You do not need a visa to visit Japan.", "en"),
    ("¿Necesito un visado para visitar Japón?", "No necesito un visado para visitar Japón.", "es"),
])
def test_a_yes_or_no_made_of_the_questions_words_is_an_answer(question, answer, lang):
    assert non_answer(answer, question, lang).passed
    # the same words without the yes or the no still say nothing
    assert not non_answer(question, question, lang).passed


# The Travel question a 1.5B model repeated with a hamza its asker left out (answers.py, #33):
# it passed as an answer, and as a verified one
EMIRATI = "انا اماراتي اقدر اسوق بامريكا برخصتي"


@pytest.mark.parametrize("echo", ["أنا اماراتي اقدر اسوق بامريكا برخصتي", "أنا إماراتي أقدر أسوق بأمريكا برخصتي",
                                  "انا اماراتـي اقدر اسوق بامريكا برخصتى"])
def test_the_question_echoed_in_other_arabic_spellings_is_not_an_answer(echo):
    assert not non_answer(echo, EMIRATI, "ar").passed
    assert non_answer("نعم، " + echo, EMIRATI, "ar").passed  # a yes of its own answers it


def test_spelling_variants_of_a_passage_support_the_answer_and_refusals_are_read_through_them():
    passage = "يمكن للمواطن الإماراتي القيادة برخصة القيادة الإماراتية في الولايات المتحدة الأمريكية"
    assert unsupported("يمكن للمواطن الاماراتي القيادة برخصة القيادة الاماراتية", EMIRATI, [passage], "ar").passed
    assert is_refusal("لا استطيع الاجابة عن هذا السؤال", "ar") and is_refusal("لا أستطيع تقديم معلومات", "ar")


@pytest.mark.parametrize(("answer", "question", "lang"), [
    # seen from the default model (benchmarks/results/answers.json): a lead-in, then nothing
    ("الإجابة هي:", "رخصة القيادة الاماراتية صالحة الفاتيكان", "ar"),
    ("العطل الرسمية في جزر كوك هي:", "ما هي العطل الرسمية في جزر كوك", "ar"),
    ("The emergency numbers in Uzbekistan are: <doc1>", "What are the emergency numbers in Uzbekistan?", "en"),
    ("答案是：", "特斯拉是哪一年去世的？", "zh"),
])
def test_a_lead_in_whose_list_never_comes_is_not_an_answer(answer, question, lang):
    f = non_answer(answer, question, lang)
    assert not f.passed and "announces what it never says" in f.reason


@pytest.mark.parametrize(("answer", "question", "lang"), [
    ("Ambulance 911, Police:", "What are Fiji's emergency numbers?", "en"),  # a list cut short
    ("Jared Allen had 136 sacks. His teams were:", "How many career sacks did Jared Allen have?", "en"),
    ("The emergency numbers are: Police 917, Ambulance 911", "What are Fiji's emergency numbers?", "en"),
])
def test_an_answer_before_its_lead_in_or_after_its_colon_is_an_answer(answer, question, lang):
    assert non_answer(answer, question, lang).passed


def test_on_the_committed_answer_benchmark_the_lead_in_rule_flags_no_right_answer():
    """Known truth: the 1,521 answers of benchmarks/results/answers.json, each judged by the
    calibrated lexical judge. Every one that ends in a colon is judged wrong; the rule catches
    those that say nothing before it, and no answer judged right."""
    path = Path(__file__).parents[2] / "benchmarks" / "results" / "answers.json"
    rows = [r for r in json.loads(path.read_text("utf-8"))["rows"] if r["answer"]]
    lead_ins = [r for r in rows if r["answer"].rstrip().endswith((":", "："))]
    caught = [r for r in lead_ins if "announces" in non_answer(r["answer"], r["question"], r["lang"]).reason]
    # the 8 others say something before their lead-in: a count ("3 المستشفيات ... هي:"), "there is a
    # holiday every month, including:", or a yes ("نعم، ...") the polarity rule reads as an answer
    assert len(lead_ins) == 28 and len(caught) == 20
    assert all(r["panel"] == "incorrect" for r in lead_ins)
    right = [r for r in rows if r["panel"] == "correct"]
    assert len(right) > 600
    assert not [r["answer"] for r in right if "announces" in non_answer(r["answer"], r["question"], r["lang"]).reason]


@pytest.mark.parametrize(("explanation", "question", "lang"), [
    # the Hindi reply: an explanation that says the question again, and nothing it found
    ("इस्लाम के प्रगतिशील नरमपंथी जो अलग करना चाहते हैं <doc0>",
     "इस्लाम के प्रगतिशील नरमपंथी क्या अलग करना चाहते हैं?", "hi"),
    # seen from the default model (benchmarks/results/answers.json)
    ("Die Zeitenachse in der vierten Skala wird in genauer detailliert dargestellt.",
     "Welche Zeitachse wird in der vierten Skala genauer detailliert dargestellt?", "de"),
    ("منذ متى دخلت البكتيريا الزرقاء خلية؟", "منذ متى دخلت البكتيريا الزرقاء خلية؟", "ar"),
])
def test_an_explanation_that_restates_the_question_is_a_non_answer(explanation, question, lang):
    assert restates_question(explanation, question, lang)
    f = non_answer("308", question, lang, explanation=explanation)
    assert not f.passed and "explanation only restates the question" in f.reason
    assert non_answer("308", question, lang).passed  # the answer line alone says something


@pytest.mark.parametrize(("explanation", "question", "lang"), [
    ("The emergency number in Kuwait is 112.", "What is the emergency number in Kuwait?", "en"),  # adds the number
    ("No, the UAE licence is not recognised in Latvia.", "Can I use my UAE driving license in Latvia?", "en"),
    ("The West Side of Fresno is also known as Southwest Fresno.", "What is another name for the west side of Fresno?",
     "en"),
])
def test_an_explanation_that_adds_what_it_found_is_not_a_restatement(explanation, question, lang):
    assert not restates_question(explanation, question, lang)
    assert non_answer("x y", question, lang, explanation=explanation).passed


def test_on_the_committed_answer_benchmark_a_restating_explanation_is_mostly_a_wrong_answers_one():
    """Known truth: the committed answer benchmark's 1,078 distinct explanations, each answer read
    by the calibrated judge. The rule flags 12: 10 of answers judged wrong, 2 of answers judged
    right (an Arabic yes-type answer, "health care is available in the Marshall Islands", and an
    English list whose explanation only says where the list is)."""
    path = Path(__file__).parents[2] / "benchmarks" / "results" / "answers.json"
    seen, flagged = set(), Counter()
    for r in json.loads(path.read_text("utf-8"))["rows"]:
        key = (r.get("explanation"), r["question"], r["answer"])
        if not r.get("explanation") or key in seen:
            continue
        seen.add(key)
        if restates_question(r["explanation"], r["question"], r["lang"]):
            flagged[r["panel_final"]] += 1
    assert flagged == {"incorrect": 10, "correct": 2}, flagged
