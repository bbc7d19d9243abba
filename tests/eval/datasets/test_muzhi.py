"""`muzhi`: small files in the published shapes (tests/data/muzhi): the goal set as JSON (the pickled
{"train", "test"} of acl2018-mds.p, converted), goals one per line (as LiuQL2/MedicalChatbot keeps them) and
DxFormer's conversion (test_set.json, with a "not sure" answer); each with broken goals. Pickles are refused
unread."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.eval.datasets import get_dataset, load_dataset
from clinrag.eval.datasets.cod import HIDDEN_SYMPTOMS, HIDDEN_SYMPTOMS_ABSENT, HIDDEN_SYMPTOMS_UNSURE
from clinrag.eval.datasets.muzhi import load_muzhi

DATA = Path(__file__).resolve().parents[2] / "data"
MUZHI = DATA / "muzhi"
DISEASES = ["上呼吸道感染", "小儿支气管炎", "小儿消化不良", "小儿腹泻"]


def test_the_goal_set_is_asked_at_its_test_split_among_every_disease():
    dataset = load_muzhi(MUZHI)  # the folder's goal_set.json
    assert [case.id for case in dataset.cases] == ["10001001", "10001002"]
    bronchitis, diarrhea = dataset.cases
    # 小儿消化不良 is only in the train split: the options are the whole dataset's diseases
    assert list(bronchitis.options) == DISEASES and diarrhea.options == bronchitis.options
    assert bronchitis.task == "diagnosis" and bronchitis.language == "zh"
    assert bronchitis.question == "患者最可能的诊断是什么？请从选项中选择一项。"
    assert bronchitis.gold.answer == "小儿支气管炎" and bronchitis.gold.answers == ["小儿支气管炎"]
    assert bronchitis.patient.initial_presentation == "患者自述：咳嗽，有痰。"
    assert bronchitis.patient.findings == ["咳嗽", "有痰", "没有发热", "喘息"]
    assert bronchitis.meta == {"source": "muzhi", HIDDEN_SYMPTOMS: ["喘息"], HIDDEN_SYMPTOMS_ABSENT: ["发热"]}
    assert diarrhea.patient.initial_presentation == "患者自述：腹泻，没有呕吐。"  # an explicit false slot
    assert diarrhea.meta[HIDDEN_SYMPTOMS] == [] and diarrhea.patient.findings == ["腹泻", "没有呕吐"]


def test_broken_goals_are_skipped_and_reported():
    report = load_muzhi(MUZHI).report
    assert f"{MUZHI / 'goal_set.json'} [test]: 4 records read" in report
    assert "skipped 1 records with missing or invalid fields: 3" in report  # a slot valued "UNK"
    assert "skipped 1 records with no explicit symptom: 4" in report
    assert "4 diseases: " + ", ".join(DISEASES) in report


def test_goals_one_per_line():
    dataset = load_muzhi(MUZHI / "goals.jsonl")
    assert [case.id for case in dataset.cases] == ["10002001", "10002004"]
    first = dataset.cases[0]
    assert first.gold.answer == "小儿腹泻" and list(first.options) == ["小儿支气管炎", "小儿腹泻"]
    assert first.meta[HIDDEN_SYMPTOMS] == ["绿便"] and first.meta[HIDDEN_SYMPTOMS_ABSENT] == ["发热"]
    assert "skipped 1 broken lines: 2" in dataset.report
    assert "skipped 1 records with missing or invalid fields: 3" in dataset.report  # no disease_tag


def test_dxformer_samples_keep_the_not_sure_answers_apart():
    dataset = load_dataset("muzhi", MUZHI / "dxformer")  # the folder's test_set.json
    assert [case.id for case in dataset.cases] == ["test-1", "test-2"]
    urti = dataset.cases[0]
    assert urti.patient.initial_presentation == "患者自述：发热。"
    assert urti.meta[HIDDEN_SYMPTOMS] == ["鼻流涕"] and urti.meta[HIDDEN_SYMPTOMS_ABSENT] == ["咳嗽"]
    assert urti.meta[HIDDEN_SYMPTOMS_UNSURE] == ["细菌感染"]
    assert urti.patient.findings == ["发热", "鼻流涕", "没有咳嗽", "不确定是否有细菌感染"]
    assert HIDDEN_SYMPTOMS_UNSURE not in dataset.cases[1].meta
    assert "skipped 1 records with missing or invalid fields: 3" in dataset.report  # an answer "3"


def test_registry_and_data_root():
    spec = get_dataset("muzhi")
    assert spec.default_path == "muzhi" and not spec.generated
    assert [c.id for c in load_dataset("muzhi", data_dir=DATA).cases] == ["10001001", "10001002"]


def test_pickles_are_refused_unread(tmp_path):
    pickled = pickle.dumps({"train": [], "test": []}, protocol=4)
    (tmp_path / "acl2018-mds.p").write_bytes(pickled)
    with pytest.raises(DataFormatError, match="never unpickles") as error:
        load_muzhi(tmp_path)  # a folder holding only the pickle
    assert "acl2018-mds.p" in str(error.value) and "json.dump(pickle.load(" in str(error.value)
    disguised = tmp_path / "goals" / "goal_set.json"
    disguised.parent.mkdir()
    disguised.write_bytes(pickled)
    with pytest.raises(DataFormatError, match=r"goal_set\.json: a Python pickle"):
        load_muzhi(disguised.parent)


def test_missing_files_splits_and_goals_are_errors(tmp_path):
    with pytest.raises(DataFormatError, match=r"nowhere\.json"):
        load_muzhi(tmp_path / "nowhere.json")
    with pytest.raises(DataFormatError, match=r"goal_set\.json"):
        load_muzhi(tmp_path)  # an empty folder
    goals = json.loads((MUZHI / "goal_set.json").read_text(encoding="utf-8"))
    (tmp_path / "train_only.json").write_text(json.dumps({"train": goals["train"]}), encoding="utf-8")
    with pytest.raises(DataFormatError, match="'test' list of goals"):
        load_muzhi(tmp_path / "train_only.json")
    (tmp_path / "invalid.json").write_text(json.dumps(goals["test"][2:]), encoding="utf-8")
    with pytest.raises(DataFormatError, match="muzhi: no valid cases"):
        load_muzhi(tmp_path / "invalid.json")


def test_duplicate_goal_ids_are_refused(tmp_path):
    goal = json.loads((MUZHI / "goal_set.json").read_text(encoding="utf-8"))["test"][0]
    (tmp_path / "twice.json").write_text(json.dumps([goal, goal]), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="10001001"):
        load_muzhi(tmp_path / "twice.json")
