"""Per-case metrics against values computed by hand from real rows of DDXPlus, MedQA and DialMed."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Answer, Case, DdxSnapshot, Gold, RankedDiagnosis, StructuredResult
from clinrag.eval.metrics import RANK_CAP, AnswerSpace, ddx_scores, gold_rank, score_case, set_scores


def _ddxplus_rows(data_dir: Path, n: int) -> list[dict[str, str]]:
    with (data_dir / "ddxplus" / "test_patients_mini.csv").open(encoding="utf-8") as handle:
        return [row for _, row in zip(range(n), csv.DictReader(handle), strict=False)]


def _ranked(names: list[str]) -> list[RankedDiagnosis]:
    return [RankedDiagnosis(name=name) for name in names]


def test_ddx_ranks_of_real_differentials(data_dir: Path) -> None:
    first, _, third = _ddxplus_rows(data_dir, 3)
    # Row 1: gold "Chronic rhinosinusitis" is 4th of the 8 listed; row 3: gold "Croup" is 1st.
    ddx = _ranked([name for name, _ in ast.literal_eval(first["top5_diagnoses"])])
    scores = ddx_scores(ddx, first["diagnosis"], AnswerSpace({}))
    assert scores == {"gtpa@1": 0.0, "gtpa@3": 0.0, "gtpa@5": 1.0, "gtpa@10": 1.0, "rank": 4.0}
    croup = _ranked([name for name, _ in ast.literal_eval(third["top5_diagnoses"])])
    assert ddx_scores(croup, "croup", AnswerSpace({}))["gtpa@1"] == 1.0  # labels compare case-insensitively


def test_rank_is_capped_at_eleven_beyond_the_top_ten(data_dir: Path) -> None:
    conditions = list(json.loads((data_dir / "ddxplus" / "release_conditions.json").read_text()))
    names = conditions[:12]
    assert gold_rank(_ranked(names), names[9], AnswerSpace({})) == 10
    assert gold_rank(_ranked(names), names[10], AnswerSpace({})) == RANK_CAP == 11  # 11th listed: capped
    assert gold_rank(_ranked(names), conditions[20], AnswerSpace({})) == 11  # absent
    assert gold_rank([], names[0], AnswerSpace({})) == 11


def test_option_keys_and_texts_name_the_same_answer(data_dir: Path) -> None:
    record = json.loads((data_dir / "medqa" / "us_4options_test.jsonl").open().readline())
    options, gold_key = record["options"], record["answer_idx"]
    case = Case(
        id="q",
        task="multiple_choice",
        question=record["question"],
        options=options,
        gold=Gold(answer=gold_key),
    )
    for predicted in (gold_key, options[gold_key], options[gold_key].upper()):
        answer = Answer(case_id="q", method="m", result=StructuredResult(choice=predicted))
        assert score_case(case, answer)[0] == {"accuracy": 1.0}
    wrong = next(key for key in options if key != gold_key)
    assert score_case(case, Answer(case_id="q", method="m", result=StructuredResult(choice=wrong)))[0] == {
        "accuracy": 0.0
    }
    failed = Answer(case_id="q", method="m", error="AnswerParseError: no option")
    assert score_case(case, failed)[0] == {"accuracy": 0.0}


def test_set_metrics_on_a_real_dialmed_label_set(data_dir: Path) -> None:
    labels = list(json.loads((data_dir / "dialmed" / "label.json").read_text()))
    gold = labels[:3]
    predicted = [labels[0], labels[1], labels[5], labels[6]]
    # 2 of 4 predicted are right (precision 1/2), 2 of 3 gold found (recall 2/3): F1 = (2/3)/(7/6) = 4/7.
    scores = set_scores(predicted, gold, AnswerSpace({}))
    assert scores["exact_set"] == 0.0
    assert scores["precision"] == pytest.approx(0.5)
    assert scores["recall"] == pytest.approx(2 / 3)
    assert scores["f1"] == pytest.approx(4 / 7)
    assert set_scores(list(reversed(gold)), gold, AnswerSpace({}))["exact_set"] == 1.0
    assert set_scores([], gold, AnswerSpace({})) == {
        "exact_set": 0.0,
        "precision": 0.0,
        "recall": 0.0,
        "f1": 0.0,
    }
    with pytest.raises(InvalidInputError):
        set_scores(predicted, [], AnswerSpace({}))


def test_turn_scores_and_delta_progress(data_dir: Path) -> None:
    row = _ddxplus_rows(data_dir, 1)[0]
    names = [name for name, _ in ast.literal_eval(row["top5_diagnoses"])]  # gold is names[3]
    gold = row["diagnosis"]
    without_gold = [n for n in names if n != gold]
    history = [
        DdxSnapshot(iteration=1, questions_asked=5, ddx=_ranked(without_gold)),  # absent: rank 11
        DdxSnapshot(iteration=2, questions_asked=10, ddx=_ranked(names)),  # rank 4
        DdxSnapshot(iteration=3, questions_asked=15, ddx=_ranked([gold, *without_gold])),  # rank 1
    ]
    case = Case(id="p", task="ddx", question="?", gold=Gold(answer=gold))
    answer = Answer(
        case_id="p", method="m", result=StructuredResult(ddx=history[-1].ddx, ddx_history=history)
    )
    scores, turns = score_case(case, answer)
    assert [t.scores["rank"] for t in turns] == [11.0, 4.0, 1.0]
    assert [t.scores["gtpa@5"] for t in turns] == [0.0, 1.0, 1.0]
    assert [t.questions_asked for t in turns] == [5, 10, 15]
    assert scores["delta_progress"] == 5.0  # 11 → 1 over two steps: 5 a step, as MEDDxAgent averages it
    assert scores["rank_gain"] == 10.0
    assert scores["questions_asked"] == 15.0  # by the last snapshot
    assert scores["gtpa@1"] == 1.0


def test_free_text_gold_matches_a_synonym_or_the_icd10_category() -> None:
    from clinrag.eval.datasets import load_dataset

    presentations = Path(__file__).parents[1] / "data" / "consult" / "common_presentations.jsonl"
    pneumonia = next(c for c in load_dataset("text-cases", presentations).cases if c.id == "cap-01")
    assert pneumonia.meta["icd10"] == "J18" and len(pneumonia.gold.answers) > 1

    def rank(*ddx: RankedDiagnosis) -> float:
        answer = Answer(case_id=pneumonia.id, method="m", result=StructuredResult(ddx=list(ddx)))
        return score_case(pneumonia, answer)[0]["rank"]

    lobar = RankedDiagnosis(name="Lobar pneumonia, unspecified", code="J18.1")
    assert rank(RankedDiagnosis(name="Influenza"), lobar) == 2.0  # J18.1 lies in the gold category J18
    assert rank(RankedDiagnosis(name=pneumonia.gold.answers[-1].upper())) == 1.0  # a synonym, any case
    assert rank(RankedDiagnosis(name="Asthma", code="J45.909")) == 11.0
