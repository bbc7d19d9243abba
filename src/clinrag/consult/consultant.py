"""The grounded consultation, from structure: findings understood from the text → a differential with
probabilities from the disease knowledge (and similar past patients, when a patient base is given) → the next
most informative questions → tests, drugs and care for the leading diagnoses → an answer composed from all of
it, every sentence citing its evidence. `Consultant` holds the knowledge; a `ConsultState` is one patient's
consultation, which answers to questions extend (the interactive session)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from clinrag.consult.answer.diagnoses import differential_out
from clinrag.consult.answer.questions_asked import asked_back, asked_questions
from clinrag.consult.answer.report import ConsultationReport
from clinrag.consult.answer.reported_findings import findings_report
from clinrag.consult.answer.statements import cited_statements
from clinrag.consult.answer.steps import STEP_DIAGNOSES, next_steps
from clinrag.consult.diseases import KNOWLEDGE_LANGUAGE
from clinrag.consult.reason.dangers import dangerous_diseases, dangers, red_flags
from clinrag.consult.reason.differential import Differential, leading
from clinrag.consult.reason.option_ranking import OptionNames, RankedOption
from clinrag.consult.reason.triage import Triage
from clinrag.consult.settings import ConsultantSettings
from clinrag.consult.state import ConsultState
from clinrag.consult.understand.coded import with_codes
from clinrag.consult.understand.finding_names import names_in_language, patient_words
from clinrag.consult.understand.findings import FindingExtractor, Findings, FindingStatus
from clinrag.core.models import Evidence, Language
from clinrag.core.provenance import Origin
from clinrag.terms.hpo import onset_ages

if TYPE_CHECKING:  # a knowledge base is built by the caller; importing it loads the indexes
    from clinrag.knowledge.base import KnowledgeBase


class Consultant:
    def __init__(
        self,
        differential: Differential,
        extractors: Callable[[str], FindingExtractor],
        settings: ConsultantSettings,
        triage: Triage,
        kb: KnowledgeBase | None = None,
    ) -> None:
        self.differential = differential
        self.extractors = extractors  # the finding extractor of an input language
        self.kb = kb  # a statement knowledge base: what it says of the leading diagnoses is quoted
        self.settings = settings
        self.triage = triage  # where to go and how soon
        self.concepts = {concept.id: concept for concept in differential.vocabulary.concepts}
        self._names: dict[str, dict[str, str]] = {}

    def patients(self) -> int | None:
        """How many past patients the differential draws on (None without a patient base)."""
        experience = self.differential.experience
        return int(experience.patients.sum()) if experience is not None else None

    def names_in(self, language: Language) -> dict[str, str]:
        """The findings' names as the report gives them → their names in `language` (none to change in the
        knowledge's own language)."""
        if language not in self._names:
            vocabulary = self.extractors(language).vocabulary
            named = language != KNOWLEDGE_LANGUAGE
            self._names[language] = names_in_language(self.concepts, vocabulary) if named else {}
        return self._names[language]

    def leaving_out(self, record_id: str) -> Consultant:
        """This consultant with one past patient left out of its experience."""
        differential = self.differential.leaving_out(record_id)
        if differential is self.differential:
            return self
        other = copy.copy(self)
        other.differential = differential
        return other

    def start(
        self,
        text: str,
        language: Language = "en",
        exclude: frozenset[Origin] = frozenset(),
        present: Sequence[str] = (),
        absent: Sequence[str] = (),
    ) -> ConsultState:
        """A consultation of the patient's words in `language` (a language without finding rules is refused:
        `UnsupportedLanguageError`) and of the findings given as codes (HPO terms "HP:0001166", a patient
        record's codes), `present` and `absent`; a code no concept has is listed as not understood."""
        findings = self.extractors(language).extract(text) if text.strip() else Findings()
        if present or absent:
            findings = with_codes(self.differential.vocabulary, findings, present, absent)
        return ConsultState(findings, exclude=exclude, spoken=bool(text.strip()))

    @cached_property
    def option_names(self) -> OptionNames:
        """The knowledge's disease names, for the options of a case that has them."""
        return OptionNames(self.differential.model.diseases)

    def ranked_options(
        self, state: ConsultState, options: dict[str, str], case: str = ""
    ) -> list[RankedOption]:
        """Every option of case `case`, ranked by the differential (uninformative where it names no disease
        of the knowledge, or when nothing the patient has was understood)."""
        known = any(state.known().values())
        return self.option_names.rank(options, self.posterior(state) if known else None, case)

    def posterior(self, state: ConsultState) -> np.ndarray:
        """P(d | what is known of the patient) for every disease of the model."""
        findings = state.findings
        onset = onset_ages(findings.onset_classes)
        duration = findings.duration.days if findings.duration else None
        return self.differential.posterior(
            state.known(), findings.sex, unsaid=state.spoken, onset=onset, duration_days=duration
        )

    def answer(self, state: ConsultState, concept: str, status: FindingStatus) -> None:
        """Record the patient's answer about a concept (present, absent, or uncertain for "don't know")."""
        state.answered.append((concept, status))

    def report(self, state: ConsultState) -> tuple[ConsultationReport, list[Evidence]]:
        """The consultation as data, and every piece of evidence it cites (`compose.rendered` puts it into
        words)."""
        evidence: dict[str, Evidence] = {}
        said = state.statuses()
        contradicted = state.contradictions()
        report = findings_report(self.concepts, state.findings, said, contradicted, self.patients(), evidence)
        known = state.known()
        shares, leading_diseases = None, []
        if not any(known.values()):
            report.abstained = True
            report.abstention_reason = "no finding the patient has was understood"
            # what the text both states and denies may be all there is to go on: ask it back
            names = {concept: self.concepts[concept].name for concept in contradicted}
            report.questions = asked_back(
                self.differential, self.concepts, self.settings, self.posterior(state), names, evidence
            )
        else:
            posterior = self.posterior(state)
            order = leading(posterior, self.settings.diagnoses)
            statuses = {concept: status for concept, (status, _) in said.items()}
            report.differential = differential_out(self.differential, posterior, order, statuses, evidence)
            for diagnosis in report.differential[:STEP_DIAGNOSES]:
                diagnosis.statements = cited_statements(
                    self.kb, diagnosis.name, diagnosis.supporting, state.exclude, evidence
                )
            # what the text says both ways is asked again; what was answered, or said once, is not
            report.questions = asked_questions(
                self.differential,
                self.concepts,
                self.settings,
                self.dangerous,
                posterior,
                said.keys() - contradicted,
                statuses,
                evidence,
                STEP_DIAGNOSES,
            )
            report.next_steps = next_steps(self.differential, report.differential[:STEP_DIAGNOSES], evidence)
            report.dangers = dangers(
                self.differential, self.dangerous, posterior, self.settings.cant_miss_above, evidence
            )
            shares = self.triage.shares(posterior, self.levels)
            leading_diseases = [self.differential.model.diseases[row] for row in order[:STEP_DIAGNOSES]]
            if (top := report.differential[0].probability) < self.settings.abstain_below:
                report.abstained = True
                report.abstention_reason = (
                    f"the most likely diagnosis has {top:.0%}, below {self.settings.abstain_below:.0%}"
                )
        extracted = state.findings
        report.red_flags = red_flags(
            self.differential, self.concepts, known, extracted.age, extracted.self_told, evidence
        )
        report.triage = self.triage.decide(
            crises=extracted.crises,
            red_flags=[(flag.urgency, flag.finding, flag.evidence) for flag in report.red_flags],
            shares=shares,
            understood=any(known.values()),
            abstained=report.abstained,
            leading=leading_diseases,
            present={self.concepts[c].name.lower() for c, present in known.items() if present},
            plain=lambda label: patient_words(self.differential.vocabulary, label),
            evidence=evidence,
        )
        return report, list(evidence.values())

    @cached_property
    def levels(self) -> np.ndarray:
        """Per disease of the model: the care a typical presentation needs (`Triage.levels`)."""
        return self.triage.levels(self.differential.model.diseases)

    @cached_property
    def dangerous(self) -> np.ndarray:
        """Per disease of the model: whether it is a diagnosis not to miss (`dangers.dangerous_diseases`)."""
        return dangerous_diseases(self.differential)
