"""MedQA, MMLU-Med, PubMedQA and MedMCQA cases, checked against the raw files read here independently."""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError
from clinrag.eval.datasets import load_dataset

# Row counts of the six MMLU files, counted with the csv module (quoted fields span several lines, so these
# are not line counts); their sum is 1,089, the MMLU test-split sizes of these subjects.
MMLU_COUNTS = {
    "anatomy": 135,
    "clinical_knowledge": 265,
    "college_biology": 144,
    "college_medicine": 173,
    "medical_genetics": 100,
    "professional_medicine": 272,
}


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_medqa_matches_the_raw_file(loaded, data_dir):
    raw = _jsonl(data_dir / "medqa" / "us_4options_test.jsonl")
    dataset = loaded("medqa")
    assert len(raw) == 1000
    assert len(dataset.cases) == 1000
    # Past cases: MediQ's MedQA dev vignettes (a different split), labelled with their answer text.
    dev = _jsonl(data_dir / "medqa" / "mediq_dev_atomic_facts.jsonl")
    assert 0 < len(dataset.records) <= len(dev) and all(
        r.id.startswith("mediq-dev:") for r in dataset.records
    )
    first = dataset.records[0]
    assert first.id == f"mediq-dev:{dev[0]['id']}" and dataset.labels[first.id] == [dev[0]["answer"]]
    assert first.narrative.startswith(dev[0]["context"][0])
    by_id = {case.id: case for case in dataset.cases}
    for line in (1, 500, 1000):
        case, row = by_id[f"medqa:{line}"], raw[line - 1]
        assert case.question == row["question"].strip()
        assert case.options == row["options"]
        assert case.gold.answer == row["answer_idx"]
        assert case.options[case.gold.answer] == row["answer"]
    assert all(case.task == "multiple_choice" and set(case.options) == set("ABCD") for case in dataset.cases)


def test_medqa_without_the_dev_file_has_no_past_cases(data_dir, tmp_path):
    alone = tmp_path / "us_4options_test.jsonl"
    alone.write_text((data_dir / "medqa" / "us_4options_test.jsonl").read_text(encoding="utf-8"))
    dataset = load_dataset("medqa", alone)
    assert dataset.records == [] and dataset.labels == {} and "no past cases" in dataset.report


