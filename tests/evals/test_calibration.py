"""Judge calibration: the items of known truth, the lexical judge, the figures, the chosen panel."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from pydantic import ValidationError

from tests.clitools import error_line, run
from tests.prompts.recorded import recorded_format
from xlrag.checks.lexical import tokenize
from xlrag.errors import ConfigError
from xlrag.evals.calibration import (
    CALIBRATION_FILE,
    calibrate,
    calibration_key,
    judge_calibration,
    judge_items,
    markdown,
)
from xlrag.evals.calibration_items import (
    CORRECT_KINDS,
    KINDS,
    TRAVEL_KINDS,
    TRAVEL_PER_KIND,
    XQUAD_PER_KIND,
    build_items,
    stratified,
    vendored_langs,
)
from xlrag.evals.experiment import load_experiment
from xlrag.evals.run_folder import read_records
from xlrag.judges.lexical import (
    LexicalJudge,
    LexicalJudgeConfig,
    answer_in_gold,
    gold_recall,
    in_other_language,
)
from xlrag.judges.panel import JudgeConfig, PanelConfig, default_panel
from xlrag.prompts import PromptLibrary


@pytest.fixture(scope="module")
def items():
    return build_items()


def _holds(text, part, lang):
    return f" {' '.join(tokenize(part, lang))} " in f" {' '.join(tokenize(text, lang))} "


def _parallel_golds():
    """Every gold answer of each XQuAD question's translations, by question id."""
    rows = [json.loads(x) for x in (CALIBRATION_FILE.parents[2] / "xlrag/data/xquad/queries.jsonl")
            .read_text(encoding="utf-8").splitlines()]
    by_base: dict[str, list[str]] = {}
    for r in rows:
        by_base.setdefault(r["id"].rsplit("-", 1)[0], []).extend(r["answers"])
    return {r["id"]: by_base[r["id"].rsplit("-", 1)[0]] for r in rows}


def test_items_cover_every_language_and_kind_in_balance(items):
    assert len(items) >= 300
    assert {i.lang for i in items} == set(vendored_langs()) == {"ar", "de", "en", "es", "ru", "zh"}
    cells = Counter((i.dataset, i.lang, i.kind) for i in items)
    for lang in ("ar", "de", "en", "es", "ru", "zh"):
        for kind in KINDS:
            assert cells[("xquad", lang, kind)] == XQUAD_PER_KIND, (lang, kind)
    for lang in ("ar", "en"):
        for kind in TRAVEL_KINDS:
            assert cells[("travel", lang, kind)] == TRAVEL_PER_KIND, (lang, kind)
    assert len({i.id for i in items}) == len(items)


def test_items_are_seeded(items):
    assert build_items() == items
    other = build_items(seed=1)
    assert len(other) == len(items) and other != items


def test_correct_items_hold_the_gold_or_its_translation(items):
    parallel = _parallel_golds()
    for i in items:
        if not i.truth:
            continue
        assert i.kind in CORRECT_KINDS
        if i.kind == "parallel_gold":
            qid = i.id.split(":")[1]
            assert i.answer in parallel[qid] and i.answer not in i.gold, i
            assert not any(_holds(i.answer, g, i.lang) or _holds(g, i.answer, i.lang) for g in i.gold), i
        elif i.kind == "span_of_sentence":
            # the gold is the passage sentence; the answer is the span in it, which the question lacks
            assert i.answer in i.gold[0] and len(i.gold[0]) > len(i.answer) + 5, i
            assert not _holds(i.question, i.answer, i.lang), i
        else:
            assert any(g in i.answer for g in i.gold), i
            if i.kind == "gold_in_sentence":
                assert len(i.answer) > len(i.gold[0]), i


def test_no_wrong_item_holds_the_gold(items):
    wrong = [i for i in items if not i.truth]
    assert len(wrong) > 150
    for i in wrong:
        assert not any(_holds(i.answer, g, i.lang) for g in i.gold), i


