"""`text-cases` (the hand-written presentations, broken and empty files) and `ddxplus-text` (the DDXPlus
mini set told in the first person), checked against the raw files read here."""

from __future__ import annotations

import ast
import csv
import json
import re
from pathlib import Path

import pytest
import simple_icd_10_cm as cm

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.eval.datasets import load_dataset
from clinrag.eval.datasets.ddxplus_text import FirstPersonRenderer, names_pathology

PRESENTATIONS = Path(__file__).resolve().parents[2] / "data" / "consult" / "common_presentations.jsonl"


# --- text-cases ---------------------------------------------------------------------------------------------


def test_hand_written_presentations_load_completely():
    raw = [
        json.loads(line) for line in PRESENTATIONS.read_text(encoding="utf-8").splitlines() if line.strip()
    ]
    dataset = load_dataset("text-cases", PRESENTATIONS)
    assert len(dataset.cases) == len(raw) >= 35
    assert len({case.id for case in dataset.cases}) == len(dataset.cases)
    assert dataset.records == [] and "skipped" not in dataset.report
    for case, line in zip(dataset.cases, raw, strict=True):
        assert case.task == "ddx" and case.question == case.patient.initial_presentation == line["text"]
        assert len(case.question) > 150  # a presentation, not a keyword
        assert case.gold.answer == line["diagnosis"] and case.gold.answers[0] == line["diagnosis"]
        assert set(line["synonyms"]) <= set(case.gold.answers)
        assert case.patient.demographics.age == line["age"] and case.patient.demographics.sex == line["sex"]
        assert cm.is_valid_item(case.meta["icd10"]), case.meta["icd10"]
        assert case.options == {}


def test_presentations_do_not_name_their_diagnosis():
    for case in load_dataset("text-cases", PRESENTATIONS).cases:
        for name in case.gold.answers:
            assert not re.search(rf"\b{re.escape(name)}\b", case.question, re.IGNORECASE), (case.id, name)


def _write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_broken_lines_are_skipped_and_reported(tmp_path):
    good = {"id": "a", "text": "I have a cough and a fever.", "diagnosis": "Pneumonia", "icd10": "J18"}
    with_options = {
        "id": "b",
        "text": "My throat hurts.",
        "diagnosis": "Strep throat",
        "synonyms": ["Streptococcal pharyngitis"],
        "options": ["Streptococcal pharyngitis", "Common cold"],
        "sex": "female",
        "age": 16,
    }
    file = _write(
        tmp_path / "cases.jsonl",
        [
            json.dumps(good),
            "{not json",
            json.dumps({"id": "c", "text": "", "diagnosis": "Gout"}),
            json.dumps({"id": "d", "text": "Sore toe.", "diagnosis": "Gout", "options": ["Cellulitis"]}),
            "[1, 2]",
            json.dumps(with_options),
        ],
    )
    dataset = load_dataset("text-cases", file)
    assert [case.id for case in dataset.cases] == ["a", "b"]
    assert dataset.cases[0].meta == {"icd10": "J18"} and dataset.cases[0].gold.answers == ["Pneumonia"]
    second = dataset.cases[1]
    assert second.options == {
        "Streptococcal pharyngitis": "Streptococcal pharyngitis",
        "Common cold": "Common cold",
    }
    assert second.gold.answers == ["Strep throat", "Streptococcal pharyngitis"] and second.meta == {}
    assert "skipped 1 broken lines: 2" in dataset.report
    assert "skipped 1 records with missing or invalid fields: 3" in dataset.report
    assert "skipped 1 records whose answer is not among their options: 4" in dataset.report
    assert "skipped 1 lines that are not JSON objects: 5" in dataset.report


def test_a_file_without_cases_is_an_error(tmp_path):
    with pytest.raises(DataFormatError):
        load_dataset("text-cases", _write(tmp_path / "empty.jsonl", [""]))
    with pytest.raises(DataFormatError):
        load_dataset("text-cases", _write(tmp_path / "invalid.jsonl", [json.dumps({"id": "x"})]))


def test_duplicate_ids_are_refused(tmp_path):
    line = json.dumps({"id": "same", "text": "I feel dizzy.", "diagnosis": "Anemia"})
    with pytest.raises(InvalidInputError):
        load_dataset("text-cases", _write(tmp_path / "twice.jsonl", [line, line]))


# --- ddxplus-text -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ddxplus_rows(data_dir: Path) -> list[dict[str, str]]:
    with (data_dir / "ddxplus" / "test_patients_mini.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def renderer(data_dir: Path) -> FirstPersonRenderer:
    return FirstPersonRenderer.from_file(data_dir / "ddxplus" / "release_evidences.json")


def test_ddxplus_text_tells_every_patient_in_words(loaded, ddxplus_rows, renderer):
    dataset = loaded("ddxplus-text")
    assert len(dataset.cases) == len(ddxplus_rows) == 2100
    binary = {name for name, entry in renderer.evidences.items() if entry["data_type"] == "B"}
    for case, row in zip(dataset.cases, ddxplus_rows, strict=True):
        text, pathology = case.question, row["diagnosis"]
        assert case.patient.initial_presentation == text and case.task == "ddx"
        assert "E_" not in text and "V_" not in text
        assert not re.search(rf"\b{re.escape(pathology)}\b", text, re.IGNORECASE)
        assert case.patient.codes == {} and case.meta == {}
        assert case.gold.answer == pathology and len(case.options) == 49
        sex = {"M": "man", "F": "woman"}[row["sex"]] if int(row["age"]) >= 18 else ""
        assert text.startswith("I am ") and sex in text.split(".")[0]
        # the chief complaint (the initial evidence) comes right after age and sex
        chief = row["feature_id"].partition("_@_")[0]
        if chief in binary:
            assert text.split(". ")[1].startswith("I came in mainly because")
            assert renderer.statement(chief).rstrip(".").casefold() in text.split(". ")[1].casefold()
        for code in ast.literal_eval(row["features"]):
            sentence = renderer.statement(code) if code in binary else None
            if sentence and not names_pathology(sentence, pathology):
                assert sentence.rstrip(".").casefold() in text.casefold(), (case.id, code)


def test_ddxplus_text_renders_pain_in_words(loaded):
    case = loaded("ddxplus-text").cases[0]  # row 0: sharp facial pain, 6/10, spreading to the temples
    assert "I have pain in my mouth, my forehead, my right and left cheek and my left eye." in case.question
    assert "It feels sharp." in case.question
    assert "On a scale of 0 to 10, I rate its intensity 6" in case.question
    assert "I came in mainly because I have nasal congestion or a clear runny nose." in case.question


def test_ddxplus_text_leaves_out_history_that_names_the_pathology(loaded, ddxplus_rows):
    dataset = loaded("ddxplus-text")
    named = [
        case
        for case, row in zip(dataset.cases, ddxplus_rows, strict=True)
        if row["diagnosis"] == "Pneumonia" and "E_118" in ast.literal_eval(row["features"])
    ]
    assert named and all("pneumonia" not in case.question.casefold() for case in named)
    assert "sentences left out because they name the patient's pathology" in dataset.report


def test_ddxplus_text_is_deterministic_and_shares_the_ddxplus_patient_base(loaded, data_dir):
    text, coded = loaded("ddxplus-text"), loaded("ddxplus")
    again = load_dataset("ddxplus-text", data_dir=data_dir)
    assert [c.question for c in again.cases] == [c.question for c in text.cases]
    assert [c.id for c in text.cases] == [c.id for c in coded.cases]
    assert [c.gold for c in text.cases] == [c.gold for c in coded.cases]
    assert text.records == coded.records and text.labels == coded.labels
