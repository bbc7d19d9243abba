"""Request and response bodies of the HTTP API (validated; unknown fields are refused)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from clinrag.core.models import Evidence, Language, RankedDiagnosis, TaskKind
from clinrag.methods.consult.report import ConsultationReport

MAX_TEXT_CHARS = 20_000
# An option key or text: something besides blanks.
OptionText = Annotated[str, StringConstraints(min_length=1, max_length=2_000, pattern=r"\S")]


class ConsultRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str = Field(default="consult", min_length=1, max_length=64)
    task: TaskKind = "free_text"
    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="The case and the question.")
    options: dict[OptionText, OptionText] = Field(default_factory=dict, max_length=100)
    params: dict[str, Any] = Field(default_factory=dict, description="The method's --param values.")
    language: Language = "en"


class ConsultStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: str = Field(min_length=1, max_length=MAX_TEXT_CHARS, description="The patient's words.")
    language: Language = "en"
    params: dict[str, Any] = Field(
        default_factory=dict, description="The consult method's --param values (knowledge, patients, ...)."
    )


class ConsultReply(BaseModel):
    model_config = ConfigDict(extra="forbid")

    concept: str = Field(min_length=1, max_length=200, description="A question's concept id.")
    answer: Literal["yes", "no", "unknown"]


class ConsultExchange(BaseModel):
    concept: str
    answer: Literal["yes", "no", "unknown"]


class ConsultSessionOut(BaseModel):
    session_id: str
    report: ConsultationReport
    text: str = Field(description="The composed answer; each sentence cites its evidence ids.")
    evidence: list[Evidence] = Field(description="Every evidence item the report cites.")
    answered: list[ConsultExchange] = Field(description="The answers given to questions, in order.")


class DdxStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sex: Literal["female", "male"] | None = None  # past patients of the other sex weigh less
    complaint: str = Field(
        min_length=1,
        max_length=1_000,
        description="The main complaint in words, or a symptom's evidence code.",
    )


class DdxAnswer(BaseModel):
    model_config = ConfigDict(extra="forbid")

    answer: Literal["yes", "no", "unknown"]
    values: list[str] = Field(default_factory=list, max_length=50)


class DdxChoice(BaseModel):
    value: str
    text: str


class DdxQuestionOut(BaseModel):
    evidence: str
    text: str
    kind: Literal["yes_no", "choice", "multi_choice"]
    choices: list[DdxChoice] = Field(default_factory=list)


class DdxExchangeOut(BaseModel):
    question: str
    answer: str


class DdxSessionOut(BaseModel):
    session_id: str
    question: DdxQuestionOut | None
    differential: list[RankedDiagnosis]
    dialogue: list[DdxExchangeOut]
    questions_asked: int
    done: bool
    stop_reason: str | None = None


class ErrorOut(BaseModel):
    error: str
    detail: Any = None


class Health(BaseModel):
    status: Literal["ok"] = "ok"
    methods: list[str]
    ddx: bool
