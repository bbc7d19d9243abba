"""`cod`: small files in the two published shapes (tests/data/cod): DxBench records as in the authors'
evaluation/DxBench_{en,zh}.json (with a broken record, one with no explicit symptom, one whose disease is
not a candidate, a Muzhi-style record without department) and CoD-PatientSymDisease dialogues as
train/datapre.py reads CoD_en.json / CoD_zh.json (with a dialogue whose CoD_conversations is not JSON, and
one whose target is not among the diseases it weighs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.models import Answer, StructuredResult
from clinrag.eval.datasets import get_dataset, load_dataset
from clinrag.eval.datasets.cod import HIDDEN_SYMPTOMS, HIDDEN_SYMPTOMS_ABSENT, load_cod
from clinrag.eval.metrics import score_case

DATA = Path(__file__).resolve().parents[2] / "data"
COD = DATA / "cod"


def test_dxbench_records_become_diagnosis_cases_among_their_candidates():
    dataset = load_cod(COD / "DxBench_en.json")
    assert [case.id for case in dataset.cases] == ["DxBench_1", "DxBench_2", "Muzhi_1"]
    stroke, hemorrhoids, muzhi = dataset.cases
    assert stroke.task == "diagnosis" and stroke.language == "en"
    assert stroke.question == "What is the most likely diagnosis? Choose one of the options."
    assert list(stroke.options) == ["Migraine", "Lacunar Stroke", "Cervical Spondylosis"]
    assert stroke.gold.answer == "Lacunar Stroke" and stroke.gold.answers == ["Lacunar Stroke"]
    assert stroke.patient.initial_presentation == "The patient reports: Dizziness, Headache."
    # the implicit Headache repeats an explicit symptom: it is not hidden twice
    assert stroke.patient.findings == ["Dizziness", "Headache", "Blurred vision", "No Fever"]
    assert stroke.meta == {
        "source": "dxbench",
        "department": "Neurology",
        HIDDEN_SYMPTOMS: ["Blurred vision"],
        HIDDEN_SYMPTOMS_ABSENT: ["Fever"],
    }
    assert list(hemorrhoids.options) == ["Hemorrhoids", "Anal Fissure"]  # the file lists Hemorrhoids twice
    assert hemorrhoids.meta[HIDDEN_SYMPTOMS] == [] and hemorrhoids.meta[HIDDEN_SYMPTOMS_ABSENT] == []
    assert muzhi.meta["department"] is None and muzhi.patient.findings[-1] == "No Cough"
    for case in dataset.cases:
        assert case.gold.answer in case.options
        for hidden in case.meta[HIDDEN_SYMPTOMS] + case.meta[HIDDEN_SYMPTOMS_ABSENT]:
            assert hidden not in case.patient.initial_presentation


def test_broken_dxbench_records_are_skipped_and_reported():
    report = load_cod(COD / "DxBench_en.json").report
    assert f"{COD / 'DxBench_en.json'}: 6 records read, 3 items" in report
    assert "skipped 1 records with missing or invalid fields: 3" in report  # an explicit value "Yes"
    assert "skipped 1 records with no explicit symptom: 4" in report
    assert "skipped 1 records whose disease is not among their candidate diseases: 5" in report
    assert "3 dxbench records" in report


def test_chinese_dxbench_records_are_asked_in_chinese():
    dataset = load_cod(COD / "DxBench_zh.json")
    stroke, urti = dataset.cases
    assert stroke.language == urti.language == "zh"
    assert stroke.question == "患者最可能的诊断是什么？请从选项中选择一项。"
    assert stroke.patient.initial_presentation == "患者自述：头晕，头痛。"
    assert stroke.patient.findings == ["头晕", "头痛", "看东西模糊", "没有发热"]
    assert stroke.meta[HIDDEN_SYMPTOMS] == ["看东西模糊"] and stroke.meta[HIDDEN_SYMPTOMS_ABSENT] == ["发热"]
    assert stroke.meta["department"] == "外科"
    # MuZhi's symptom lists name diseases; the report counts the cases that name their gold
    assert urti.patient.initial_presentation == "患者自述：发热，上呼吸道感染。"
    assert "1 cases whose presentation names the gold disease (as published)" in dataset.report


def test_cod_dialogues_tell_the_self_report_and_hide_what_the_inquiry_found():
    dataset = load_cod(COD / "CoD_en.json")
    raw = json.loads((COD / "CoD_en.json").read_text(encoding="utf-8"))
    assert [case.id for case in dataset.cases] == ["en_0001", "en_0003"]
    bronchitis, headache = dataset.cases
    turns = json.loads(raw[0]["CoD_conversations"])
    assert bronchitis.patient.initial_presentation == turns[0]["value"]
    assert bronchitis.gold.answer == "Acute Bronchitis" and bronchitis.language == "en"
    assert list(bronchitis.options) == ["Acute Bronchitis", "Common Cold", "Pneumonia"]  # sorted
    # "No fever" and "Chest tightness" were learnt by asking; the first abstraction is what was told
    assert bronchitis.meta[HIDDEN_SYMPTOMS] == ["Chest tightness"]
    assert bronchitis.meta[HIDDEN_SYMPTOMS_ABSENT] == ["fever"]
    assert bronchitis.patient.findings == ["Cough", "Yellow sputum", "Fatigue", "No fever", "Chest tightness"]
    assert bronchitis.meta["source"] == "cod"
    for case in dataset.cases:  # nothing of the doctor's turns reaches the case text
        assert "bronchitis" not in case.patient.initial_presentation.casefold()
    assert headache.meta[HIDDEN_SYMPTOMS] == [] and headache.patient.findings == [
        "Bilateral pressing headache",
        "Headache worse with stress",
    ]
    report = dataset.report
    assert "skipped 1 records with missing or invalid fields: 2" in report  # CoD_conversations not JSON
    assert "skipped 1 records whose disease is not among their candidate diseases: 4" in report
    assert "2 cod records" in report


def test_chinese_dialogues_mark_absent_symptoms_in_chinese():
    (case,) = load_cod(COD / "CoD_zh.json").cases
    assert case.id == "zh_0001" and case.language == "zh" and case.gold.answer == "急性胃肠炎"
    assert case.patient.initial_presentation.startswith("昨天吃了路边摊")
    assert case.patient.findings == ["腹泻", "没有发热", "呕吐"]
    assert case.meta[HIDDEN_SYMPTOMS] == ["呕吐"] and case.meta[HIDDEN_SYMPTOMS_ABSENT] == ["发热"]
    assert list(case.options) == sorted(case.options, key=str.casefold) and "急性胃肠炎" in case.options


def test_registry_default_path_and_folder():
    spec = get_dataset("cod")
    assert spec.default_path == "cod/CoD_en.json" and not spec.generated
    by_root = load_dataset("cod", data_dir=DATA)
    by_folder = load_cod(COD)
    assert [c.id for c in by_root.cases] == [c.id for c in by_folder.cases] == ["en_0001", "en_0003"]


def test_a_chosen_candidate_scores():
    case = load_cod(COD / "DxBench_en.json").cases[0]

    def accuracy(choice: str) -> float:
        answer = Answer(case_id=case.id, method="m", result=StructuredResult(choice=choice))
        return score_case(case, answer)[0]["accuracy"]

    assert accuracy("lacunar stroke") == 1.0 and accuracy("Migraine") == 0.0


def test_missing_or_unreadable_files_are_errors(tmp_path):
    with pytest.raises(DataFormatError, match=r"nowhere\.json"):
        load_cod(tmp_path / "nowhere.json")
    with pytest.raises(DataFormatError, match=r"CoD_en\.json"):
        load_cod(tmp_path)  # a folder without CoD_en.json
    (tmp_path / "object.json").write_text('{"id": "DxBench_1"}', encoding="utf-8")
    with pytest.raises(DataFormatError, match="expected a JSON array"):
        load_cod(tmp_path / "object.json")
    (tmp_path / "broken.json").write_text("[{", encoding="utf-8")
    with pytest.raises(DataFormatError, match="not valid JSON"):
        load_cod(tmp_path / "broken.json")


def test_no_valid_record_is_an_error_and_duplicate_ids_are_refused(tmp_path):
    records = json.loads((COD / "DxBench_en.json").read_text(encoding="utf-8"))
    (tmp_path / "invalid.json").write_text(json.dumps(records[2:5]), encoding="utf-8")
    with pytest.raises(DataFormatError, match="cod: no valid cases"):
        load_cod(tmp_path / "invalid.json")
    (tmp_path / "twice.json").write_text(json.dumps([records[0], records[0]]), encoding="utf-8")
    with pytest.raises(InvalidInputError, match="DxBench_1"):
        load_cod(tmp_path / "twice.json")
