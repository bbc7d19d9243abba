"""What a consultation returns, as data: the findings understood, the differential with what supports each
diagnosis, the next questions, the next steps, and the answer's sentences with the evidence each rests on."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from clinrag.consult.reason.dangers import DangerOut, RedFlagOut
from clinrag.consult.reason.triage import TriageOut
from clinrag.consult.understand.finding_types import Contradiction, FindingStatus

Unsupported = Literal["drop", "flag"]  # a sentence of the model's the evidence check does not support


class FindingOut(BaseModel):
    concept: str  # concept id
    name: str
    status: FindingStatus
    text: str  # as the patient put it ("" for an answer to a question)
    evidence: str  # the evidence id of this finding
    contradiction: Contradiction | None = None  # why it is uncertain: the text both states and denies it


class DiagnosisOut(BaseModel):
    name: str
    probability: float = Field(ge=0.0, le=1.0)
    icd10: str | None = None
    key: str = ""  # the disease's id in its source ("OMIM:154700"), where it has one
    synonyms: list[str] = Field(default_factory=list)  # other names it is known by
    source: str
    supporting: list[str] = Field(default_factory=list)  # findings reported that the knowledge lists for it
    against: list[str] = Field(default_factory=list)  # findings denied that the knowledge lists for it
    not_reported: list[str] = Field(default_factory=list)  # typical findings not reported either way
    evidence: list[str] = Field(default_factory=list)
    statements: list[str] = Field(
        default_factory=list
    )  # evidence ids of the knowledge base's statements on it


class QuestionOut(BaseModel):
    concept: str
    finding: str  # the finding's name
    asked: str | None = None  # the question as the knowledge words it (DDXPlus), in English
    text: str = ""  # the question in plain words, in the consultation's language (`compose.rendered`)
    gain: float  # expected information gain (nats)
    evidence: list[str] = Field(default_factory=list)  # the facts that make it informative


class NextStep(BaseModel):
    diagnosis: str
    kind: Literal["test", "drug", "care"]
    name: str
    evidence: str


class Sentence(BaseModel):
    text: str
    evidence: list[str] = Field(default_factory=list)
    kind: Literal[
        "urgency",
        "safety_net",
        "finding",
        "differential",
        "question",
        "step",
        "experience",
        "abstention",
        "advice",
    ]
    by: Literal["template", "llm"] = "template"  # who wrote it
    unsupported: list[str] = Field(default_factory=list)  # why the evidence check does not support it


class ConsultationReport(BaseModel):
    findings: list[FindingOut] = Field(default_factory=list)
    age: int | None = None
    sex: str | None = None
    duration_days: float | None = None  # how long, when the text measures it
    duration_written: str | None = None  # how long, as the text says it
    duration: str | None = None  # how long, in the consultation's language (`compose.rendered`)
    onset: str | None = None
    onset_class: str | None = None  # the age the illness began at, as an HPO onset class ("Infantile onset")
    subject: Literal["child", "other"] | None = None  # whom the account is about, when not the one writing
    not_understood: list[str] = Field(default_factory=list)
    differential: list[DiagnosisOut] = Field(default_factory=list)
    questions: list[QuestionOut] = Field(default_factory=list)
    next_steps: list[NextStep] = Field(default_factory=list)
    dangers: list[DangerOut] = Field(default_factory=list)  # can't-miss diagnoses, most probable first
    red_flags: list[RedFlagOut] = Field(default_factory=list)
    triage: TriageOut = Field(default_factory=TriageOut)  # where to go and how soon, why, what to watch for
    abstained: bool = False
    abstention_reason: str | None = None
    patients: int | None = None  # the past patients the probabilities draw on (None: no patient base)
    experience: str = ""  # how they were used, or why not, in words (`compose.rendered`)
    sentences: list[Sentence] = Field(default_factory=list)
    prose: Literal["template", "llm"] = "template"  # llm: the chat model wrote the cited sentences
    dropped: list[Sentence] = Field(default_factory=list)  # the model's sentences the evidence check removed
