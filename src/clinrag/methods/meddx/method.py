"""`meddx`: MEDDxAgent — the DDxDriver over history taking, knowledge retrieval and a diagnosis strategy, for
interactive differential diagnosis from the initial information. The patient is the structured patient
behind question matching on coded datasets (DDXPlus; on HPO-coded ones, `phenopackets-interactive`, the
terms a question names answered from the published case), else the LLM patient (iCraft-MD, `phenopackets`).
`components` leaves parts out: `["diagnosis"]` is the diagnosis-strategy-only baseline (DS-only),
`["knowledge", "diagnosis"]` the knowledge-retrieval baseline (KR-only). The differential after each
diagnosis is in `ddx_history` (per-iteration GTPA, rank and Δprogress); the knowledge cited and the example
patients shown are the evidence; the patient simulator's own model calls are reported in the trace
(`meddx.patient`), not counted as the method's."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from clinrag.consult.consultant import Consultant
from clinrag.core.errors import InvalidInputError
from clinrag.core.models import HIDDEN_HPO_OBSERVED, Answer, Case, StructuredResult
from clinrag.methods.base import Method, MethodConfig, MethodContext, MethodSpec
from clinrag.methods.consult import ConsultConfig
from clinrag.methods.consult import build as build_consult
from clinrag.methods.meddx.candidates import knowledge_candidates
from clinrag.methods.meddx.consultation import Consultation
from clinrag.methods.meddx.diagnosis_agent import DiagnosisAgent, Strategy
from clinrag.methods.meddx.driver import ORDER, Component, DDxDriver, DriverConfig
from clinrag.methods.meddx.history_taking import ExperienceAdvisor, HistoryTaker
from clinrag.methods.meddx.hpo_patient import HpoInterviewee, HpoPatient, terms_named
from clinrag.methods.meddx.interviewee import (
    CodedInterviewee,
    Interviewee,
    QuestionMatcher,
    SimulatedInterviewee,
)
from clinrag.methods.meddx.knowledge_agent import GraphSource, KnowledgeAgent
from clinrag.methods.meddx.llm_patient import LLMPatient
from clinrag.methods.meddx.structured_patient import StructuredPatient, evidence_catalogue
from clinrag.methods.options import option_key
from clinrag.methods.registry import register
from clinrag.methods.resources import DataPath, GraphUri

SourceName = Literal["kb", "graph", "literature"]
DRIVER_FIELDS = {"mode", "iterations", "questions", "stable_top_k", "stable_for", "retries", "max_steps"}


class MeddxConfig(MethodConfig):
    method_name: ClassVar[str] = "meddx"

    mode: Literal["fixed", "dynamic"] = "fixed"
    # fixed mode: the driver's model writes each step's input, as MEDDxAgent's DDxDriver does (off: templates)
    driver_instructs: bool = False
    iterations: int = Field(default=3, ge=1, le=10)
    questions: int = Field(default=5, ge=1, le=50)  # per history-taking step
    components: list[Component] = Field(default_factory=lambda: list(ORDER))
    strategy: Strategy = "zero_shot"
    shots: int = Field(default=3, ge=1, le=10)
    # the differential: the options scored by likelihood, or the model's generated top ten (MEDDxAgent)
    ranking: Literal["likelihood", "generated"] = "likelihood"
    # the diagnosis prompt also shows the differential so far and the driver's instructions for the step
    diagnosis_context: bool = False
    # a case without options (a rare-disease patient): the consultation's leading diseases are the candidates
    candidates: int = Field(default=20, ge=2, le=100)
    sources: list[SourceName] | None = None  # null: every source that is configured
    kb: DataPath | None = None
    graph: GraphUri | None = None
    patient: Literal["auto", "structured", "llm"] = "auto"
    # the LLM patient may name one related finding after "I don't know" (off: it answers only what is asked)
    patient_volunteers: bool = True
    stop_on_goals: bool = False  # the doctor may end an interview early by saying its goals are met
    experience_goals: bool = False  # the experience policy suggests the doctor's next question (coded data)
    stable_top_k: int = Field(default=0, ge=0, le=10)
    stable_for: int = Field(default=1, ge=1, le=5)
    retries: int = Field(default=2, ge=0, le=5)
    max_steps: int = Field(default=20, ge=1, le=100)

    @field_validator("components", "sources", mode="before")
    @classmethod
    def _comma_list(cls, value: Any) -> Any:
        return (
            [part.strip() for part in value.split(",") if part.strip()] if isinstance(value, str) else value
        )

    @model_validator(mode="after")
    def _diagnosis_included(self) -> MeddxConfig:
        if "diagnosis" not in self.components:
            raise ValueError("components must include diagnosis (it makes the differential)")
        if len(set(self.components)) != len(self.components):
            raise ValueError("components must not repeat")
        return self


class Meddx(Method):
    name = "meddx"

    def __init__(
        self,
        driver: DDxDriver,
        config: MeddxConfig,
        *,
        context: MethodContext,
        consultant: Callable[[], Consultant] | None = None,
    ) -> None:
        self.driver = driver
        self.config = config
        self.model = driver.diagnosis.model
        self._context = context
        self._matchers: dict[str, QuestionMatcher] = {}  # one per catalogue: its questions embedded once
        self._consultant = consultant or packaged_consultant(context)
        self._read_hpo: Callable[[str], list[str]] | None = None

    async def aanswer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        interviewee = self._interviewee(case) if "history" in self.config.components else None
        consultation = Consultation(case, interviewee)
        stop = await self.driver.run(consultation, answer)
        with answer.trace.step("meddx.stop", questions=len(consultation.exchanges)) as step:
            step.output = {"reason": stop, "diagnoses": len(consultation.history)}
        if interviewee is not None:
            with answer.trace.step("meddx.patient", kind=type(interviewee).__name__) as step:
                step.usage = interviewee.usage
                step.output = {"calls": interviewee.usage.calls, "codes": interviewee.codes()}
        return _finish(answer, consultation, stop)

    def _interviewee(self, case: Case) -> Interviewee:
        catalogue = case.meta.get("evidence_catalogue")
        coded = isinstance(catalogue, str) and "hidden_evidence" in case.meta
        hpo_coded = HIDDEN_HPO_OBSERVED in case.meta
        kind = self.config.patient
        if kind == "structured" or (kind == "auto" and (coded or hpo_coded)):
            if hpo_coded and not coded:
                return HpoInterviewee(HpoPatient(case), self._hpo_reader())
            if not coded:
                raise InvalidInputError(
                    f"case {case.id} is not coded: the structured patient cannot answer it"
                )
            patient = StructuredPatient(case, evidence_catalogue(catalogue))
            patient.initial()  # what the clinician heard first is known from the start
            return CodedInterviewee(patient, self._matcher(catalogue))
        return SimulatedInterviewee(
            LLMPatient.for_case(self._context.chat_model, case, volunteers=self.config.patient_volunteers)
        )

    def _hpo_reader(self) -> Callable[[str], list[str]]:
        """What reads the HPO terms a doctor's question names: the consultation's finding extractor."""
        if self._read_hpo is None:
            self._read_hpo = terms_named(self._consultant())
        return self._read_hpo

    def _matcher(self, catalogue: str) -> QuestionMatcher:
        if catalogue not in self._matchers:
            self._matchers[catalogue] = QuestionMatcher(evidence_catalogue(catalogue), self._context.embedder)
        return self._matchers[catalogue]


def _finish(answer: Answer, consultation: Consultation, stop: str) -> Answer:
    case = consultation.case
    if not consultation.history:
        answer.error = f"no differential was made (stopped: {stop})"
        answer.text = consultation.dialogue_text()
        return answer
    ddx = consultation.ddx
    answer.result = StructuredResult(
        choice=option_key(ddx[0].name, case.options), ddx=ddx, ddx_history=consultation.history
    )
    parts = [consultation.dialogue_text()] if consultation.exchanges else []
    parts += [f"Knowledge: {note.summary}" for note in consultation.notes[-1:]]
    parts.append("Differential: " + consultation.ddx_text())
    answer.text = "\n\n".join(parts)
    return answer


def _knowledge_agent(context: MethodContext, config: MeddxConfig) -> KnowledgeAgent:
    from clinrag.knowledge.base import INFO_FILE
    from clinrag.literature.config import build_literature_search, literature_config

    settings = context.settings
    kb_dir = Path(config.kb) if config.kb else settings.knowledge_base_path
    graph_uri = config.graph or settings.graph_uri
    home_graph = settings.graph_data_dir
    literature = build_literature_search(literature_config(settings))
    available = {
        "kb": (kb_dir / INFO_FILE).is_file(),
        "graph": bool(graph_uri) or home_graph.is_dir(),
        "literature": bool(literature.sources),
    }
    wanted = config.sources if config.sources is not None else [s for s, ok in available.items() if ok]
    missing = [s for s in wanted if not available[s]]
    if missing or not wanted:
        raise InvalidInputError(
            f"knowledge retrieval has no {', '.join(missing) or 'source'}: build a knowledge base "
            "(`clinrag kb build`) or a graph (`clinrag graph build`), configure the literature, or leave "
            "knowledge out of the components"
        )
    return KnowledgeAgent(
        context.chat_model,
        knowledge_base=context.knowledge_base(str(kb_dir), param="kb") if "kb" in wanted else None,
        graph=GraphSource(context.graph_store(graph_uri), graph_uri or "graph")
        if "graph" in wanted
        else None,
        literature=literature if "literature" in wanted else None,
    )


def packaged_consultant(context: MethodContext) -> Callable[[], Consultant]:
    """The consultation on the packaged knowledge (compiled once in the clinrag home), opened when a case
    first needs it: one without options, or an HPO-coded patient's questions."""
    return cache(lambda: build_consult(context, ConsultConfig()).consultant)