def test_wrong_spans_against_a_sentence_gold(items):
    spans = {i.id.split(":")[1]: i for i in items if i.kind == "span_of_sentence"}
    for kind, inside in (("other_span_of_sentence", False), ("same_sentence_other_span", True)):
        made = [i for i in items if i.kind == kind]
        assert len(made) == 6 * XQUAD_PER_KIND and not any(i.truth for i in made)
        for i in made:
            # another question's gold, in the sentence that is this gold (or not), never this question's span
            assert _holds(i.gold[0], i.answer, i.lang) is inside, i
            assert not _holds(i.question, i.answer, i.lang), i
            qid = i.id.split(":")[1]
            if qid in spans:
                assert spans[qid].gold == i.gold and spans[qid].answer != i.answer


def test_a_wrong_answer_in_another_script_is_another_questions_translated_gold(items):
    parallel = _parallel_golds()
    made = [i for i in items if i.kind == "parallel_other_gold"]
    assert made and not any(i.truth for i in made)
    for i in made:
        qid = i.id.split(":")[1]
        assert i.answer not in parallel[qid], i
        assert any(i.answer in golds for other, golds in parallel.items() if other != qid), i
        assert in_other_language(i.answer, i.gold, i.lang), i


def test_spot_checks(items):
    by_id = {i.id: i for i in items}
    echo = next(i for i in items if i.kind == "echo")
    assert echo.answer == echo.question and not echo.truth
    marker = [i for i in items if i.kind == "non_answer"]
    assert {"", "<doc1>"} & {i.answer for i in marker}
    # the shipped example block holds headers only (#33): a copied template line is a bare header
    assert any(i.answer in {"Cited Documents:", "Answer:", "Explanation:"} for i in marker if i.lang == "en")
    # a Cyrillic gold answer is offered in English; a Latin one ("Troika Design Group") in another script
    ru = [i for i in by_id.values() if i.kind == "parallel_gold" and i.lang == "ru"]
    cyrillic = [i for i in ru if any("\u0400" <= ch <= "\u04ff" for ch in i.gold[0])]
    assert cyrillic and all(i.note.endswith("parallel en question") for i in cyrillic)
    assert all(not i.note.endswith("parallel en question") for i in ru if i not in cyrillic)


def test_bad_languages_are_one_line_errors():
    with pytest.raises(ConfigError, match="no vendored calibration data in fr; choose from ar, de"):
        build_items(["fr"])
    assert "unknown language code 'xx-nope'" in error_line(run("eval", "calibrate", "--langs", "xx-nope"))
    assert "no vendored calibration data in fr" in error_line(run("eval", "calibrate", "--langs", "fr"))
    assert "--judges nope: no such candidate" in error_line(run("eval", "calibrate", "--judges", "nope"))


def test_stratified_limit_takes_every_cell_in_turn(items):
    part = stratified(items, 20)
    assert len(part) == 20 and len({(i.dataset, i.lang, i.kind) for i in part}) == 20
    assert stratified(items, None) == items


@pytest.mark.parametrize(
    ("gold", "response", "lang", "correct"),
    [
        ("308", "The Panthers gave up 308 points <doc0>.", "en", True),
        ("1961", "它成立于1961年。", "zh", True),
        ("Саксонский сад", "Летний театр находился в Саксонском саду.", "ru", True),  # case endings: 78%
        ("Denver Broncos", "The Broncos won.", "en", False),
        # another script: compared by meaning (multilingual e5)
        ("Саксонский сад", "Saxon Garden", "ru", True),
        ("Denver Broncos", "Денвер Бронкос", "en", True),
        ("Саксонский сад", "the Summer Theatre", "ru", False),
        # numbers read the same in every language: one the gold lacks is no translation of it
        ("Саксонский сад", "Saxon Garden, 1961", "ru", False),
        ("308", "", "en", False),
        ("308", "<doc0>", "en", False),
    ],
)
def test_lexical_judge_on_hand_made_items(gold, response, lang, correct):
    judge = LexicalJudge(LexicalJudgeConfig(kind="lexical"))
    verdict, why = judge.vote("How many points?", [gold], response, lang)
    assert verdict is correct, why


PANTHERS = ("The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading "
            "the NFL in interceptions with 24 and boasting four Pro Bowl selections.")


TONGA = "Constitutional Day in Tonga is celebrated on November 4 every year."


