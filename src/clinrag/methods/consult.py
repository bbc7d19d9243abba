"""`consult`: the grounded consultation as a method — `clinrag consult`, `POST /v1/consult` and
`clinrag eval run --method consult` all answer through it. The answer is built from the findings, the disease
knowledge and (when given) similar past patients; no chat model is used unless `prose=llm` (or the
`consult_prose` setting) asks a capable one to write the sentences, which are then checked against the
evidence (see `prose`)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field, field_validator

from clinrag.consult.answer.compose import render, rendered
from clinrag.consult.answer.report import ConsultationReport, Unsupported
from clinrag.consult.compiled import CompiledKnowledge, Extractors
from clinrag.consult.consultant import Consultant
from clinrag.consult.reason.differential import Differential, Experience, LikelihoodSettings
from clinrag.consult.reason.triage import Triage, TriageSettings
from clinrag.consult.settings import ConsultantSettings
from clinrag.consult.state import ConsultState
from clinrag.consult.understand.meaning import NEGATION_MARGIN, SEMANTIC_THRESHOLD
from clinrag.core.models import (
    HPO_EXCLUDED,
    HPO_OBSERVED,
    HPO_ONSET,
    Answer,
    Case,
    Evidence,
    RankedDiagnosis,
    StructuredResult,
)
from clinrag.core.provenance import case_origins
from clinrag.methods.base import Method, MethodConfig, MethodContext, MethodSpec, run_sync
from clinrag.methods.registry import register
from clinrag.methods.resources import DataPath, DatasetPath, GraphSources

if TYPE_CHECKING:  # the prose writer is imported when a model writes the sentences (it loads the indexes)
    from clinrag.methods.consult_prose import ProseWriter

DEFAULT_SOURCES = "packaged:conditions,packaged:hpo-diseases,packaged:ddxplus"
_LIKELY = LikelihoodSettings()  # the defaults of the likelihood settings below
_TRIAGE = TriageSettings()  # … and of the triage settings
_CONSULTANT = ConsultantSettings()  # … and of the consultant's


class ConsultConfig(MethodConfig):
    method_name: ClassVar[str] = "consult"

    # Disease knowledge: graph sources, comma-separated, as `clinrag graph build -s` names them.
    sources: GraphSources = DEFAULT_SOURCES
    # The knowledge for Chinese input, as `sources`; None: `sources` for every language. The knowledge
    # base's findings have Chinese names, so Chinese input is read on it; CMeKG
    # ("packaged:cmekg,packaged:conditions,packaged:hpo-diseases") is opt-in: on the Chinese tuning
    # presentations its 6,115 diseases drew the differential away (GTPA@1 0.17 against 0.54 without it).
    chinese_sources: GraphSources | None = None
    # Similar past patients: DATASET:PATH (ddxplus, dialmed, icraft); in an evaluation, the dataset's other
    # patients are used when this is not set.
    patients: DatasetPath | None = None
    questions: int = Field(default=_CONSULTANT.questions, ge=0, le=10)
    abstain_below: float = Field(default=_CONSULTANT.abstain_below, ge=0.0, le=1.0)
    cant_miss_above: float = Field(default=_CONSULTANT.cant_miss_above, ge=0.0, le=1.0)
    danger_weight: float = Field(default=_CONSULTANT.danger_weight, ge=0.0, le=10.0)
    # where to go and how soon (`triage.TriageSettings`): the differential's shares that raise or lower care
    emergency_above: float = Field(default=_TRIAGE.emergency_above, gt=0.0, le=1.0)
    danger_above: float = Field(default=_TRIAGE.danger_above, gt=0.0, le=1.0)
    urgent_above: float = Field(default=_TRIAGE.urgent_above, gt=0.0, le=1.0)
    self_care_above: float = Field(default=_TRIAGE.self_care_above, gt=0.0, le=1.0)
    not_assessed: Literal["emergency", "urgent", "soon"] = _TRIAGE.not_assessed
    candidate_diseases: int = Field(default=_CONSULTANT.candidate_diseases, ge=1, le=100)
    # The differential's likelihoods (see `differential`; set a priori, not fitted to any evaluation set):
    # P(f | d) of a listed finding, where its source declares no share its patients show
    # (`SourceTraits.listed_share`), at most `typical` and `spectrum` / the disease's listed findings; `leak`
    # for an unlisted one; `salience_step` less per place after the first in a salience-ordered list (down
    # to `salience_floor`); `broader_share` of it when only the broader finding is listed; the prior
    # factor `other_sex` of a condition of the other sex.
    typical: float = Field(default=_LIKELY.typical, gt=0.0, le=1.0)
    spectrum: float = Field(default=_LIKELY.spectrum, gt=0.0)
    leak: float = Field(default=_LIKELY.leak, gt=0.0, lt=1.0)
    salience_step: float = Field(default=_LIKELY.salience_step, ge=0.0, lt=1.0)
    salience_floor: float = Field(default=_LIKELY.salience_floor, gt=0.0, le=1.0)
    broader_share: float = Field(default=_LIKELY.broader_share, gt=0.0, le=1.0)
    other_sex: float = Field(default=_LIKELY.other_sex, gt=0.0, le=1.0)
    # P(f | d) when the knowledge states d does not show f; how many steps up the hierarchy a listed broader
    # finding still explains one (each step `broader_share` again), or `specific_share` × the share of the
    # broader finding's diseases that explain f; the leak of a finding as this share of the diseases that
    # show it (0: the constant `leak`; see `differential`)
    stated_absent: float = Field(default=_LIKELY.stated_absent, gt=0.0, lt=1.0)
    broader_steps: int = Field(default=_LIKELY.broader_steps, ge=0, le=10)
    specific_share: float = Field(default=_LIKELY.specific_share, ge=0.0, le=1.0)
    # how sure an absent finding is: P(a finding the patient has is found when it is looked for)
    absent_reliability: float = Field(default=_LIKELY.absent_reliability, gt=0.0, le=1.0)
    # P(f | d) where a source that states frequencies states none for f (HPO: a third of its annotations)
    unstated_share: float = Field(default=_LIKELY.unstated_share, gt=0.0, lt=1.0)
    annotated_spectrum: float = Field(default=_LIKELY.annotated_spectrum, gt=0.0)  # … at most this / findings
    background_noise: float = Field(default=_LIKELY.background_noise, ge=0.0, le=10.0)
    # the factor of a disease whose knowledge says it begins at ages other than the patient's onset class
    onset_mismatch: float = Field(default=_LIKELY.onset_mismatch, gt=0.0, le=1.0)
    # … whose course (`clinical_tables/course.jsonl`) says it presents after a shorter or longer complaint
    course_mismatch: float = Field(default=_LIKELY.course_mismatch, gt=0.0, le=1.0)
    # how far the prior follows how common the knowledge says a condition is in primary care (0: not at all)
    prevalence_exponent: float = Field(default=_LIKELY.prevalence_exponent, ge=0.0, le=2.0)
    # the leak of a finding a typical-findings list (the knowledge base) does not name, as this share of such
    # lists naming it (0: the constant `leak`)
    typical_background: float = Field(default=_LIKELY.typical_background, ge=0.0, le=2.0)
    # How often a patient mentions, unasked, a finding they have (what goes unsaid then counts a little
    # against the diseases that nearly always show it; 0: not at all; see `differential`).
    mention_rate: float = Field(default=_LIKELY.mention_rate, ge=0.0, lt=1.0)
    clinical_mention_rate: float = Field(default=_LIKELY.clinical_mention_rate, ge=0.0, lt=1.0)  # HPO's terms
    # The finding extractor's matching by meaning: the least cosine of a clause with a finding, and how much
    # closer the clause without its "can't" must be for the word to deny it (see `meaning`).
    meaning_threshold: float = Field(default=SEMANTIC_THRESHOLD, gt=0.0, le=1.0)
    negation_margin: float = Field(default=NEGATION_MARGIN, ge=0.0, le=1.0)
    # A statement knowledge base (`clinrag kb build`): what it says about each leading diagnosis is quoted
    # and cited beside it (the probabilities do not change). None: no statements.
    kb: DataPath | None = None
    # Who writes the answer's sentences: the templates, or the chat model ("llm": a capable one — the
    # embedded 135M model invents facts) checked against the evidence; None: the consult_prose setting.
    prose: Literal["template", "llm"] | None = None
    refine_iterations: int = Field(default=1, ge=0, le=10)  # Med-TextGrad T on the model's prose (0 = off)
    unsupported: Unsupported = "drop"  # a sentence the evidence check does not support: drop or flag it
    # What of a case is read: its words, the findings its patient is given as codes (HPO terms shown and
    # excluded), or both; with "codes", a case without codes is read from its words.
    reads: Literal["text", "codes", "both"] = "both"

    @field_validator("sources", "chinese_sources")
    @classmethod
    def _sources(cls, value: str | None) -> str | None:
        if value is None:
            return value
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if not parts:
            raise ValueError("name at least one knowledge source")
        malformed = [part for part in parts if not all(side.strip() for side in part.partition(":")[::2])]
        if malformed:
            raise ValueError(f"a source is KIND:PATH or packaged:NAME, got {', '.join(malformed)}")
        # one spelling per set of sources: a source named twice, or with spaces, is the same knowledge (and
        # the same compiled folder, not one more per spelling)
        return ",".join(dict.fromkeys(parts))

    @field_validator("patients")
    @classmethod
    def _patients(cls, value: str | None) -> str | None:
        if value is not None and ":" not in value:
            raise ValueError("expected DATASET:PATH, e.g. ddxplus:../shared/data/ddxplus")
        if value is not None and value.startswith("synthetic:"):
            raise ValueError("a synthetic cohort is not clinical experience: give a real patient base")
        return value

    def source_specs(self) -> list[str]:
        return [part.strip() for part in self.sources.split(",") if part.strip()]


class ConsultMethod(Method):
    name = "consult"

    def __init__(
        self,
        consultant: Consultant,
        prose: ProseWriter | None = None,
        reads: Literal["text", "codes", "both"] = "both",
        other_languages: Mapping[str, Callable[[], Consultant]] | None = None,
    ) -> None:
        """`consultant` answers every language but those `other_languages` builds a consultant of its own
        for (on first use: Chinese input on `chinese_sources`)."""
        self.consultant = consultant
        self.prose = prose
        self.reads = reads
        self.model = prose.model if prose is not None else None
        self._other_languages = dict(other_languages or {})
        self._by_language: dict[str, Consultant] = {}
        self._lock = threading.Lock()

    def consultant_for(self, language: str) -> Consultant:
        """The consultant of input in `language`."""
        make = self._other_languages.get(language)
        if make is None:
            return self.consultant
        with self._lock:
            if language not in self._by_language:
                self._by_language[language] = make()
            return self._by_language[language]

    async def aanswer(self, case: Case) -> Answer:
        consultant, state = await asyncio.to_thread(self.start, case)
        return await self.aanswer_state(case, state, consultant)

    def answer(self, case: Case) -> Answer:
        # with the templates writing, nothing waits on a model: no event loop or worker thread is needed
        if self.prose is not None:
            return super().answer(case)
        consultant, state = self.start(case)
        return self.answer_state(case, state, consultant)

    def start(self, case: Case) -> tuple[Consultant, ConsultState]:
        """The one way into a consultation (the method, the CLI with or without questions, web sessions): the
        consultant of the case's language and what it reads of the case (its words, HPO codes, age, sex).
        A case that is itself in the patient base is left out of the experience (leave-case-out)."""
        consultant = self.consultant_for(case.language).leaving_out(case.id)
        return consultant, read_case(consultant, case, self.reads)

    def answer_state(self, case: Case, state: ConsultState, consultant: Consultant | None = None) -> Answer:
        if self.prose is not None:
            return run_sync(self.aanswer_state(case, state, consultant))
        answer, report, evidence = self._reported(
            case, state, consultant or self.consultant_for(case.language)
        )
        return _finished(answer, report, evidence, case)

    async def aanswer_state(
        self, case: Case, state: ConsultState, consultant: Consultant | None = None
    ) -> Answer:
        """The answer for what is known of the patient now (the text, and any answers to questions since)."""
        answer, report, evidence = await asyncio.to_thread(
            self._reported, case, state, consultant or self.consultant_for(case.language)
        )
        if self.prose is not None:
            report = await self.prose.awrite(report, evidence, _text(case), case.language, answer)
        return _finished(answer, report, evidence, case)

    def _reported(
        self, case: Case, state: ConsultState, consultant: Consultant
    ) -> tuple[Answer, ConsultationReport, list[Evidence]]:
        answer = Answer(case_id=case.id, method=self.name)
        with answer.trace.step("consult.findings") as step:
            step.output = state.findings.model_dump(mode="json") | {"answered": state.answered}
        with answer.trace.step("consult.report") as step:
            report, evidence = consultant.report(state)
            texts = {item.id: item.text for item in evidence}
            report = rendered(report, case.language, texts, consultant.names_in(case.language))
            step.output = {"abstained": report.abstained, "reason": report.abstention_reason}
        if case.options:
            with answer.trace.step("consult.options", options=len(case.options)) as step:
                ranked = consultant.ranked_options(state, case.options, case.id)
                step.output = {
                    "options": [[o.text, round(o.probability, 4), o.how, o.diseases] for o in ranked]
                }
            answer.result = StructuredResult(
                choice=ranked[0].key,
                ddx=[RankedDiagnosis(name=o.text, probability=o.probability) for o in ranked],
            )
        return answer, report, evidence


def read_case(
    consultant: Consultant, case: Case, reads: Literal["text", "codes", "both"] = "both"
) -> ConsultState:
    """A case as the consultation reads it: its words and the findings its patient is given as HPO codes
    (shown, excluded, the onset class), as `reads` says; with "codes", a case without codes is read from its
    words. What the case states outright (age, sex) stands in for what the text leaves out."""
    codes = case.patient.codes if case.patient is not None and reads != "text" else {}
    coded = bool(codes.get(HPO_OBSERVED) or codes.get(HPO_EXCLUDED))
    text = "" if coded and reads == "codes" else _text(case)
    state = consultant.start(
        text,
        case.language,
        exclude=case_origins(case),
        present=[*codes.get(HPO_OBSERVED, ()), *codes.get(HPO_ONSET, ())],
        absent=codes.get(HPO_EXCLUDED, ()),
    )
    if case.patient is not None:
        given = case.patient.demographics
        state.findings.age = state.findings.age if state.findings.age is not None else given.age
        state.findings.sex = state.findings.sex or (given.sex if given.sex != "other" else None)
    return state


def _finished(answer: Answer, report: ConsultationReport, evidence: list[Evidence], case: Case) -> Answer:
    """`answer` with the report's sentences, its evidence and the ranked diagnoses (a case with options has
    its options ranked already, every one of them, even when nothing was understood)."""
    answer.evidence = evidence
    answer.details = report.model_dump(mode="json")
    answer.text = render(report.sentences)
    if not case.options and report.differential:
        ddx = [
            RankedDiagnosis(
                name=d.name, probability=d.probability, code=d.icd10 or d.key, synonyms=d.synonyms
            )
            for d in report.differential
        ]
        answer.result = StructuredResult(choice=ddx[0].name, ddx=ddx)
    if report.abstained and not case.options:
        answer.error = f"abstained: {report.abstention_reason}"
    return answer


def _text(case: Case) -> str:
    return case.patient.initial_presentation if case.patient else case.question


def build(context: MethodContext, config: ConsultConfig) -> ConsultMethod:
    """The consultation, with the prose writer when the model writes the sentences."""
    consultant = build_consultant(context, config)
    other: dict[str, Callable[[], Consultant]] = {}
    if config.chinese_sources is not None and config.chinese_sources != config.sources:
        chinese = config.model_copy(update={"sources": config.chinese_sources, "chinese_sources": None})
        other["zh"] = lambda: build_consultant(context, chinese)
    if (config.prose or context.settings.consult_prose) == "template":
        return ConsultMethod(consultant, reads=config.reads, other_languages=other)
    from clinrag.methods.consult_prose import Names, ProseWriter

    writer = ProseWriter(
        context.chat_model,
        context.embedder,
        Names.of(consultant.differential.model.diseases),
        refine_iterations=config.refine_iterations,
        unsupported=config.unsupported,
    )
    return ConsultMethod(consultant, writer, reads=config.reads, other_languages=other)


def build_consultant(context: MethodContext, config: ConsultConfig) -> Consultant:
    """The consultant for `config`. Its heavy parts (the compiled knowledge, the experience's counts, the
    tables of the differential, the finding extractors) are built once per sources and patients (the
    extractors: per sources and matching settings) and shared with every other configuration built from the
    same context's `shared` cache; the likelihood settings are cheap to change."""
    sources = config.source_specs()
    key = ",".join(
        sorted(
            s if s.startswith("packaged:") else f"{s.split(':', 1)[0]}:{Path(s.split(':', 1)[1]).resolve()}"
            for s in sources
        )
    )
    experience = config.patients if config.patients is not None else id(context.experience)
    compiled, differential = context.shared.get(
        ("consult", key, experience), lambda: _knowledge(context, config, key)
    )
    extractors = context.shared.get(
        ("consult-extractors", key, config.meaning_threshold, config.negation_margin),
        lambda: _extractors(context, config, compiled),
    )
    return Consultant(
        differential.with_settings(_settings(LikelihoodSettings, config)),
        extractors,
        _settings(ConsultantSettings, config),
        Triage(differential.clinical, _settings(TriageSettings, config)),
        kb=context.knowledge_base(config.kb, param="kb") if config.kb else None,
    )


