"""DDXPlus, iCraft-MD and DialMed: cases, records and labels, against the raw files read here."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError
from clinrag.eval.datasets import load_dataset


def _ddxplus_rows(data_dir: Path) -> list[dict[str, str]]:
    with (data_dir / "ddxplus" / "test_patients_mini.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


# --- DDXPlus ------------------------------------------------------------------------------------------------


def test_ddxplus_cases_match_the_csv(loaded, data_dir):
    conditions = json.loads((data_dir / "ddxplus" / "release_conditions.json").read_text(encoding="utf-8"))
    rows = _ddxplus_rows(data_dir)
    dataset = loaded("ddxplus")
    assert len(dataset.cases) == len(rows) == 2100 and len(dataset.records) == 2100
    english = {entry["cond-name-eng"] for entry in conditions.values()}
    for case in dataset.cases:
        assert case.task == "ddx" and len(case.options) == 49
        assert set(case.options) == set(case.options.values()) == english
    case = dataset.cases[1]
    row = rows[1]
    assert case.id == "ddxplus:1"
    assert case.gold.answer == row["diagnosis"] == "Acute pulmonary edema"
    assert [(d.name, d.probability) for d in case.gold.ddx] == [
        (name, pytest.approx(prob)) for name, prob in ast.literal_eval(row["top5_diagnoses"])
    ]
    assert case.patient.codes == {"evidence": ast.literal_eval(row["features"])}
    assert case.patient.demographics.age == int(row["age"]) == 27
    assert case.patient.demographics.sex == "female"


def test_ddxplus_cases_never_carry_the_diagnosis_in_codes_or_meta(loaded):
    dataset = loaded("ddxplus")
    for case in dataset.cases:
        assert set(case.patient.codes) == {"evidence"}
        assert all(code.startswith("E_") for code in case.patient.codes["evidence"])
        assert case.gold.answer not in json.dumps(case.meta)
        assert "icd10" not in case.meta and "severity" not in case.meta
        assert dataset.labels[case.id] == [case.gold.answer]
    # the experience records do keep it: that is what a patient base is for
    assert dataset.records[1].codes["diagnosis"] == ["Acute pulmonary edema"]


def test_ddxplus_interactive_shows_only_the_initial_evidence(loaded, data_dir):
    rows = _ddxplus_rows(data_dir)
    full = {case.id: case for case in loaded("ddxplus").cases}
    dataset = loaded("ddxplus-interactive")
    assert len(dataset.cases) == 2100
    hidden_somewhere = 0
    for case in dataset.cases:
        row = rows[case.meta["row"]]
        assert case.patient.codes == {"evidence": [row["feature_id"]]}
        assert case.meta["hidden_evidence"] == ast.literal_eval(row["features"])
        assert case.patient.findings == full[case.id].patient.findings
        shown = case.patient.initial_presentation
        initial_text = shown.split("Initial complaint: ", 1)[1]
        others = [finding for finding in case.patient.findings if finding != initial_text]
        assert not any(finding in shown for finding in others)
        hidden_somewhere += bool(others)
        assert shown.startswith(f"{row['age']}-year-old {'male' if row['sex'] == 'M' else 'female'}.")
    assert hidden_somewhere > 2000


def test_ddxplus_without_its_json_files_is_a_typed_error(tmp_path, data_dir):
    (tmp_path / "test_patients_mini.csv").write_bytes(
        (data_dir / "ddxplus" / "test_patients_mini.csv").read_bytes()
    )
    with pytest.raises(DataFormatError, match=r"release_evidences\.json: no such file"):
        load_dataset("ddxplus", tmp_path)


# --- iCraft-MD ----------------------------------------------------------------------------------------------


def test_icraft_cases_and_the_one_contradictory_record(loaded, data_dir):
    raw = _jsonl(data_dir / "icraft_md" / "craft_md.jsonl")
    dataset = loaded("icraft-md")
    # line 27 (id 129): answer text "Pemphigus foliaceous" is option A but answer_idx says B
    contradictory = raw[26]
    assert contradictory["options"]["A"] == contradictory["answer"] and contradictory["answer_idx"] == "B"
    assert len(raw) == 100 and len(dataset.cases) == 99 and len(dataset.records) == 99
    assert "icraft:129" not in {case.id for case in dataset.cases} | {r.id for r in dataset.records}
    assert "do not name one option: 27" in dataset.report
    by_id = {case.id: case for case in dataset.cases}
    first = by_id["icraft:135"]
    facts = [fact.strip() for fact in raw[0]["context"] if fact.strip()]
    assert first.task == "diagnosis" and first.gold.answer == "Molluscum contagiosum"
    assert first.patient.initial_presentation == facts[0] and first.patient.findings == facts
    assert first.patient.demographics.age == 5 and first.patient.demographics.sex == "male"
    # line 92: the answer is worded "Henoch-Scholein vasculitis"; answer_idx A is "IgA vasculitis"
    assert (
        raw[91]["answer_idx"] == "A"
        and by_id[f"icraft:{raw[91]['id']}"].gold.answer == raw[91]["options"]["A"]
    )
    for case in dataset.cases:
        assert case.gold.answer in case.options and len(case.options) == 4
        assert dataset.labels[case.id] == [case.gold.answer]
    assert {r.id: r.codes["diagnosis"] for r in dataset.records} == dataset.labels


def test_icraft_over_every_condition_it_names(loaded, data_dir):
    """MEDDxAgent asks iCraft-MD over its full set of conditions: every case gets every option the file
    names, the golds among them, not its own four."""
    raw = _jsonl(data_dir / "icraft_md" / "craft_md.jsonl")
    four = loaded("icraft-md")
    every = loaded("icraft-md-all")
    kept = [line for line in raw if str(line["id"]) != "129"]  # the contradictory record is skipped
    named = {str(text).strip() for line in kept for text in line["options"].values()}
    assert len(named) > 100
    assert [case.id for case in every.cases] == [case.id for case in four.cases]
    for case, own in zip(every.cases, four.cases, strict=True):
        assert set(case.options) == named and case.gold == own.gold


# --- DialMed ------------------------------------------------------------------------------------------------


def test_dialmed_diagnosis(loaded, data_dir):
    test = _jsonl(data_dir / "dialmed" / "test.txt")
    dev = _jsonl(data_dir / "dialmed" / "dev.txt")
    diseases = {d for row in test + dev for d in row["disease"]}
    dataset = loaded("dialmed-diagnosis")
    assert len(dataset.cases) == len(test) == 1199
    assert len(dataset.records) == len(test) + len(dev) == 2391
    first = dataset.cases[0]
    assert first.id == "dialmed:test:1" and first.language == "zh" and first.task == "diagnosis"
    assert first.gold.answer == test[0]["disease"][0] == "急性胃肠炎"
    assert "医生：那估计是喝酒引起的急性胃肠炎" in test[0]["dialog"]  # the doctor names it ...
    assert "急性胃肠炎" not in first.patient.initial_presentation  # ... and that turn is gone
    assert test[0]["dialog"][0] in first.patient.initial_presentation
    for case in dataset.cases:
        assert set(case.options) == diseases and len(diseases) == 17
        assert case.gold.answers == [case.gold.answer] and case.gold.answer in case.options
        assert "[MASK]" not in case.patient.initial_presentation
        doctor = [line for line in case.patient.initial_presentation.split("\n") if line.startswith("医生：")]
        assert not any(disease in line for line in doctor for disease in diseases)
    assert dataset.labels["dialmed:dev:1"] == dev[0]["disease"]


def test_dialmed_drugs_and_leave_sample_out(loaded, data_dir):
    test = _jsonl(data_dir / "dialmed" / "test.txt")
    drugs = json.loads((data_dir / "dialmed" / "label.json").read_text(encoding="utf-8"))
    dataset = loaded("dialmed-drugs")
    assert len(dataset.cases) == 1199
    first = dataset.cases[0]
    assert first.task == "treatment" and first.gold.answers == test[0]["label"] == ["黄连素"]
    assert list(first.options) == sorted(drugs, key=drugs.get) and len(first.options) == 70
    assert first.patient.initial_presentation.split("\n") == [
        t for t in test[0]["dialog"] if "[MASK]" not in t
    ]
    assert all(set(case.gold.answers) <= set(case.options) for case in dataset.cases)
    sampled = [case.id for case in dataset.cases[:10]]
    base = dataset.experience(sampled)
    assert len(base) == 2391 - 10 and not {r.id for r in base} & set(sampled)
    assert len(dataset.experience("dialmed:test:1")) == 2390  # a bare id is one id, not its characters


def test_dialmed_bad_label_file_is_a_typed_error(tmp_path, data_dir):
    for name in ("test.txt", "dev.txt"):
        (tmp_path / name).write_bytes((data_dir / "dialmed" / name).read_bytes())
    (tmp_path / "label.json").write_text('["not", "a", "mapping"]', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"label\.json"):
        load_dataset("dialmed-drugs", tmp_path)