@pytest.mark.parametrize(
    ("question", "gold", "response", "lang", "correct"),
    [
        # a concise answer to a question whose gold is a whole sentence
        ("When is Constitutional Day celebrated in Tonga?", TONGA, "November 4", "en", True),
        ("When is Constitutional Day celebrated in Tonga?", TONGA, "On the 4th of November.", "en", True),
        # most of its n-grams are in the gold, but not its number
        ("When is Constitutional Day celebrated in Tonga?", TONGA, "On November 5.", "en", False),
        ("When is Constitutional Day celebrated in Tonga?", TONGA, "November 14", "en", False),
        # restating the question adds nothing
        ("When is Constitutional Day celebrated in Tonga?", TONGA, "Constitutional Day in Tonga.", "en", False),
        ("ما هي ارقام الاسعاف في السنغال؟", "يمكنك الاتصال بالإسعاف في السنغال على الرقم 15 أو الرقم 338891515.",
         "15", "ar", True),
        ("ما هي ارقام الاسعاف في السنغال؟", "يمكنك الاتصال بالإسعاف في السنغال على الرقم 15 أو الرقم 338891515.",
         "17", "ar", False),
        # Chinese: the question's characters are taken out one by one
        ("除了1之外，素数可被什么唯一整除？",
         "素数是指在大于1的自然数中，除了1和 该数自身 外，无法被其他自然数整除的数。",
         "该数自身", "zh", True),
        ("除了1之外，素数可被什么唯一整除？",
         "素数是指在大于1的自然数中，除了1和 该数自身 外，无法被其他自然数整除的数。",
         "它的平方", "zh", False),
        # the answer line is read alone too: an explanation may say more than the gold
        ("When is Constitutional Day celebrated in Tonga?", TONGA,
         "November 4\nBecause the constitution of 1875 was signed then <doc0>.", "en", True),
        # the rule is for sentence golds only: a short gold still has to be in the response
        ("When?", "November 4, 1875", "November", "en", False),
        # words of the gold that answer another question stand away from what this one asks
        ("How many points did the Panthers defense surrender?", PANTHERS, "308", "en", True),
        ("How many points did the Panthers defense surrender?", PANTHERS, "24", "en", False),
        ("How many interceptions did the Panthers defense have?", PANTHERS, "24", "en", True),
    ],
)
def test_a_concise_answer_to_a_sentence_gold(question, gold, response, lang, correct):
    judge = LexicalJudge(LexicalJudgeConfig(kind="lexical"))
    verdict, why = judge.vote(question, [gold], response, lang)
    assert verdict is correct, why
    if correct and response != "On the 4th of November." and "\n" not in response:
        assert answer_in_gold(response, question, [gold], lang) == (1.0, gold)


def test_cross_lingual_reading_can_be_turned_off():
    judge = LexicalJudge(LexicalJudgeConfig(kind="lexical", cross_lingual="off"))
    verdict, why = judge.vote("Where?", ["Саксонский сад"], "Saxon Garden", "ru")
    assert verdict is False and "n-grams" in why
    assert judge.config.label == "lexical/monolingual"
    assert LexicalJudgeConfig(kind="lexical", similarity=0.9).label == "lexical~0.9"


def test_other_language_is_script_or_a_confident_lingua_reading():
    assert in_other_language("Saxon Garden", ["Саксонский сад"], "ru")
    assert in_other_language("一九六一年", ["July 1961"], "en")
    assert in_other_language("la mayoría de los países occidentales", ["most Western countries"], "en")
    assert not in_other_language("the Summer Theatre in the garden", ["Saxon Garden"], "en")
    assert not in_other_language("1961", ["июль 1961"], "ru")  # digits read the same everywhere


def test_lexical_judge_turns_down_echoes_and_templates():
    judge = LexicalJudge(LexicalJudgeConfig(kind="lexical"))
    q = "Where did the Panthers play Super Bowl 50 against Denver?"
    verdict, why = judge.vote(q, ["Denver"], q, "en")
    assert verdict is False and "repeats the question" in why
    # the shipped template's instruction line, copied as the answer
    instruction = PromptLibrary().render("citation_format", "en", answer_header="Answer:").splitlines()[0]
    verdict, why = judge.vote("How many points?", ["308"], instruction, "en")
    assert verdict is False and "template" in why
    # a placeholder of an older template (replies recorded before #33) under a judge given that template
    old = LexicalJudge(LexicalJudgeConfig(kind="lexical"), templates=[recorded_format("en", "Answer:")])
    verdict, why = old.vote("How many points?", ["your answer"], "Answer: your answer", "en")
    assert verdict is False and "template" in why
    assert gold_recall("It gave up 308 points", ["136", "308"], "en") == (1.0, "308")


