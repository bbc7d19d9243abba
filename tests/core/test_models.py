import ast
import csv
import json

import pytest
from pydantic import ValidationError

from clinrag.core.models import (
    Answer,
    Case,
    Demographics,
    Evidence,
    Gold,
    PatientProfile,
    RankedDiagnosis,
    Trace,
)
from clinrag.core.usage import Usage, UsageMeter


def _medqa_case(data_dir, line_number: int = 0) -> Case:
    line = (data_dir / "medqa" / "us_4options_test.jsonl").read_text().splitlines()[line_number]
    row = json.loads(line)
    return Case(
        id=f"medqa-{line_number}",
        task="multiple_choice",
        question=row["question"],
        options=row["options"],
        gold=Gold(answer=row["answer_idx"]),
        meta={"meta_info": row["meta_info"]},
    )


def test_case_round_trips_through_json(data_dir):
    case = _medqa_case(data_dir, 3)
    again = Case.model_validate_json(case.model_dump_json())
    assert again == case
    assert set(again.options) == {"A", "B", "C", "D"}
    assert again.gold.answer in again.options


def test_case_rejects_empty_option_text():
    with pytest.raises(ValidationError, match="empty key or text"):
        Case(id="x", question="q", options={"A": "  "})


def test_patient_profile_with_ddx_gold_round_trips(data_dir):
    # A real DDXPlus patient: initial evidence visible, full evidence hidden, ranked differential as gold.
    with (data_dir / "ddxplus" / "test_patients_mini.csv").open(newline="") as handle:
        row = next(csv.DictReader(handle))
    evidence = ast.literal_eval(row["features"])
    ddx = [RankedDiagnosis(name=name, probability=p) for name, p in ast.literal_eval(row["top5_diagnoses"])]
    case = Case(
        id="ddxplus-0",
        task="ddx",
        question="What is the differential diagnosis?",
        patient=PatientProfile(
            initial_presentation=row["feature_id"],
            findings=evidence,
            demographics=Demographics(age=int(row["age"]), sex="male" if row["sex"] == "M" else "female"),
            codes={"evidence": evidence},
        ),
        gold=Gold(answer=row["diagnosis"], ddx=ddx),
    )
    again = Case.model_validate(json.loads(case.model_dump_json()))
    assert again == case
    assert again.patient.codes["evidence"][0] == "E_53"
    assert again.gold.answer == "Chronic rhinosinusitis" and len(again.gold.ddx) == 8


def test_answer_requires_unique_evidence_ids():
    item = Evidence(id="kb:1", kind="statement", text="Aspirin inhibits COX.", source="kb")
    with pytest.raises(ValidationError, match="unique"):
        Answer(case_id="c", method="rag", evidence=[item, item])
    answer = Answer(case_id="c", method="rag", evidence=[item])
    assert answer.evidence_ids == ["kb:1"]
    assert Answer.model_validate_json(answer.model_dump_json()).evidence[0].kind == "statement"


def test_evidence_kind_is_checked():
    with pytest.raises(ValidationError):
        Evidence(id="x", kind="rumour", text="t", source="s")


def test_trace_step_records_output_and_errors():
    trace = Trace()
    with trace.step("retrieve", k=5) as step:
        step.output["hits"] = 3
    with pytest.raises(ZeroDivisionError), trace.step("divide"):
        1 / 0  # noqa: B018
    assert [s.name for s in trace.steps] == ["retrieve", "divide"]
    assert trace.steps[0].input == {"k": 5} and trace.steps[0].output == {"hits": 3}
    assert trace.steps[1].error_type == "ZeroDivisionError"


def test_usage_adds_up_across_threads():
    import threading

    meter = UsageMeter()
    workers = [
        threading.Thread(target=lambda: [meter.add(Usage(calls=1, prompt_tokens=2)) for _ in range(500)])
        for _ in range(4)
    ]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    assert meter.total.calls == 2000 and meter.total.prompt_tokens == 4000
    assert (Usage(prompt_tokens=3, completion_tokens=4)).total_tokens == 7
