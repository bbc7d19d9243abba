"""`huatuo-kgqa`: a small file in the Huatuo-26M QA format (tests/data/huatuo_kgqa/test_datasets.jsonl: string
lists, the test set's plain strings, a broken line and invalid records), checked against its lines read
here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError
from clinrag.core.provenance import fingerprint
from clinrag.eval.datasets import get_dataset, load_dataset
from clinrag.eval.datasets.huatuo_kgqa import load_huatuo_kgqa

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLE = DATA / "huatuo_kgqa" / "test_datasets.jsonl"


def test_the_sample_loads_with_its_broken_lines_reported():
    dataset = load_dataset("huatuo-kgqa", SAMPLE)
    assert [case.id for case in dataset.cases] == ["huatuo-kgqa:1", "huatuo-kgqa:2", "huatuo-kgqa:5"]
    assert f"{SAMPLE}: 6 records read" in dataset.report
    assert "skipped 1 broken lines: 3" in dataset.report
    # an empty question list, a nested list (huatuo_encyclopedia_qa's shape), a blank answer
    assert "skipped 3 records with missing or invalid fields: 4, 6, 7" in dataset.report


def test_cases_match_the_lines():
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    for case in load_dataset("huatuo-kgqa", SAMPLE).cases:
        raw = json.loads(lines[case.meta["line"] - 1])
        questions = [raw["questions"]] if isinstance(raw["questions"], str) else raw["questions"]
        answers = [raw["answers"]] if isinstance(raw["answers"], str) else raw["answers"]
        assert case.language == "zh" and case.task == "free_text" and case.options == {}
        assert case.question == questions[0]
        assert case.gold.answer == answers[0]
        assert case.gold.answers == list(dict.fromkeys(answers))
        assert case.meta["provenance"] == {"file": fingerprint(SAMPLE), "record": str(case.meta["line"])}


def test_several_answers_and_the_plain_string_shape():
    cases = {case.id: case for case in load_dataset("huatuo-kgqa", SAMPLE).cases}
    assert cases["huatuo-kgqa:2"].question == "高血压可以用哪些药物治疗？"  # the first of two phrasings
    assert cases["huatuo-kgqa:2"].gold.answers == ["氨氯地平", "氯沙坦"]  # a repeated answer kept once
    assert cases["huatuo-kgqa:5"].question == "缺铁性贫血应该做什么检查？"  # huatuo26M-testdatasets' strings
    assert cases["huatuo-kgqa:5"].gold.answer == "血常规；血清铁蛋白；骨髓铁染色"


def test_a_data_root_resolves_to_the_default_file():
    assert get_dataset("huatuo-kgqa").default_path == "huatuo_kgqa/test_datasets.jsonl"
    by_root = load_dataset("huatuo-kgqa", DATA)
    assert [case.id for case in by_root.cases] == [
        case.id for case in load_dataset("huatuo-kgqa", SAMPLE).cases
    ]


def test_a_missing_file_is_named(tmp_path):
    with pytest.raises(DataFormatError, match=r"test_datasets\.jsonl: no such file"):
        load_huatuo_kgqa(tmp_path)


def test_only_broken_lines_raise(tmp_path):
    file = tmp_path / "test_datasets.jsonl"
    file.write_text('{"questions": ["肾结石\n[1, 2]\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"empty corpus: .*test_datasets\.jsonl"):
        load_huatuo_kgqa(file)


def test_no_valid_record_raises(tmp_path):
    file = tmp_path / "test_datasets.jsonl"
    file.write_text('{"questions": ["肾结石怎么治？"]}\n{"answers": ["多饮水"]}\n', encoding="utf-8")
    with pytest.raises(DataFormatError, match=r"huatuo-kgqa: no valid cases .*invalid fields: 1, 2"):
        load_huatuo_kgqa(file)