def test_panel_config_takes_the_lexical_judge_beside_llm_judges():
    cfg = PanelConfig.model_validate({"judges": [{"kind": "lexical", "threshold": 0.6},
                                                 {"provider": "local", "model": "gemma-3-270m"},
                                                 {"kind": "llm", "seed": 3}]})
    assert isinstance(cfg.judges[0], LexicalJudgeConfig) and cfg.judges[0].label == "lexical@0.6"
    assert [type(j) for j in cfg.judges[1:]] == [JudgeConfig, JudgeConfig]
    assert [j.label for j in cfg.llm_judges] == ["local:gemma-3-270m:seed0", "local:default:seed3"]
    with pytest.raises(ValidationError, match="Extra inputs"):
        PanelConfig.model_validate({"judges": [{"kind": "lexical", "provider": "local"}]})
    with pytest.raises(ValidationError, match="does not match any of the expected tags"):
        PanelConfig.model_validate({"judges": [{"kind": "lexcal"}]})
    with pytest.raises(ValidationError, match="configured twice"):
        PanelConfig.model_validate({"judges": [{"kind": "lexical"}, {"kind": "lexical"}]})


def test_the_shipped_panels_still_load():
    from xlrag.evals.studies import load_run_config

    root = CALIBRATION_FILE.parents[2]
    for cfg in (load_run_config(root / "experiments/xrag.yaml"),
                load_experiment(root / "benchmarks/experiments/travel_offline.yaml")):
        assert len(cfg.judges.llm_judges) == 3 == len(cfg.judges.judges)
    # the Travel report is judged by the calibrated panel
    travel = load_experiment(root / "experiments/travel_retrieval.yaml")
    assert [calibration_key(j) for j in travel.judges.judges] == [calibration_key(j) for j in default_panel().judges]


def test_calibration_of_the_lexical_judge(items):
    candidates = PanelConfig(judges=[{"kind": "lexical"}, {"kind": "lexical", "threshold": 0.5}])
    votes = judge_items(candidates, items)
    report = calibrate(candidates, items, votes)
    lex = report["judges"]["lexical"]
    assert lex["n"] == len(items) and lex["invalid_rate"]["mean"] == 0.0
    # within a language it reads nearly every item right; across scripts, by meaning, most
    # (and it does not take every answer in another script for correct)
    # words of a sentence gold that answer another question pass for an answer: measured, not hidden
    # a span of a sentence gold is placed by the question's words near it (NEAR_ASKED): it
    # turns down about 2 in 5 spans that answer another question, and 1 in 6 right ones
    hard = {"parallel_gold", "parallel_other_gold", "same_sentence_other_span", "span_of_sentence"}
    for kind in set(KINDS) - hard:
        assert lex["per_kind"][kind]["accuracy"]["mean"] > 0.95, kind
    assert lex["per_kind"]["parallel_gold"]["accuracy"]["mean"] > 0.6
    assert lex["per_kind"]["parallel_other_gold"]["accuracy"]["mean"] > 0.8
    assert lex["per_kind"]["span_of_sentence"]["accuracy"]["mean"] > 0.8
    assert lex["per_kind"]["same_sentence_other_span"]["accuracy"]["mean"] > 0.3
    assert lex["per_kind"]["same_sentence_other_span"]["n"] == 6 * XQUAD_PER_KIND
    assert all(g["accuracy"]["mean"] >= 0.85 for g in lex["per_language"].values())
    lo, hi = lex["accuracy"]["ci95"]
    assert lo < lex["accuracy"]["mean"] < hi and lex["kappa"]["value"] > 0.75
    mono = judge_items(PanelConfig(judges=[{"kind": "lexical", "cross_lingual": "off"}]),
                       [i for i in items if i.kind == "parallel_gold"])["lexical/monolingual"]["votes"]
    assert sum(v.verdict == "correct" for v in mono.values()) <= 0.2 * len(mono)
    assert set(report["panels"]) == {"lexical", "lexical@0.5", "lexical + lexical@0.5"}
    assert report["chosen"]["panel"] in report["panels"] and report["chosen"]["why"]
    md = markdown(report)
    assert "| judge: lexical |" in md and "parallel_gold" in md


