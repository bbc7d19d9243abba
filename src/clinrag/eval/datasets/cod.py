"""`cod`: the synthetic patients of CoD-PatientSymDisease (Chen et al. 2024, "CoD, Towards an Interpretable
Medical Agent using Chain of Diagnosis", arXiv 2407.13301; huggingface.co/datasets/FreedomIntelligence/
CoD-PatientSymDisease, `CoD_en.json` / `CoD_zh.json`, Apache-2.0), and the same authors' DxBench test files.

A file is one JSON array; each record is one of two published shapes, told apart by its keys:
- a CoD dialogue: {"case_id", "target_disease", "CoD_conversations"}, the last a JSON *string* holding the
  turns. Even turns are the patient's (`value`: the words); odd turns the doctor's, each with
  `symptom_abstraction` (the symptoms known so far, "No …" for an absent one), `disease_recall`,
  `diagnostic_reasoning`, `confidence_assessment` (disease → confidence), `decision`, `value`. Read here:
  `case_id`, `target_disease`, the first patient turn (the self-report), every `symptom_abstraction` and
  the diseases of every `confidence_assessment`. Confirmed from the authors' reader,
  github.com/FreedomIntelligence/Chain-of-Diagnosis train/datapre.py; the data file itself was not seen,
  and that an absent symptom is "No …" in `CoD_zh.json` too is inferred from datapre.py, which applies the
  same test to both languages.
- a DxBench record: {"id", "department" (DxBench only), "explicit_symptoms": [[name, "True"|"False"], …],
  "implicit_symptoms": […], "candidate_diseases": […], "disease"}. Confirmed from the files themselves:
  evaluation/DxBench_{en,zh}.json, Dxy_{en,zh}.json and Muzhi_{en,zh}.json of that repository (the
  huggingface.co/datasets/FreedomIntelligence/DxBench files, of the same sizes).

Each record becomes a diagnosis case. The patient first says the self-report (a CoD dialogue) or the explicit
symptoms (DxBench); the symptoms found later (a dialogue's later abstractions, DxBench's implicit symptoms)
are hidden, for a patient simulator, in `meta[HIDDEN_SYMPTOMS]` / `meta[HIDDEN_SYMPTOMS_ABSENT]`, and the
findings hold every symptom in words. A DxBench case is asked among its candidate diseases; a CoD dialogue
among the diseases its confidence assessments weigh, sorted (the options). Text with Chinese characters
makes a "zh" case. Skipped and reported: a broken record, a DxBench record with no explicit symptom (the
authors' eval.py skips those too), a record whose disease is not among its candidates."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, ValidationError

from clinrag.core.errors import DataFormatError
from clinrag.core.files import INVALID_RECORDS, ReadReport, data_file, read_json
from clinrag.core.models import Case, Gold, Language, PatientProfile
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register

HIDDEN_SYMPTOMS = "hidden_symptoms"
HIDDEN_SYMPTOMS_ABSENT = "hidden_symptoms_absent"
HIDDEN_SYMPTOMS_UNSURE = "hidden_symptoms_unsure"  # only where a dataset says the patient is not sure

NO_EXPLICIT = "records with no explicit symptom"
NOT_A_CANDIDATE = "records whose disease is not among their candidate diseases"

QUESTION: dict[str, str] = {
    "en": "What is the most likely diagnosis? Choose one of the options.",
    "zh": "患者最可能的诊断是什么？请从选项中选择一项。",
}
REPORTS: dict[str, str] = {"en": "The patient reports: {}.", "zh": "患者自述：{}。"}
SEPARATOR: dict[str, str] = {"en": ", ", "zh": "，"}
PHRASES: dict[str, dict[bool | None, str]] = {
    "en": {True: "{}", False: "No {}", None: "Not sure about {}"},
    "zh": {True: "{}", False: "没有{}", None: "不确定是否有{}"},
}
_CJK = re.compile(r"[\u4e00-\u9fff]")

Name = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Symptom = tuple[str, bool | None]  # a name, and whether the patient has it (None: not sure)


class DxBenchRecord(BaseModel):
    """One record of a DxBench file."""

    model_config = ConfigDict(extra="ignore")

    id: Name
    department: str | None = None
    explicit_symptoms: list[tuple[Name, Literal["True", "False"]]]
    implicit_symptoms: list[tuple[Name, Literal["True", "False"]]]
    candidate_diseases: list[Name] = Field(min_length=1)
    disease: Name


class CodDialogue(BaseModel):
    """One record of CoD_en.json / CoD_zh.json."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    case_id: Name
    target_disease: Name
    conversations: str = Field(alias="CoD_conversations")


class CodTurn(BaseModel):
    model_config = ConfigDict(extra="ignore")

    value: str = ""
    symptom_abstraction: list[Name] = Field(default_factory=list)
    confidence_assessment: dict[Name, Any] = Field(default_factory=dict)


TURNS = TypeAdapter(list[CodTurn])


