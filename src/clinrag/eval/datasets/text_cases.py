"""`text-cases`: free-text presentations (the patient's own words, or a vignette) with the expected leading
diagnosis, for evaluating methods that read only text — `clinrag consult` above all.

One JSON object per line:
    {"id": "cap-1", "text": "I'm 67 and for three days ...", "diagnosis": "Pneumonia",
     "icd10": "J18", "synonyms": ["Community-acquired pneumonia"], "sex": "male", "age": 67,
     "options": ["Pneumonia", "Acute bronchitis", ...]}
`id`, `text` and `diagnosis` are required. The case is a ranked-differential question whose question and
initial presentation are the text; with `options` it is asked among them (keyed by name), and one of them
must be the diagnosis or a synonym. Any of the diagnosis and its synonyms is accepted (`gold.answers`);
`icd10` goes to `meta`, and so do what a writer may say of the case (`pregnant`, `system`, `setting`,
`disposition`); `language` (en, fr, zh) is the text's. There are no patient records."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clinrag.core.files import data_file, read_jsonl, valid_records
from clinrag.core.models import Case, Demographics, Gold, Language, PatientProfile
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.knowledge.items import ANSWER_MISMATCH


class TextCaseRecord(BaseModel):
    """One line of a text-cases file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    diagnosis: str = Field(min_length=1)
    icd10: str | None = None
    synonyms: list[str] = Field(default_factory=list)
    sex: Literal["female", "male"] | None = None
    age: float | None = Field(default=None, ge=0, le=130)  # years; an infant's may be a fraction
    options: list[str] = Field(default_factory=list)
    language: Language = "en"
    pregnant: bool | None = None
    # what the writer says of the case, kept in `meta` for reports: its body system, the setting it comes
    # from and the disposition a careful clinician would advise
    system: str | None = None
    setting: str | None = None
    disposition: Literal["emergency", "urgent", "soon", "self_care"] | None = None
    why: str | None = None  # … and why that disposition

    @field_validator("id", "text", "diagnosis", "icd10")
    @classmethod
    def _stripped(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("empty text")
        return value.strip() if value is not None else None

    @field_validator("synonyms", "options")
    @classmethod
    def _names(cls, names: list[str]) -> list[str]:
        if any(not name.strip() for name in names):
            raise ValueError("empty name")
        return [name.strip() for name in names]


def text_case(record: TextCaseRecord) -> Case:
    answers = list(dict.fromkeys([record.diagnosis, *record.synonyms]))
    meta: dict[str, object] = {"icd10": record.icd10} if record.icd10 else {}
    meta.update(
        (key, value)
        for key in ("pregnant", "system", "setting", "disposition", "why")
        if (value := getattr(record, key)) is not None
    )
    return Case(
        id=record.id,
        language=record.language,
        task="ddx",
        question=record.text,
        patient=PatientProfile(
            initial_presentation=record.text,
            demographics=Demographics(age=None if record.age is None else int(record.age), sex=record.sex),
        ),
        options={name: name for name in record.options},
        gold=Gold(answer=record.diagnosis, answers=answers),
        meta=meta,
    )


def load_text_cases(path: Path) -> Dataset:
    reading = read_jsonl(data_file(path, "text_cases.jsonl"))
    cases = []
    for line, record in valid_records(reading, TextCaseRecord):
        if record.options and not {record.diagnosis, *record.synonyms} & set(record.options):
            reading.report.skip(ANSWER_MISMATCH, line)
            continue
        cases.append(text_case(record))
    return finish("text-cases", cases, [reading.report])


register(
    DatasetSpec(
        "text-cases",
        "Free-text presentations (JSONL: id, text, diagnosis, icd10, synonyms, ...), leading diagnosis",
        "text_cases.jsonl",
        load_text_cases,
    )
)