def test_default_panel_is_the_one_the_calibration_chose():
    committed = json.loads(CALIBRATION_FILE.read_text(encoding="utf-8"))
    chosen = PanelConfig.model_validate(committed["chosen"]["config"])
    assert [calibration_key(j) for j in chosen.judges] == [calibration_key(j) for j in default_panel().judges]
    assert chosen.tie_break == default_panel().tie_break
    # the models voted on a stratified part; the items built, and the lexical judge, cover them all
    assert committed["items_built"] >= 300 and committed["items"] >= 100
    assert committed["model_free_all_items"]["lexical"]["n"] == committed["items_built"]
    assert all(g["invalid_rate"]["mean"] <= 0.01 for j in committed["judges"].values()
               for g in j["per_language"].values())
    for judge in default_panel().judges:
        found = judge_calibration(judge, committed)
        assert found is not None and found["accuracy"]["mean"] is not None, judge
    # a model-free judge is reported with its measurement on every item
    lexical = judge_calibration(LexicalJudgeConfig(kind="lexical"), committed)
    assert lexical["items"] == committed["items_built"] > committed["items"]


def test_report_shows_each_judges_calibration(tmp_path):
    import yaml

    from tests.evals.test_report import _record
    from xlrag.evals.experiment import ExperimentConfig
    from xlrag.evals.report import build_report, markdown

    panel = default_panel().model_dump(mode="json")
    uncalibrated = {"name": "odd", "provider": "local", "model": "gemma-3-270m", "max_tokens": 17}
    panel["judges"].append(uncalibrated)
    cfg = ExperimentConfig.model_validate({"name": "hand", "datasets": [{"name": "travel"}], "modes": ["qlang"],
                                           "judges": panel})
    (tmp_path / "experiment.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json")))
    labels = cfg.judges.labels
    rec = _record("q1", "en", ["correct"] * len(labels), "correct", "correct", 1.0)
    for vote, label in zip(rec["judges"]["votes"], labels, strict=True):
        vote["judge"] = label
    (tmp_path / "records.jsonl").write_text(json.dumps(rec) + "\n")
    assert read_records(tmp_path / "records.jsonl")
    report = build_report(tmp_path)
    cal = report["judge_calibration"]
    assert cal["source"] == "benchmarks/results/judges.json"
    assert cal["judges"]["odd"] is None
    assert all(cal["judges"][x] is not None for x in labels[:-1])
    md = markdown(report)
    assert "odd: voted correct 1.00 of 1 valid votes, 0 invalid; not calibrated" in md
    assert f"{labels[0]}: voted correct 1.00 of 1 valid votes, 0 invalid; calibrated accuracy" in md


def test_a_judge_near_chance_is_left_out_of_the_shipped_panel():
    from xlrag.evals.calibration import MIN_MEMBER_KAPPA, choose_panel

    candidates = PanelConfig(judges=[{"kind": "lexical"}, {"name": "coin", "model": "qwen2.5-coder-0.5b-instruct"}])
    fig = {"accuracy": {"mean": 0.9}, "per_language": {"en": {"accuracy": {"mean": 0.9}}}}
    meets = {"accuracy": True, "invalid": True}
    panels = {"lexical": {"members": ["lexical"], "figures": fig, "meets": meets, "shared_accuracy": 0.90},
              "lexical + coin": {"members": ["lexical", "coin"], "figures": fig, "meets": meets,
                                 "shared_accuracy": 0.92}}
    # the better accuracy on the shared items wins while both members agree with the truth...
    assert choose_panel(candidates, panels, {"lexical": 0.8, "coin": 0.5})[0] == "lexical + coin"
    # ...but not through a member near chance on its own
    best, why = choose_panel(candidates, panels, {"lexical": 0.8, "coin": MIN_MEMBER_KAPPA - 0.01})
    assert best == "lexical" and "coin 0.39" in why
