"""Dataset loaders on the real DDXPlus, DialMed and iCraft-MD files; expected values are computed from the raw
files here, independently of the loader."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.eval.datasets import load_dataset
from clinrag.patients.loaders import BAD_LITERALS, check_unique_ids, load_ddxplus, load_dialmed, load_icraft


@pytest.fixture(scope="module")
def ddx_paths(data_dir: Path) -> tuple[Path, Path, Path]:
    folder = data_dir / "ddxplus"
    return (
        folder / "test_patients_mini.csv",
        folder / "release_evidences.json",
        folder / "release_conditions.json",
    )


@pytest.fixture(scope="module")
def ddx_loaded(ddx_paths):
    return load_ddxplus(*ddx_paths)


def _raw_rows(csv_path: Path) -> list[dict[str, str]]:
    with csv_path.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_ddxplus_count_and_fields(ddx_paths, ddx_loaded) -> None:
    records, report = ddx_loaded
    rows = _raw_rows(ddx_paths[0])
    assert len(records) == len(rows) == 2100
    assert report.records == 2100 and report.skipped_count == 0 and not report.unknown_codes
    conditions = json.loads(ddx_paths[2].read_text(encoding="utf-8"))
    for index in (0, 1, 777, 2099):
        record, row = records[index], rows[index]
        assert record.id == f"ddxplus:{index}"
        assert record.synthetic and record.source == "ddxplus"
        assert record.metadata["age"] == int(row["age"]) and record.metadata["sex"] == row["sex"]
        assert record.structured["diagnosis"] == row["diagnosis"]
        assert record.codes["diagnosis"] == [row["diagnosis"]]
        assert record.codes["evidence"] == ast.literal_eval(row["features"])
        assert record.structured["differential"] == [
            list(pair) for pair in ast.literal_eval(row["top5_diagnoses"])
        ]
        assert record.structured["icd10"].lower() == conditions[row["diagnosis"]]["icd10-id"].lower()
        assert f"{row['age']}-year-old" in record.narrative
        assert "E_" not in record.narrative  # every code decoded


def _patient_with_b_c_m(rows: list[dict[str, str]], evidences: dict) -> tuple[int, str, tuple[str, str], str]:
    """First row with a binary evidence, a numeric categorical one and a multi-choice one with 2+ values."""
    for index, row in enumerate(rows):
        features = ast.literal_eval(row["features"])
        binary = [code for code in features if "_@_" not in code and evidences[code]["data_type"] == "B"]
        numeric = [
            tuple(code.split("_@_"))
            for code in features
            if "_@_" in code and evidences[code.split("_@_")[0]]["data_type"] == "C" and code[-1].isdigit()
        ]
        multi = [code.split("_@_")[0] for code in features if "_@_" in code]
        multi = [name for name in multi if evidences[name]["data_type"] == "M" and multi.count(name) >= 2]
        if binary and numeric and multi:
            return index, binary[0], numeric[0], multi[0]
    raise AssertionError("no suitable patient")


def test_ddxplus_decodes_binary_categorical_and_multichoice(ddx_paths, ddx_loaded) -> None:
    rows = _raw_rows(ddx_paths[0])
    evidences = json.loads(ddx_paths[1].read_text(encoding="utf-8"))
    index, binary, (numeric, number), multi = _patient_with_b_c_m(rows, evidences)
    record = ddx_loaded[0][index]
    findings = record.structured["findings"]

    question = evidences[binary]["question_en"]
    [finding] = [text for text in findings if text.startswith(question)]
    assert finding.lower().endswith("yes")

    question = evidences[numeric]["question_en"]
    [finding] = [text for text in findings if text.startswith(question)]
    assert f" {number}" in finding

    question = evidences[multi]["question_en"]
    values = [
        code.split("_@_")[1]
        for code in ast.literal_eval(rows[index]["features"])
        if code.startswith(multi + "_@_")
    ]
    meanings = [evidences[multi]["value_meaning"][value]["en"] for value in values]
    [finding] = [text for text in findings if text.startswith(question)]  # merged into one finding
    assert all(meaning in finding for meaning in meanings)
    assert finding in record.narrative

    initial = evidences[rows[index]["feature_id"]]["question_en"]
    assert initial in record.structured["initial_evidence"]
    assert record.narrative.splitlines()[1].startswith("Initial complaint: " + initial)


def test_ddxplus_unknown_codes_reported_and_bad_rows_skipped(ddx_paths, tmp_path: Path) -> None:
    rows = _raw_rows(ddx_paths[0])[:3]
    features = ast.literal_eval(rows[0]["features"])
    rows[0]["features"] = repr([*features, "E_9999", "E_54_@_V_99999"])
    broken = dict(rows[2], features="['E_53', ")
    path = tmp_path / "mini.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows([*rows, broken])

    records, report = load_ddxplus(path, ddx_paths[1], ddx_paths[2])
    assert [record.id for record in records] == ["ddxplus:0", "ddxplus:1", "ddxplus:2"]
    assert report.skipped == {BAD_LITERALS: [3]}
    assert report.unknown_codes == {"E_9999": 1, "E_54_@_V_99999": 1}
    assert "E_9999" in report.summary()
    assert "E_9999" in records[0].codes["evidence"]
    assert "E_9999" in records[0].structured["findings"]
    assert any("V_99999" in text for text in records[0].structured["findings"])


def test_ddxplus_missing_files_and_columns(ddx_paths, tmp_path: Path) -> None:
    with pytest.raises(DataFormatError):
        load_ddxplus(tmp_path / "nope.csv", ddx_paths[1])
    with pytest.raises(DataFormatError):
        load_ddxplus(ddx_paths[0], tmp_path / "nope.json")
    bad = tmp_path / "bad.csv"
    bad.write_text("age,sex\n35,M\n", encoding="utf-8")
    with pytest.raises(DataFormatError, match="features"):
        load_ddxplus(bad, ddx_paths[1])


def test_the_official_release_csv_loads_as_the_mini_split(ddx_paths, tmp_path: Path) -> None:
    """The release's own column names (AGE, PATHOLOGY, EVIDENCES, …), in the release's column order, give the
    same patients as the renamed mini split, and a folder holding the release's test file is a dataset."""
    release = {"age": "AGE", "top5_diagnoses": "DIFFERENTIAL_DIAGNOSIS", "sex": "SEX"}
    release |= {"diagnosis": "PATHOLOGY", "features": "EVIDENCES", "feature_id": "INITIAL_EVIDENCE"}
    rows = _raw_rows(ddx_paths[0])[:5]
    order = ["AGE", "DIFFERENTIAL_DIAGNOSIS", "SEX", "PATHOLOGY", "EVIDENCES", "INITIAL_EVIDENCE"]
    folder = tmp_path / "ddxplus-release"
    folder.mkdir()
    with (folder / "release_test_patients.csv").open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=order)
        writer.writeheader()
        writer.writerows({release[name]: value for name, value in row.items()} for row in rows)
    for source in ddx_paths[1:]:
        (folder / source.name).write_bytes(source.read_bytes())
    records, report = load_ddxplus(folder / "release_test_patients.csv", ddx_paths[1], ddx_paths[2])
    expected, _ = load_ddxplus(*ddx_paths)
    assert [r.model_dump() for r in records] == [r.model_dump() for r in expected[:5]]
    assert not report.skipped
    cases = load_dataset("ddxplus", folder).cases
    assert [case.gold.answer for case in cases] == [row["diagnosis"] for row in rows]


