"""`rjua`: a small file in RJUA-QA's published format (tests/data/rjua/RJUA_test.json: context as a list and
as a string, a "/" and a NaN disease, an integer id, a broken line, a record without an answer), checked
against its lines read here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.provenance import fingerprint
from clinrag.eval.datasets import get_dataset, load_dataset
from clinrag.eval.datasets.rjua import diseases, load_rjua

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLE = DATA / "rjua" / "RJUA_test.json"


def _raw() -> dict[str, dict]:
    """The sample's parseable lines by case id."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return {f"rjua:{record['id']}": record for record in records}


def test_the_sample_loads_with_its_broken_records_reported():
    dataset = load_dataset("rjua", SAMPLE)
    assert [case.id for case in dataset.cases] == ["rjua:1", "rjua:2", "rjua:5", "rjua:6"]
    assert f"{SAMPLE}: 5 records read" in dataset.report
    assert "skipped 1 broken lines: 3" in dataset.report
    assert "skipped 1 records with missing or invalid fields: 4" in dataset.report
    assert dataset.records == [] and dataset.labels == {}


def test_cases_carry_the_question_its_context_and_the_answer():
    raw = _raw()
    for case in load_dataset("rjua", SAMPLE).cases:
        line = raw[case.id]
        assert case.language == "zh" and case.task == "free_text" and case.options == {}
        assert case.meta["question_only"] == line["question"]
        assert case.gold.answer == line["answer"]
        context = [line["context"]] if isinstance(line["context"], str) else line["context"]
        passages = [text.removeprefix("Context：") for text in context]
        assert case.question == line["question"] + "\n\nContext:\n" + "\n".join(passages)
        assert "Context：" not in case.question  # the passages lose their label
        assert line["advice"] not in str(case.meta)  # the advice stays off the case


def test_diseases_are_the_gold_diagnoses():
    cases = {case.id: case for case in load_dataset("rjua", SAMPLE).cases}
    assert cases["rjua:1"].gold.answers == ["右输尿管上段结石", "右肾积水"]
    assert cases["rjua:5"].gold.answers == ["前列腺增生", "膀胱结石", "急性尿潴留"]  # ，and ； split too
    assert cases["rjua:2"].gold.answers == []  # "/": a question with no diagnosis
    assert cases["rjua:6"].gold.answers == []  # NaN


def test_disease_splitting():
    assert diseases("左肾结石、右肾囊肿（Bosniak I级）、左肾结石") == ["左肾结石", "右肾囊肿（Bosniak I级）"]
    assert diseases("前列腺癌（T2c N0 M0 ISUP 1）") == ["前列腺癌（T2c N0 M0 ISUP 1）"]  # spaces do not split
    assert diseases("nan") == diseases("/") == diseases(None) == []


def test_provenance_names_the_file_and_the_record_id():
    case = next(case for case in load_dataset("rjua", SAMPLE).cases if case.id == "rjua:5")
    assert case.meta["provenance"] == {"file": fingerprint(SAMPLE), "record": "5"}
    assert case.meta["line"] == 5


def test_a_data_root_resolves_to_the_default_file():
    assert get_dataset("rjua").default_path == "rjua/RJUA_test.json"
    by_root = load_dataset("rjua", DATA)
    by_dir = load_dataset("rjua", data_dir=DATA)
    assert (
        [c.id for c in by_root.cases]
        == [c.id for c in by_dir.cases]
        == ["rjua:1", "rjua:2", "rjua:5", "rjua:6"]
    )


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(DataFormatError, match=r"RJUA_test\.json: no such file"):
        load_rjua(tmp_path)


def test_a_file_that_is_not_utf8_is_refused(tmp_path):
    file = tmp_path / "RJUA_test.json"
    file.write_bytes('{"id": "1", "question": "尿频"}\n'.encode("gbk"))
    with pytest.raises(DataFormatError, match=r"RJUA_test\.json: not UTF-8"):
        load_rjua(file)


def test_no_valid_record_raises(tmp_path):
    file = tmp_path / "RJUA_test.json"
    file.write_text('{"id": "1", "question": "尿频"}\n{"id": "2", "answer": "多饮水"}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"rjua: no valid cases .*missing or invalid fields: 1, 2"):
        load_rjua(file)


def test_duplicate_ids_raise(tmp_path):
    line = json.dumps({"id": "7", "question": "尿频怎么办？", "answer": "多饮水。"}, ensure_ascii=False)
    file = tmp_path / "RJUA_test.json"
    file.write_text(f"{line}\n{line}\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="rjua: duplicate case ids: rjua:7"):
        load_rjua(file)
