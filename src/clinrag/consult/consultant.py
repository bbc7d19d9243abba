"""The grounded consultation, from structure: findings understood from the text → a differential with
probabilities from the disease knowledge (and similar past patients, when a patient base is given) → the next
most informative questions → tests, drugs and care for the leading diagnoses → an answer composed from all of
it, every sentence citing its evidence. `Consultant` holds the knowledge; a `ConsultState` is one patient's
consultation, which answers to questions extend (the interactive session)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np

from clinrag.conditions.catalogue import packaged_catalogue
from clinrag.conditions.records import how_often
from clinrag.consult.answer.report import (
    ConsultationReport,
    DangerOut,
    DiagnosisOut,
    FindingOut,
    NextStep,
    QuestionOut,
    RedFlagOut,
)
from clinrag.consult.answer.statements import statements_about
from clinrag.consult.clinical import Urgency, cite_table
from clinrag.consult.diseases import Disease
from clinrag.consult.reason.differential import Differential, leading
from clinrag.consult.reason.option_ranking import OptionNames, RankedOption
from clinrag.consult.reason.questions import Question, next_questions, questions_about
from clinrag.consult.reason.triage import Triage
from clinrag.consult.settings import ConsultantSettings
from clinrag.consult.understand.findings import (
    Contradiction,
    Finding,
    FindingExtractor,
    Findings,
    FindingStatus,
)
from clinrag.consult.understand.vocabulary import Concept, reachable
from clinrag.core.models import Evidence, Language
from clinrag.core.provenance import Origin
from clinrag.graph.importers.ddxplus_findings import is_question
from clinrag.graph.schema import Relation
from clinrag.terms.hpo import ONSET_CLASSES, onset_ages

if TYPE_CHECKING:  # a knowledge base is built by the caller; importing it loads the indexes
    from clinrag.knowledge.base import KnowledgeBase

SHOWN_NOT_REPORTED = 3
SEVERE = 2  # a source's severity (1: most severe … 5: least, as DDXPlus rates) that makes one dangerous
SHOWN_RULE_OUT = 3  # the knowledge's tests named for ruling a dangerous diagnosis in or out
STEP_DIAGNOSES = 3
STEP_KINDS = (
    ("test", Relation.RECOMMEND_TEST),
    ("drug", Relation.RECOMMEND_DRUG),
    ("care", Relation.RECOMMEND_CURE),
)


@dataclass
class ConsultState:
    """What is known of one patient: the findings understood from the text and the answers given since."""

    findings: Findings
    answered: list[tuple[str, FindingStatus]] = field(default_factory=list)  # (concept id, answer)
    exclude: frozenset[Origin] = frozenset()  # the records a statement must not come from (the case's own)
    # The patient gave an account in words: what it leaves unsaid counts a little (see `differential`); a
    # record of codes says nothing of what it leaves out.
    spoken: bool = True

    def statuses(self) -> dict[str, tuple[FindingStatus, str]]:
        """Concept id → (status, the words it was said in); the latest word on a concept wins."""
        said = {f.concept_id: (f.status, f.text) for f in self.findings.findings}
        return said | {concept: (status, "") for concept, status in self.answered}

    def contradictions(self) -> dict[str, Contradiction]:
        """Concept id → how the text both states and denies it, while no answer has settled it."""
        answered = {concept for concept, _ in self.answered}
        return {
            f.concept_id: f.contradiction
            for f in self.findings.findings
            if f.contradiction is not None and f.concept_id not in answered
        }

    def known(self) -> dict[str, bool]:
        """Concept id → present / absent (uncertain findings are left out)."""
        return {c: status == "present" for c, (status, _) in self.statuses().items() if status != "uncertain"}


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

    def patients(self) -> int | None:
        """How many past patients the differential draws on (None without a patient base)."""
        experience = self.differential.experience
        return int(experience.patients.sum()) if experience is not None else None

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
            findings = self._with_codes(findings, present, absent)
        return ConsultState(findings, exclude=exclude, spoken=bool(text.strip()))

    def _with_codes(self, findings: Findings, present: Sequence[str], absent: Sequence[str]) -> Findings:
        coded: dict[str, Finding] = {}
        unknown = []
        onsets = [code for code in present if code in ONSET_CLASSES]  # when the illness began
        for status, codes in (("absent", absent), ("present", present)):  # a code given both ways: present
            for code in codes:
                if code in onsets:
                    continue
                concept = self.differential.vocabulary.by_code(code)
                if concept is None:
                    unknown.append(code)
                    continue
                coded[concept.id] = Finding(
                    concept_id=concept.id,
                    concept=concept.name,
                    ids=list(concept.ids),
                    status=status,  # type: ignore[arg-type]
                    text=code,
                    start=0,
                    end=0,
                )
        said = [f for f in findings.findings if f.concept_id not in coded]  # the codes say it exactly
        return findings.model_copy(
            update={
                "findings": [*coded.values(), *said],
                "not_understood": [*findings.not_understood, *dict.fromkeys(unknown)],
                "onset_classes": list(dict.fromkeys([*findings.onset_classes, *onsets])),
            }
        )

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
        findings = [
            self._finding(self.concepts[concept], status, text, contradicted.get(concept), evidence)
            for concept, (status, text) in said.items()
        ]
        extracted = state.findings
        report = ConsultationReport(
            findings=findings,
            age=extracted.age,
            sex=extracted.sex,
            duration_days=extracted.duration.days if extracted.duration else None,
            duration_written=extracted.duration.text if extracted.duration else None,
            onset=extracted.onset.text if extracted.onset else None,
            onset_class=", ".join(ONSET_CLASSES[code].label for code in extracted.onset_classes) or None,
            subject=extracted.subject,
            not_understood=list(extracted.not_understood),
            patients=self.patients(),
        )
        known = state.known()
        shares, leading_diseases = None, []
        if not any(known.values()):
            report.abstained = True
            report.abstention_reason = "no finding the patient has was understood"
            # what the text both states and denies may be all there is to go on: ask it back
            prior = self.posterior(state)
            asked_back = questions_about(
                self.differential, prior, {concept: self.concepts[concept].name for concept in contradicted}
            )
            # no differential yet, so no disease's facts to cite for them
            report.questions = self._question_outs(asked_back[: self.settings.questions], prior, evidence, 0)
        else:
            posterior = self.posterior(state)
            order = leading(posterior, self.settings.diagnoses)
            statuses = {concept: status for concept, (status, _) in said.items()}
            # what was said settles a listed finding, also a broader one ("cough" of a productive cough)
            present = [concept for concept, status in statuses.items() if status == "present"]
            settled = set(statuses) | self.differential.vocabulary.broader(present)
            report.differential = [
                self._diagnosis(row, float(posterior[row]), statuses, settled, evidence) for row in order
            ]
            for diagnosis in report.differential[:STEP_DIAGNOSES]:
                diagnosis.statements = self._statements(diagnosis, state.exclude, evidence)
            # what the text says both ways is asked again; what was answered, or said once, is not
            report.questions = self._questions(posterior, said.keys() - contradicted, statuses, evidence)
            report.next_steps = self._steps(report.differential[:STEP_DIAGNOSES], evidence)
            report.dangers = self._dangers(posterior, evidence)
            shares = self.triage.shares(posterior, self.levels)
            leading_diseases = [self.differential.model.diseases[row] for row in order[:STEP_DIAGNOSES]]
            top = report.differential[0].probability
            if top < self.settings.abstain_below:
                report.abstained = True
                report.abstention_reason = (
                    f"the most likely diagnosis has {top:.0%}, below {self.settings.abstain_below:.0%}"
                )
        report.red_flags = self._red_flags(known, extracted.age, extracted.self_told, evidence)
        report.triage = self.triage.decide(
            crises=extracted.crises,
            red_flags=[(flag.urgency, flag.finding, flag.evidence) for flag in report.red_flags],
            shares=shares,
            understood=any(known.values()),
            abstained=report.abstained,
            leading=leading_diseases,
            present={self.concepts[c].name.lower() for c, present in known.items() if present},
            plain=self._plain_finding,
            evidence=evidence,
        )
        return report, list(evidence.values())

    def _plain_finding(self, label: str) -> str:
        """A finding named by the knowledge (an HPO label) in the words a patient uses, where it has them."""
        concept = self.differential.vocabulary.first_known((label,))
        return asked_name(concept) if concept is not None else label.lower()

    @cached_property
    def levels(self) -> np.ndarray:
        """Per disease of the model: the care a typical presentation needs (`Triage.levels`)."""
        return self.triage.levels(self.differential.model.diseases)

    @cached_property
    def dangerous(self) -> np.ndarray:
        """Per disease of the model: whether it is a diagnosis not to miss (the can't-miss table names it, or
        its source rates it severe)."""
        tables = self.differential.clinical
        return np.array(
            [
                tables.danger_of(disease) is not None
                or (disease.severity is not None and disease.severity <= SEVERE)
                for disease in self.differential.model.diseases
            ],
            dtype=bool,
        )

    def _dangers(self, posterior: np.ndarray, evidence: dict[str, Evidence]) -> list[DangerOut]:
        """The dangerous diagnoses at `cant_miss_above` or more, most probable first: those the can't-miss
        table names (by ICD-10 code), and those whose source rates them severe (DDXPlus severity 1 or 2)."""
        model, tables = self.differential.model, self.differential.clinical
        dangers = []
        for row in np.flatnonzero(self.dangerous & (posterior >= self.settings.cant_miss_above)):
            disease = model.diseases[row]
            danger = tables.danger_of(disease)
            if danger is not None:
                cited = cite_table(
                    evidence,
                    f"clinical:cant_miss:{danger.icd10}:{danger.name}",
                    f"{danger.name}: a diagnosis not to miss ({danger.urgency}); "
                    f"ruled in or out by {', '.join(danger.rule_out)}",
                    "cant_miss",
                    title=danger.source,
                    icd10=danger.icd10,
                )
                urgency: Urgency = danger.urgency
                rule_out, cites = list(danger.rule_out), [cited]
            else:  # rated severe by its source
                urgency = "emergency" if disease.severity == 1 else "urgent"
                rule_out = disease.tests[:SHOWN_RULE_OUT]
                cites = [self._severity(disease, evidence)]
                cites += [self._fact(disease, Relation.RECOMMEND_TEST, test, evidence) for test in rule_out]
            dangers.append(
                DangerOut(
                    name=disease.name,
                    probability=min(1.0, float(posterior[row])),
                    urgency=urgency,
                    rule_out=rule_out,
                    evidence=cites,
                )
            )
        return sorted(dangers, key=lambda d: -d.probability)

    def _risk_factor(self, disease: Disease, risk: str, evidence: dict[str, Evidence]) -> str:
        """The knowledge's fact that `risk` makes `disease` likelier, as evidence (a record's attribute, as
        severity is, not a graph edge)."""
        cited = f"graph:{disease.name}|risk factor|{risk}"
        model = self.differential.model
        source = model.risk_source(disease) or disease.source  # of two sources, the one naming risk factors
        provenance = {
            "head": disease.name,
            "relation": "risk factor",
            "tail": risk,
            "title": model.traits[source].title,
        }
        if source == disease.source:
            provenance["key"] = disease.key
        evidence.setdefault(
            cited,
            Evidence(
                id=cited,
                kind="graph_fact",
                text=f"{disease.name} has risk factor {self._name(risk)}",
                source=f"graph:{source}",
                provenance=provenance,
            ),
        )
        return cited

    def _severity(self, disease: Disease, evidence: dict[str, Evidence]) -> str:
        cited = f"graph:{disease.name}|severity"
        traits = self.differential.model.traits.get(disease.source)
        evidence.setdefault(
            cited,
            Evidence(
                id=cited,
                kind="graph_fact",
                text=f"{disease.name} has severity {disease.severity} (1: most severe, 5: least)",
                source=f"graph:{disease.source}",
                provenance={"key": disease.key, "title": traits.title if traits else disease.source},
            ),
        )
        return cited

    def _red_flags(
        self, known: dict[str, bool], age: float | None, self_told: bool, evidence: dict[str, Evidence]
    ) -> list[RedFlagOut]:
        """The red-flag findings among those present (a narrower finding raises its broader one's flag)."""
        parents = self.differential.vocabulary.parents
        reached: dict[str, str] = {}  # an HPO code reached → the present concept that reaches it
        for concept, present in known.items():
            for above in reachable(concept, parents) if present else ():
                for code in self.concepts[above].codes if above in self.concepts else ():
                    reached.setdefault(code, concept)
        flags = []
        for flag in self.differential.clinical.flags_raised(set(reached), age, self_told):
            concept = reached[flag.hpo]
            cited = cite_table(
                evidence,
                f"clinical:red_flag:{flag.hpo}",
                f"{flag.label}: a red flag ({flag.why}; {flag.urgency})",
                "red_flags",
                title=flag.source,
                hpo=flag.hpo,
            )
            flags.append(
                RedFlagOut(
                    concept=concept,
                    finding=display_name(self.concepts[concept]),
                    why=flag.why,
                    urgency=flag.urgency,
                    evidence=[f"finding:{concept}", cited],
                )
            )
        return flags

    def _finding(
        self,
        concept: Concept,
        status: FindingStatus,
        text: str,
        contradiction: Contradiction | None,
        evidence: dict[str, Evidence],
    ) -> FindingOut:
        said = f" (“{text}”)" if text else " (answered)"
        if contradiction is not None:
            said = f" (stated: {_quoted(contradiction.stated)}; denied: {_quoted(contradiction.denied)})"
        item = Evidence(
            id=f"finding:{concept.id}",
            kind="term",
            text=f"{display_name(concept)}: {status}{said}",
            source="patient",
            provenance={
                "concept": concept.id,
                "status": status,
                "text": text,
                "ids": list(concept.ids),
                **({"contradiction": contradiction.model_dump()} if contradiction is not None else {}),
            },
        )
        evidence[item.id] = item
        return FindingOut(
            concept=concept.id,
            name=display_name(concept),
            status=status,
            text=text,
            evidence=item.id,
            contradiction=contradiction,
        )

    def _diagnosis(
        self,
        row: int,
        probability: float,
        statuses: dict[str, FindingStatus],
        settled: set[str],
        evidence: dict[str, Evidence],
    ) -> DiagnosisOut:
        """A diagnosis with the reported findings its knowledge lists for or against it, and the typical
        findings nobody has said anything about (not even "don't know"), nor settled by what was said
        (`settled`: the concepts said and those a finding present implies)."""
        disease = self.differential.model.diseases[row]
        supporting, against, cited, mentioned = [], [], [], set()
        for concept, status in statuses.items():
            listed = self.differential.explained(concept, row)
            risk = self.differential.risk_factor(concept, row) if listed is None else None
            known_as = listed or risk  # the disease's symptom or risk factor the finding is
            if known_as is None or known_as in mentioned:  # "cough" and "barking cough" explained by one
                continue  # "Cough"
            mentioned.add(known_as)
            if status != "uncertain":
                named = supporting if status == "present" else against
                if (name := self._name(known_as)) not in named:  # two sources' words for one finding
                    named.append(name)
                cited.append(
                    self._fact(disease, Relation.HAS_SYMPTOM, listed, evidence)
                    if listed is not None
                    else self._risk_factor(disease, known_as, evidence)
                )
        known = self.differential.vocabulary.known
        unreported = [
            symptom
            for symptom in disease.symptoms
            if symptom not in mentioned and ((concept := known(symptom)) is None or concept.id not in settled)
        ][:SHOWN_NOT_REPORTED]
        cited += [self._fact(disease, Relation.HAS_SYMPTOM, symptom, evidence) for symptom in unreported]
        return DiagnosisOut(
            name=disease.name,
            probability=min(1.0, probability),
            icd10=disease.icd10,
            key=disease.key,
            synonyms=disease.synonyms,
            source=disease.source,
            supporting=supporting,
            against=against,
            not_reported=[self._name(symptom) for symptom in unreported],
            evidence=cited,
        )

    def _name(self, symptom: str) -> str:
        """A symptom of the knowledge in plain words (one named by a question: its finding's name)."""
        concept = self.differential.vocabulary.known(symptom) if is_question(symptom) else None
        return display_name(concept) if concept is not None else plain(symptom)

    def _statements(
        self, diagnosis: DiagnosisOut, exclude: frozenset[Origin], evidence: dict[str, Evidence]
    ) -> list[str]:
        if self.kb is None:
            return []
        found = statements_about(self.kb, diagnosis.name, diagnosis.supporting, exclude)
        evidence.update((item.id, item) for item in found)
        return [item.id for item in found]

    def _questions(
        self,
        posterior: np.ndarray,
        asked: Collection[str],
        statuses: dict[str, FindingStatus],
        evidence: dict[str, Evidence],
    ) -> list[QuestionOut]:
        in_play = np.flatnonzero(self.dangerous & (posterior >= self.settings.cant_miss_above))
        # what a finding present implies is not asked ("cough?" of a barking cough)
        present = [concept for concept, status in statuses.items() if status == "present"]
        asked = {*asked, *self.differential.vocabulary.broader(present)}
        questions = next_questions(
            self.differential,
            posterior,
            asked,
            n=self.settings.questions,
            candidate_diseases=self.settings.candidate_diseases,
            dangerous=in_play.tolist(),
            danger_weight=self.settings.danger_weight,
        )
        return self._question_outs(questions, posterior, evidence)

    def _question_outs(
        self,
        questions: list[Question],
        posterior: np.ndarray,
        evidence: dict[str, Evidence],
        cited_diagnoses: int = STEP_DIAGNOSES,
    ) -> list[QuestionOut]:
        """The questions in words, each citing the facts of the leading diagnoses that make it informative."""
        chosen = []
        leading_rows = leading(posterior, cited_diagnoses)
        for question in questions:
            concept = self.concepts[question.concept]
            cited = [
                self._fact(self.differential.model.diseases[row], Relation.HAS_SYMPTOM, listed, evidence)
                for row in leading_rows
                if (listed := self.differential.explained(question.concept, row)) is not None
            ]
            chosen.append(
                QuestionOut(
                    concept=question.concept,
                    finding=asked_name(concept),
                    asked=concept.question,
                    gain=round(question.gain, 4),
                    evidence=cited,
                )
            )
        return chosen

    def _steps(self, diagnoses: list[DiagnosisOut], evidence: dict[str, Evidence]) -> list[NextStep]:
        steps = []
        by_name = self.differential.model.by_name
        for diagnosis in diagnoses:
            disease = by_name[diagnosis.name]
            for kind, relation in STEP_KINDS:
                items = {"test": disease.tests, "drug": disease.drugs, "care": disease.cures}[kind]
                steps += [
                    NextStep(
                        diagnosis=disease.name,
                        kind=kind,
                        name=item,
                        evidence=self._fact(disease, relation, item, evidence),
                    )
                    for item in items
                ]
        return steps

    def _fact(self, disease: Disease, relation: Relation, target: str, evidence: dict[str, Evidence]) -> str:
        """The graph fact `(disease)-[relation]->(target)` as evidence; its provenance names the source for a
        reader (`SourceTraits.title`)."""
        fact_id = disease.fact_id(relation, target)
        if fact_id not in evidence:
            symptom = relation is Relation.HAS_SYMPTOM and target in disease.symptoms
            place = disease.symptoms.index(target) if symptom else -1
            # a disease named in two sources: the symptom is cited to the source that lists it
            source = disease.origins[place] if symptom else disease.source
            named = self._name(target) if symptom else target
            text = f"{disease.name} {relation.lower().replace('_', ' ')} {named}"
            provenance = {"head": disease.name, "relation": str(relation), "tail": target}
            if source == disease.source:
                provenance["key"] = disease.key
            traits = self.differential.model.traits.get(source)
            if traits is not None and traits.title:
                provenance["title"] = traits.title
            cited = disease.references[place] if symptom else disease.cited.get(f"{relation}|{target}", "")
            references = [ref for ref in cited.split(";") if ref]
            if symptom and (share := disease.frequencies[place]) is not None:
                text += f" ({how_often(share)} people with it)"
                provenance["frequency"] = share
            documents = packaged_catalogue().documents(references)
            if documents:  # the knowledge base's documents: named, with where to read them
                fields = {"issuer", "title", "year", "url"}
                provenance["documents"] = [d.model_dump(include=fields) for d in documents]
                provenance["title"] = "; ".join(f"{d.citation()} {d.url}" for d in documents)
            elif references:  # the publications and records that state it, for the reader to open
                text += f"; stated in {', '.join(references)}"
                provenance["references"] = references
            evidence[fact_id] = Evidence(
                id=fact_id,
                kind="graph_fact",
                text=text,
                source=f"graph:{source}",
                provenance=provenance,
            )
        return fact_id


def asked_name(concept: Concept) -> str:
    """The finding as a question names it for a patient: the disease table's lay name, else the name its
    source gives laypeople (HPO's "Sore throat" for Pharyngalgia), else its display name."""
    lay = concept.plain or concept.layperson
    return plain(lay) if lay else display_name(concept)


def display_name(concept: Concept) -> str:
    """The finding in plain words: the name a plain symptom list gives it (the disease table's lay name) when
    it has one, else its first phrase when it is named by a question (DDXPlus), else its name."""
    lay = concept.plain
    if lay is None and concept.name == concept.question and concept.synonyms:
        lay = concept.synonyms[0]
    return plain(lay or concept.name)


def _quoted(sentences: list[str]) -> str:
    return ", ".join(f"“{sentence}”" for sentence in sentences)


def plain(name: str) -> str:
    """A name as it reads inside a sentence: lower case, acronyms kept ("Shortness of Breath" → "shortness of
    breath", "COPD" stays)."""
    return " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in name.split())