def test_mmlu_counts_per_subset_and_spot_rows(loaded, data_dir):
    dataset = loaded("mmlu-med")
    assert Counter(case.meta["subset"] for case in dataset.cases) == MMLU_COUNTS
    assert len(dataset.cases) == sum(MMLU_COUNTS.values()) == 1089
    with (data_dir / "mmlu_med" / "anatomy_test.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    case = next(case for case in dataset.cases if case.id == "mmlu-med:anatomy:2")
    assert case.question == rows[1][0] and case.question.startswith('A "dished face" profile')
    assert case.options == dict(zip("ABCD", rows[1][1:5], strict=True))
    assert case.gold.answer == rows[1][5] == "B"


@pytest.mark.parametrize("subset", sorted(MMLU_COUNTS))
def test_mmlu_single_subset(loaded, subset):
    dataset = loaded(f"mmlu-med:{subset}")
    assert len(dataset.cases) == MMLU_COUNTS[subset]
    assert {case.meta["subset"] for case in dataset.cases} == {subset}


def test_pubmedqa_question_carries_the_abstract_not_the_answer(loaded, data_dir):
    raw = json.loads((data_dir / "pubmedqa" / "test_set.json").read_text(encoding="utf-8"))
    dataset = loaded("pubmedqa")
    assert len(dataset.cases) == len(raw) == 500
    assert Counter(case.gold.answer for case in dataset.cases) == {"yes": 276, "no": 169, "maybe": 55}
    for case in dataset.cases[:50]:
        record = raw[case.meta["pmid"]]
        assert case.options == {"yes": "yes", "no": "no", "maybe": "maybe"}
        assert case.gold.answer == record["final_decision"]
        assert (
            case.question.startswith(record["QUESTION"]) and case.meta["question_only"] == record["QUESTION"]
        )
        assert all(context.strip() in case.question for context in record["CONTEXTS"])
        assert record["LONG_ANSWER"].strip() not in case.question  # the long answer states the conclusion


def test_medmcqa_cop_is_one_based_in_this_file(loaded, data_dir):
    """Cross-check: where an explanation opens with "Ans-x"/"Ans. is 'x'", x is the option at position cop
    counted from 1 (cop never is 0 here), and the case's gold letter is that option."""
    raw = _jsonl(data_dir / "medmcqa" / "dev.json")
    assert {row["cop"] for row in raw} == {1, 2, 3, 4}
    dataset = loaded("medmcqa")
    assert len(dataset.cases) == len(raw) == 4183  # no row skipped: all have 4 options and a valid cop
    by_id = {case.id: case for case in dataset.cases}
    marker = re.compile(r"\s*ans(?:wer)?[\s.:\-]*(?:is\s*)?['\"(]?([a-d])['\")]?[\s.:,)]", re.IGNORECASE)
    checked = 0
    for row in raw:
        found = marker.match(row["exp"] or "")
        if found is None:
            continue
        letter = found.group(1).upper()
        assert "ABCD".index(letter) + 1 == row["cop"]
        assert by_id[f"medmcqa:{row['id']}"].gold.answer == letter
        checked += 1
    assert checked > 1000
    first = by_id[f"medmcqa:{raw[0]['id']}"]
    assert first.options["A"] == raw[0]["opa"] and first.gold.answer == "A"
    assert all("exp" not in case.meta for case in dataset.cases)


@pytest.mark.parametrize("name", ["medqa", "mmlu-med", "pubmedqa", "medmcqa"])
def test_gold_is_an_option_and_ids_unique(loaded, name):
    cases = loaded(name).cases
    assert all(case.gold.answer in case.options for case in cases)
    assert len({case.id for case in cases}) == len(cases)


# --- malformed files ----------------------------------------------------------------------------------------


def test_medqa_broken_lines_are_reported_not_fatal(tmp_path):
    good = {"question": "Q?", "options": {"A": "x", "B": "y"}, "answer": "y", "answer_idx": "B"}
    wrong = {**good, "answer_idx": "A"}
    file = tmp_path / "medqa.jsonl"
    file.write_text(f"{json.dumps(good)}\n{{not json\n{json.dumps(wrong)}\n", encoding="utf-8")
    dataset = load_dataset("medqa", file)
    assert [case.id for case in dataset.cases] == ["medqa:1"]
    assert "broken lines: 2" in dataset.report
    assert "answer is not among their options: 3" in dataset.report


def test_medqa_without_any_valid_record_raises(tmp_path):
    file = tmp_path / "medqa.jsonl"
    file.write_text("{not json\n[1, 2]\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"medqa\.jsonl"):
        load_dataset("medqa", file)


def test_mmlu_bad_rows_are_reported_by_row_number(tmp_path):
    file = tmp_path / "anatomy_test.csv"
    file.write_text('Q1,a,b,c,d,A\nQ2,a,b,c,E\n"Q3\nspans lines",a,b,c,d,Z\nQ4,a,b,c,d,D\n', encoding="utf-8")
    dataset = load_dataset("mmlu-med", file)
    assert [case.id for case in dataset.cases] == ["mmlu-med:anatomy:1", "mmlu-med:anatomy:4"]
    assert "skipped 2 records with missing or invalid fields: 2, 3" in dataset.report


def test_not_utf8_and_not_json_are_typed_errors(tmp_path):
    latin = tmp_path / "anatomy_test.csv"
    latin.write_bytes("Qué,a,b,c,d,A\n".encode("latin-1"))
    with pytest.raises(DataFormatError, match="not UTF-8 at byte offset 2"):
        load_dataset("mmlu-med", latin)
    broken = tmp_path / "test_set.json"
    broken.write_text('{"1": {"QUESTION": "x",', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"test_set.json: not valid JSON \(line 1"):
        load_dataset("pubmedqa", broken)


def test_medmcqa_out_of_range_cop_is_skipped(tmp_path):
    row = {"id": "q1", "question": "Q?", "opa": "a", "opb": "b", "opc": "c", "opd": "d", "cop": 2}
    file = tmp_path / "dev.json"
    file.write_text("\n".join(json.dumps(r) for r in (row, {**row, "id": "q2", "cop": 0})), encoding="utf-8")
    dataset = load_dataset("medmcqa", file)
    assert [(case.id, case.gold.answer) for case in dataset.cases] == [("medmcqa:q1", "B")]
    assert "answer is not among their options: 2" in dataset.report