def _settings(kind, config: ConsultConfig):
    """The settings dataclass `kind` with the values `config` gives its fields."""
    return kind(**config.model_dump(include=set(kind.__dataclass_fields__)))


def _knowledge(
    context: MethodContext, config: ConsultConfig, key: str
) -> tuple[CompiledKnowledge, Differential]:
    directory = context.settings.built_base_path("consult", key)
    compiled = CompiledKnowledge.open(config.source_specs(), directory, context.embedder)
    records, labels = context.experience, context.labels
    if config.patients is not None:
        records, labels = _patients(config.patients)
    experience = Experience.count(records, labels, compiled.model, compiled.vocabulary) if records else None
    differential = Differential(
        compiled.model,
        compiled.vocabulary,
        experience,
        listings=compiled.listings,
        absences=compiled.absences,
        below=compiled.below,
    )
    return compiled, differential


def _extractors(context: MethodContext, config: ConsultConfig, compiled: CompiledKnowledge) -> Extractors:
    extractors = Extractors(
        compiled, context.embedder, threshold=config.meaning_threshold, negation_margin=config.negation_margin
    )
    extractors("en")  # English, read most, is loaded with the rest; another language when first asked for
    return extractors


def _patients(spec: str):
    from clinrag.patients.loaders import load_patient_dataset

    dataset, _, path = spec.partition(":")
    records, _ = load_patient_dataset(dataset, Path(path))  # type: ignore[arg-type]
    return records, {r.id: r.codes.get("diagnosis", []) for r in records}


SPEC = register(
    MethodSpec(
        name="consult",
        description="no LLM: grounded consultation — findings, a differential from the disease knowledge "
        "(and similar patients), next questions and steps, an answer citing its evidence (prose=llm: a "
        "capable model writes it, checked against the evidence)",
        config=ConsultConfig,
        factory=build,
        uses_llm=False,
    )
)
