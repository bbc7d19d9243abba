"""The dataset registry: names, lookup errors and path resolution."""

from __future__ import annotations

import pytest

from clinrag.core.errors import ConfigError, InvalidInputError
from clinrag.eval.datasets import DATASETS, dataset_names, get_dataset, load_dataset

REQUIRED = {
    "ddxplus",
    "ddxplus-interactive",
    "medqa",
    "mmlu-med",
    "mmlu-med:anatomy",
    "pubmedqa",
    "medmcqa",
    "icraft-md",
    "dialmed-diagnosis",
    "dialmed-drugs",
    "dischargeqa-diagnosis",
    "dischargeqa-medication",
    "dischargeqa-instruction",
}


def test_names_and_specs():
    assert set(dataset_names()) >= REQUIRED
    assert get_dataset("ddxplus").default_path == "ddxplus"
    assert get_dataset("dischargeqa-diagnosis").generated


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(InvalidInputError) as error:
        get_dataset("ddxplux")
    assert "ddxplux" in str(error.value)
    assert all(name in str(error.value) for name in REQUIRED)


def test_path_resolution(tmp_path, data_dir):
    with pytest.raises(ConfigError, match="CLINRAG_DATA_DIR"):
        load_dataset("medqa")
    missing = tmp_path / "nowhere.jsonl"
    with pytest.raises(InvalidInputError, match=r"nowhere\.jsonl"):
        load_dataset("medqa", missing)
    with pytest.raises(InvalidInputError, match="medqa"):
        load_dataset("medqa", data_dir=tmp_path)  # tmp_path/medqa/... does not exist
    explicit = load_dataset("icraft-md", data_dir / "icraft_md" / "craft_md.jsonl", data_dir=tmp_path)
    assert len(explicit.cases) == 99  # an explicit path wins over data_dir


def test_every_single_choice_gold_is_an_option(loaded):
    for name in ("ddxplus", "icraft-md", "dialmed-diagnosis", "medqa", "pubmedqa"):
        for case in loaded(name).cases:
            assert case.gold.answer in case.options
            assert all(answer in case.options for answer in case.gold.answers)


def test_each_dataset_module_registers_its_specs():
    assert dataset_names() == DATASETS.names() == sorted(dataset_names())
    names = ("medqa", "ddxplus", "dischargeqa-diagnosis")
    modules = {name: DATASETS.get(name).load.__module__ for name in names}
    assert modules == {
        "medqa": "clinrag.eval.datasets.exams",
        "ddxplus": "clinrag.eval.datasets.patients",
        "dischargeqa-diagnosis": "clinrag.eval.datasets.dischargeqa",
    }
