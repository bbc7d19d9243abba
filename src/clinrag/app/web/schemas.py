"""Request and response bodies of the HTTP API (validated; unknown fields are refused)."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from clinrag.consult.answer.report import ConsultationReport
from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Evidence, Language, RankedDiagnosis, TaskKind
from clinrag.terms.hpo import TERM_ID

MAX_TEXT_CHARS = 20_000
MAX_PARAMS_DEPTH = 4  # a method's parameter is a number, a string or a short list: nothing nests deeper
MAX_PARAMS_CHARS = 20_000
# An option key or text: something besides blanks.
OptionText = Annotated[str, StringConstraints(min_length=1, max_length=2_000, pattern=r"\S")]
HpoTerm = Annotated[str, StringConstraints(max_length=20, pattern=rf"^\s*{TERM_ID}\s*$")]
MAX_TERMS = 500


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _bounded(params: dict[str, Any]) -> dict[str, Any]:
    if _depth(params) > MAX_PARAMS_DEPTH:
        raise ValueError(f"parameters nest at most {MAX_PARAMS_DEPTH} levels deep")
    if len(json.dumps(params, default=str)) > MAX_PARAMS_CHARS:
        raise ValueError(f"parameters take at most {MAX_PARAMS_CHARS} characters as JSON")
    return params


# A method's parameters: small, shallow JSON (a deep or huge value costs the server, never the method).
Params = Annotated[dict[str, Any], Field(max_length=100), AfterValidator(_bounded)]


def parse_params(text: str) -> Any:
    """A method's parameters typed as JSON text (the web form), refused when too long to read or malformed;
    the request model they go into checks the rest (`Params`)."""
    if len(text) > MAX_PARAMS_CHARS:
        raise InvalidInputError(f"the parameters take at most {MAX_PARAMS_CHARS} characters")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"the parameters are not valid JSON: {exc}") from None
    except RecursionError:  # nested past what the JSON parser follows, far past MAX_PARAMS_DEPTH
        raise InvalidInputError(f"the parameters nest at most {MAX_PARAMS_DEPTH} levels deep") from None


class ConsultRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    method: str = Field(default="consult", min_length=1, max_length=64)
    task: TaskKind = "free_text"
    text: str = Field(
        default="",
        max_length=MAX_TEXT_CHARS,
        description="The case and the question (optional with HPO terms).",
    )
    options: dict[OptionText, OptionText] = Field(default_factory=dict, max_length=100)
    params: Params = Field(default_factory=dict, description="The method's --param values.")
    language: Language = "en"
    hpo: list[HpoTerm] = Field(default_factory=list, max_length=MAX_TERMS, description="HPO terms shown.")
    excluded_hpo: list[HpoTerm] = Field(
        default_factory=list, max_length=MAX_TERMS, description="HPO terms the patient is known not to show."
    )
    phenopacket: dict[str, Any] | None = Field(
        default=None, description="A GA4GH phenopacket (v2, as JSON): its terms, age and sex."
    )


def _not_blank(text: str) -> str:
    """Words that are only white space start no consultation (as `/v1/consult` refuses an empty case)."""
    if not text.strip():
        raise ValueError("the patient's words are empty")
    return text


class ConsultStart(BaseModel):
    model_config = ConfigDict(extra="forbid")

    text: Annotated[str, AfterValidator(_not_blank)] = Field(
        min_length=1, max_length=MAX_TEXT_CHARS, description="The patient's words."
    )
    language: Language = "en"
    params: Params = Field(
        default_factory=dict, description="The consult method's --param values (sources, patients, kb, ...)."
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
    language: Language = Field(default="en", description="The language the consultation is in.")


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