def build(context: MethodContext, config: MeddxConfig) -> Meddx:
    components = tuple(c for c in ORDER if c in config.components)
    consultant = packaged_consultant(context)
    advisor = None
    if config.experience_goals:
        from clinrag.methods.meddx.experience_policy import ExperienceModel

        advisor = ExperienceAdvisor(ExperienceModel(context.experience, context.labels))
    driver = DDxDriver(
        model=context.chat_model if config.mode == "dynamic" or config.driver_instructs else None,
        diagnosis=DiagnosisAgent(
            context.chat_model,
            config.strategy,
            context.experience,
            context.labels,
            shots=config.shots,
            ranking=config.ranking,
            with_context=config.diagnosis_context,
            propose=lambda case: knowledge_candidates(consultant(), case, config.candidates),
            similar=context.similar_patients() if "dynamic" in config.strategy else None,
        ),
        history=HistoryTaker(context.chat_model, advisor, config.stop_on_goals)
        if "history" in components
        else None,
        knowledge=_knowledge_agent(context, config) if "knowledge" in components else None,
        config=DriverConfig(
            components=components,
            instructed=config.driver_instructs,
            **config.model_dump(include=DRIVER_FIELDS),
        ),
    )
    return Meddx(driver, config, context=context, consultant=consultant)


SPEC = register(
    MethodSpec(
        name="meddx",
        description="MEDDxAgent: DDxDriver over history taking, knowledge retrieval and a diagnosis strategy",
        config=MeddxConfig,
        factory=build,
        uses_patients=True,
    )
)
