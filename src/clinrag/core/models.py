"""The one data model every dataset maps to and every method answers with.

Pydantic models because all of these cross boundaries: dataset files, HTTP, evaluation result files.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator, model_validator

from clinrag.core.usage import Usage

Language = Literal["en", "zh", "fr"]
TaskKind = Literal["diagnosis", "ddx", "multiple_choice", "multi_select", "treatment", "free_text"]
EvidenceKind = Literal["statement", "patient", "passage", "graph_fact", "term", "citation"]
DDX_SIZE = 10  # diagnoses in a ranked differential (GTPA@10, average rank over the top 10)


class Demographics(BaseModel):
    age: int | None = Field(default=None, ge=0, le=130)
    sex: Literal["female", "male", "other"] | None = None
    extra: dict[str, str] = Field(default_factory=dict)


# `PatientProfile.codes` keys of a patient's phenotype in HPO terms ("HP:0001166"): shown, excluded, and the
# onset class of the illness ("HP:0003593", infantile onset)
HPO_OBSERVED = "hpo"
HPO_EXCLUDED = "hpo_excluded"
HPO_ONSET = "hpo_onset"
# `Case.meta` keys of an interactive case's hidden HPO profile, for a patient simulator to reveal
HIDDEN_HPO_OBSERVED = "hidden_hpo"
HIDDEN_HPO_EXCLUDED = "hidden_hpo_excluded"


class PatientProfile(BaseModel):
    """What is known about the patient.

    `initial_presentation` is what a clinician hears first; `findings` is the full profile, which an
    interactive method must discover by asking (a simulator holds it); `codes` holds coded findings by field
    (e.g. DDXPlus evidence codes, diagnoses, medications).
    """

    initial_presentation: str
    findings: list[str] = Field(default_factory=list)
    demographics: Demographics = Field(default_factory=Demographics)
    codes: dict[str, list[str]] = Field(default_factory=dict)


class RankedDiagnosis(BaseModel):
    name: str
    probability: float | None = Field(default=None, ge=0.0, le=1.0)
    code: str | None = None  # ICD-10 code where the knowledge gives one, else its id there ("OMIM:154700")
    synonyms: list[str] = Field(
        default_factory=list
    )  # other names of the diagnosis, where the knowledge has them


class Gold(BaseModel):
    """The reference answer: an option key or text, a set of answers, and/or a ranked differential."""

    answer: str | None = None
    answers: list[str] = Field(default_factory=list)
    ddx: list[RankedDiagnosis] = Field(default_factory=list)


class Case(BaseModel):
    """One thing a method answers: a question, optionally about a patient, optionally with options."""

    id: str = Field(min_length=1)
    language: Language = "en"
    task: TaskKind = "free_text"
    question: str
    patient: PatientProfile | None = None
    options: dict[str, str] = Field(default_factory=dict)
    gold: Gold | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("options")
    @classmethod
    def _options_nonempty(cls, options: dict[str, str]) -> dict[str, str]:
        for key, text in options.items():
            if not key.strip() or not text.strip():
                raise ValueError(f"option {key!r} has an empty key or text")
        return options


def case_text(case: Case) -> str:
    """How a case is shown to a model or a retriever: the patient's initial presentation (what is known up
    front; hidden findings are for simulators) followed by the question."""
    if case.patient is None:
        return case.question.strip()
    return f"Patient: {case.patient.initial_presentation.strip()}\n\n{case.question.strip()}"


class Evidence(BaseModel):
    """One piece of evidence a method used; `id` resolves in the store named by `source`."""

    id: str = Field(min_length=1)
    kind: EvidenceKind
    text: str
    score: float | None = None
    source: str
    provenance: dict[str, Any] = Field(default_factory=dict)


class TraceStep(BaseModel):
    """One step of a method: its inputs, its output, its cost, and a typed error if it failed."""

    name: str
    input: dict[str, Any] = Field(default_factory=dict)
    output: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None
    error_type: str | None = None
    duration_s: float = 0.0
    usage: Usage = Field(default_factory=Usage)


# Called with every trace step as it ends, in the context that set it (e.g. a server streaming progress);
# contexts are copied into worker threads and tasks, so steps of a method running there are seen too.
StepListener = Callable[["TraceStep"], None]
STEP_LISTENER: ContextVar[StepListener | None] = ContextVar("clinrag_step_listener", default=None)


class Trace(BaseModel):
    steps: list[TraceStep] = Field(default_factory=list)

    @contextmanager
    def step(self, name: str, **inputs: Any):
        """Record a step; the body fills `step.output`. An exception is recorded on the step and re-raised."""
        record = TraceStep(name=name, input=inputs)
        started = time.perf_counter()
        try:
            yield record
        except Exception as exc:
            record.error, record.error_type = str(exc), type(exc).__name__
            raise
        finally:
            record.duration_s = time.perf_counter() - started
            self.steps.append(record)
            listener = STEP_LISTENER.get()
            if listener is not None:
                listener(record)


class DdxSnapshot(BaseModel):
    """The differential after one iteration of an interactive method, and how many questions it had asked."""

    iteration: int = Field(ge=0)
    questions_asked: int = Field(default=0, ge=0)
    ddx: list[RankedDiagnosis] = Field(default_factory=list)


class StructuredResult(BaseModel):
    """The machine-readable part of an answer. `ddx_history` is filled by interactive methods: one snapshot
    per iteration, the last equal to `ddx` (it is what per-turn metrics and Δprogress are computed from)."""

    choice: str | None = None
    choices: list[str] = Field(default_factory=list)
    ddx: list[RankedDiagnosis] = Field(default_factory=list)
    ddx_history: list[DdxSnapshot] = Field(default_factory=list)


class Answer(BaseModel):
    """What every method returns: text, structured result, evidence used, how it got there, what it cost.

    `error` is set when the method could not produce a valid result (e.g. unparseable output); the structured
    result is then left empty rather than filled with a default.
    """

    case_id: str
    method: str
    text: str = ""
    result: StructuredResult = Field(default_factory=StructuredResult)
    evidence: list[Evidence] = Field(default_factory=list)
    trace: Trace = Field(default_factory=Trace)
    usage: Usage = Field(default_factory=Usage)
    error: str | None = None
    # Structured output particular to a method (the consultation's findings, questions and next steps).
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def evidence_ids(self) -> list[str]:
        return [item.id for item in self.evidence]

    @model_validator(mode="after")
    def _unique_evidence(self) -> Answer:
        ids = self.evidence_ids
        if len(ids) != len(set(ids)):
            raise ValueError("evidence ids in an answer must be unique")
        return self
