"""`nejm-qa`: five small specialty CSVs in the published layout (tests/data/nejmqa: a header, the options on
the question's last lines); psychiatry.csv also holds a wrapped option and broken rows. Checked against the
CSVs read here with the csv module."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError
from clinrag.core.provenance import fingerprint
from clinrag.eval.datasets import get_dataset, load_dataset
from clinrag.eval.datasets.nejmqa import SEVERAL_KEYS, SPECIALTIES, UNPARSED, load_nejmqa, split_options

DATA = Path(__file__).resolve().parents[2] / "data"
FOLDER = DATA / "nejmqa"
PSYCHIATRY = FOLDER / "psychiatry.csv"


def _rows(file: Path) -> list[dict[str, str]]:
    with file.open(encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def test_the_folder_loads_every_specialty_and_reports_broken_rows():
    dataset = load_dataset("nejm-qa", FOLDER)
    assert [case.id for case in dataset.cases] == [
        "nejm-qa:general_surgery:1",
        "nejm-qa:internal_medicine:1",
        "nejm-qa:obgyn:1",
        "nejm-qa:pediatrics:1",
        "nejm-qa:psychiatry:1",
        "nejm-qa:psychiatry:2",
    ]
    assert f"{PSYCHIATRY}: 6 records read, 2 items" in dataset.report
    assert f"skipped 1 {UNPARSED}: 3" in dataset.report  # options A, B, D
    assert "skipped 1 records whose answer is not among their options: 4" in dataset.report
    assert f"skipped 1 {SEVERAL_KEYS}: 5" in dataset.report  # "A,C"
    assert "skipped 1 records with missing or invalid fields: 6" in dataset.report  # no answer


def test_cases_match_the_rows():
    for case in load_dataset("nejm-qa", FOLDER).cases:
        specialty, row = case.meta["specialty"], case.meta["row"]
        raw = _rows(FOLDER / f"{specialty}.csv")[row - 1]
        assert case.task == "multiple_choice" and case.language == "en"
        assert case.gold.answer == raw["answer"] and case.gold.answer in case.options
        assert raw["question"].startswith(case.question + "\nA. ")
        assert list(case.options) == ["A", "B", "C", "D"]
        assert all(f"\n{key}. {text.split()[0]}" in raw["question"] for key, text in case.options.items())
        assert case.meta["provenance"] == {
            "file": fingerprint(FOLDER / f"{specialty}.csv"),
            "record": str(row),
        }


def test_a_wrapped_option_is_joined_and_the_stem_keeps_its_lines():
    case = next(case for case in load_dataset("nejm-qa", PSYCHIATRY).cases if case.id.endswith(":2"))
    assert case.options["C"] == "Posttraumatic stress disorder"
    assert case.question.endswith(
        "four months ago.\nShe avoids driving.\nWhich of the following is the most likely diagnosis?"
    )
    assert case.options["B"] == "Generalized anxiety disorder" and case.gold.answer == "C"


def test_split_options():
    assert split_options("Stem?\nA. x\nB. y") == ("Stem?", {"A": "x", "B": "y"})
    # the options are the last run from "A.": an earlier "A." line belongs to the stem
    assert split_options("A. fib is seen.\nWhat next?\nA. Warfarin\nB. Aspirin") == (
        "A. fib is seen.\nWhat next?",
        {"A": "Warfarin", "B": "Aspirin"},
    )
    assert split_options("Stem?\nA. x\nC. y") is None  # out of order
    assert split_options("A. x\nB. y") is None  # no stem
    assert split_options("Stem?\nA. x") is None  # one option
    assert split_options("Stem with options inline? A. x B. y") is None


def test_one_specialty_file():
    dataset = load_dataset("nejm-qa", PSYCHIATRY)
    assert [case.id for case in dataset.cases] == ["nejm-qa:psychiatry:1", "nejm-qa:psychiatry:2"]
    assert {case.meta["specialty"] for case in dataset.cases} == {"psychiatry"}


def test_a_data_root_resolves_to_the_folder():
    assert get_dataset("nejm-qa").default_path == "nejmqa"
    assert len(load_dataset("nejm-qa", DATA).cases) == len(load_dataset("nejm-qa", data_dir=DATA).cases) == 6


def test_a_folder_missing_a_specialty_names_it(tmp_path):
    for name in SPECIALTIES[:-1]:
        shutil.copy(FOLDER / f"{name}.csv", tmp_path)
    with pytest.raises(DataFormatError, match=rf"{SPECIALTIES[-1]}\.csv: no such file"):
        load_nejmqa(tmp_path)


def test_a_file_without_the_columns_is_refused(tmp_path):
    file = tmp_path / "psychiatry.csv"
    file.write_text('stem,key\n"Q?\nA. x\nB. y",A\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"psychiatry\.csv: no question or answer column"):
        load_nejmqa(file)


def test_no_valid_row_raises(tmp_path):
    file = tmp_path / "obgyn.csv"
    file.write_text('question,answer\n"Q?\nA. x\nB. y",C\n"Q?\nA. x\nB. y",","\n"Q?",A\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"nejm-qa: no valid cases .*not among their options: 1, 2;"):
        load_nejmqa(file)