def test_dialmed_masks_the_recommendation(data_dir: Path) -> None:
    path = data_dir / "dialmed" / "test.txt"
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    records, report = load_dialmed(path)
    assert len(records) == len(raw) == 1199 and report.skipped_count == 0
    assert records[0].id == "dialmed:test:1" and records[-1].id == f"dialmed:test:{len(raw)}"
    checked = 0
    for record, item in zip(records, raw, strict=True):
        assert record.metadata["language"] == "zh"
        assert record.codes == {"diseases": item["disease"], "drugs": item["label"]}
        assert "[MASK]" not in record.narrative
        assert item["dialog"][0].strip() in record.narrative or "[MASK]" in item["dialog"][0]
        unmasked = [turn for turn in item["dialog"] if "[MASK]" not in turn]
        for drug in item["label"]:
            if not any(drug in turn for turn in unmasked):  # the drug is named only where it is recommended
                assert drug not in record.narrative
                checked += 1
    assert checked > 1000
    # a record whose recommendation turn names the drug next to the [MASK] (test.txt line 142)
    item = raw[141]
    assert any("阿昔洛韦" in turn and "[MASK]" in turn for turn in item["dialog"])
    assert "阿昔洛韦" not in records[141].narrative


def test_dialmed_skips_invalid_lines(data_dir: Path, tmp_path: Path) -> None:
    lines = (data_dir / "dialmed" / "dev.txt").read_text(encoding="utf-8").splitlines()[:2]
    path = tmp_path / "dev.txt"
    path.write_text(
        "\n".join([lines[0], "{not json", json.dumps({"dialog": []}), lines[1]]), encoding="utf-8"
    )
    records, report = load_dialmed(path)
    assert [record.id for record in records] == ["dialmed:dev:1", "dialmed:dev:4"]
    assert report.skipped_count == 2
    with pytest.raises(DataFormatError):
        load_dialmed(tmp_path / "missing.txt")


def test_icraft_records(data_dir: Path) -> None:
    path = data_dir / "icraft_md" / "craft_md.jsonl"
    raw = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    records, report = load_icraft(path)
    assert len(records) == 100 and report.records == 100
    first = records[0]
    assert first.id == f"icraft:{raw[0]['id']}"
    assert first.structured["initial_presentation"] == raw[0]["context"][0].strip()
    assert first.narrative.startswith(raw[0]["context"][0].strip())
    assert first.structured["diagnosis"] == raw[0]["answer"] == first.codes["diagnosis"][0]
    assert all(fact.strip() in first.narrative for fact in raw[0]["context"])


def test_duplicate_ids_are_refused(data_dir: Path, tmp_path: Path) -> None:
    lines = (data_dir / "icraft_md" / "craft_md.jsonl").read_text(encoding="utf-8").splitlines()
    path = tmp_path / "dup.jsonl"
    path.write_text("\n".join([lines[0], lines[1], lines[0]]), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="icraft:"):
        load_icraft(path)
    records, _ = load_icraft(data_dir / "icraft_md" / "craft_md.jsonl")
    with pytest.raises(InvalidInputError):
        check_unique_ids([*records, records[5]])