def language_of(texts: Iterable[str]) -> Language:
    return "zh" if any(_CJK.search(text) for text in texts) else "en"


def symptom_case(
    case_id: str,
    disease: str,
    explicit: Iterable[Symptom],
    implicit: Iterable[Symptom],
    *,
    options: dict[str, str],
    meta: dict[str, Any],
    presentation: str | None = None,
) -> Case:
    """A diagnosis case whose patient first tells `presentation` (by default, the explicit symptoms) and
    holds the implicit symptoms not already told as hidden findings."""
    shown = dict(explicit)
    hidden = [(name, has) for name, has in dict(implicit).items() if name not in shown]
    language = language_of([disease, presentation or "", *shown, *(name for name, _ in hidden)])
    phrase = PHRASES[language]
    told = [phrase[has].format(name) for name, has in shown.items()]
    unsure = [name for name, has in hidden if has is None]
    return Case(
        id=case_id,
        language=language,
        task="diagnosis",
        question=QUESTION[language],
        patient=PatientProfile(
            initial_presentation=presentation or REPORTS[language].format(SEPARATOR[language].join(told)),
            findings=told + [phrase[has].format(name) for name, has in hidden],
        ),
        options=options,
        gold=Gold(answer=disease, answers=[disease]),
        meta={
            **meta,
            HIDDEN_SYMPTOMS: [name for name, has in hidden if has is True],
            HIDDEN_SYMPTOMS_ABSENT: [name for name, has in hidden if has is False],
            **({HIDDEN_SYMPTOMS_UNSURE: unsure} if unsure else {}),
        },
    )


def named_gold_note(cases: list[Case]) -> str:
    named = sum(
        case.gold.answer.casefold() in case.patient.initial_presentation.casefold()
        for case in cases
        if case.gold and case.gold.answer and case.patient
    )
    return f"{named} cases whose presentation names the gold disease (as published)"


def _abstracted(symptom: str) -> Symptom:
    return (symptom[3:].strip(), False) if symptom.startswith("No ") else (symptom, True)


def _dialogue_case(record: CodDialogue) -> Case | str:
    turns = TURNS.validate_json(record.conversations)
    if len(turns) < 2 or not turns[0].value.strip():
        return INVALID_RECORDS
    candidates = sorted(
        {name for turn in turns[1::2] for name in turn.confidence_assessment}, key=str.casefold
    )
    if record.target_disease not in candidates:
        return NOT_A_CANDIDATE
    explicit = [_abstracted(symptom) for symptom in turns[1].symptom_abstraction]
    implicit = [_abstracted(symptom) for turn in turns[3::2] for symptom in turn.symptom_abstraction]
    return symptom_case(
        record.case_id,
        record.target_disease,
        explicit,
        implicit,
        options={name: name for name in candidates},
        meta={"source": "cod"},
        presentation=turns[0].value.strip(),
    )


def _dxbench_case(record: DxBenchRecord) -> Case | str:
    if not record.explicit_symptoms:
        return NO_EXPLICIT
    candidates = list(dict.fromkeys(record.candidate_diseases))
    if record.disease not in candidates:
        return NOT_A_CANDIDATE
    return symptom_case(
        record.id,
        record.disease,
        [(name, value == "True") for name, value in record.explicit_symptoms],
        [(name, value == "True") for name, value in record.implicit_symptoms],
        options={name: name for name in candidates},
        meta={"source": "dxbench", "department": record.department},
    )


def cod_case(raw: Any) -> Case | str:
    """The case of one record of either shape, or the reason it is skipped."""
    try:
        if isinstance(raw, dict) and "CoD_conversations" in raw:
            return _dialogue_case(CodDialogue.model_validate(raw))
        return _dxbench_case(DxBenchRecord.model_validate(raw))
    except ValidationError:
        return INVALID_RECORDS


def load_cod(path: Path) -> Dataset:
    """The `cod` dataset of one file (a folder means its CoD_en.json). Case ids are the records' ids."""
    file = data_file(path, "CoD_en.json")
    records = read_json(file)
    if not isinstance(records, list):
        raise DataFormatError(f"{file}: expected a JSON array of CoD-PatientSymDisease or DxBench records")
    report = ReadReport(str(file), records=len(records))
    cases = []
    for number, raw in enumerate(records, start=1):
        case = cod_case(raw)
        if isinstance(case, str):
            report.skip(case, number)
        else:
            cases.append(case)
    report.items, report.complete = len(cases), True
    shapes = Counter(case.meta["source"] for case in cases)
    notes = [", ".join(f"{count} {source} records" for source, count in sorted(shapes.items()))]
    return finish("cod", cases, [report], notes=[*notes, named_gold_note(cases)])


register(
    DatasetSpec(
        "cod",
        "CoD-PatientSymDisease synthetic patients, or DxBench (en/zh): diagnosis from the self-report, "
        "further symptoms hidden for a patient simulator",
        "cod/CoD_en.json",
        load_cod,
    )
)
