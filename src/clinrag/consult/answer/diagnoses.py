"""A diagnosis of the differential as the report gives it: the reported findings its knowledge lists for or
against it (a symptom, or a risk factor it names), and its typical findings nobody has reported yet, each
cited to the fact of the knowledge."""

from __future__ import annotations

import numpy as np

from clinrag.consult.answer.report import DiagnosisOut
from clinrag.consult.facts import cite_fact, cite_risk_factor
from clinrag.consult.reason.differential import Differential
from clinrag.consult.understand.finding_names import symptom_name
from clinrag.consult.understand.finding_types import FindingStatus
from clinrag.core.models import Evidence
from clinrag.graph.schema import Relation

SHOWN_NOT_REPORTED = 3


def differential_out(
    differential: Differential,
    posterior: np.ndarray,
    order: np.ndarray,
    statuses: dict[str, FindingStatus],
    evidence: dict[str, Evidence],
) -> list[DiagnosisOut]:
    """The diagnoses of rows `order`, in that order (`statuses`: what was said of each concept)."""
    # what was said settles a listed finding, also a broader one ("cough" of a productive cough)
    present = [concept for concept, status in statuses.items() if status == "present"]
    settled = set(statuses) | differential.vocabulary.broader(present)
    return [
        diagnosis_out(differential, row, float(posterior[row]), statuses, settled, evidence) for row in order
    ]


def diagnosis_out(
    differential: Differential,
    row: int,
    probability: float,
    statuses: dict[str, FindingStatus],
    settled: set[str],
    evidence: dict[str, Evidence],
) -> DiagnosisOut:
    """A diagnosis with the reported findings its knowledge lists for or against it, and the typical
    findings nobody has said anything about (not even "don't know"), nor settled by what was said
    (`settled`: the concepts said and those a finding present implies)."""
    model, vocabulary = differential.model, differential.vocabulary
    disease = model.diseases[row]
    supporting, against, cited, mentioned = [], [], [], set()
    for concept, status in statuses.items():
        listed = differential.explained(concept, row)
        risk = differential.risk_factor(concept, row) if listed is None else None
        known_as = listed or risk  # the disease's symptom or risk factor the finding is
        if known_as is None or known_as in mentioned:  # "cough" and "barking cough" explained by one
            continue  # "Cough"
        mentioned.add(known_as)
        if status != "uncertain":
            named = supporting if status == "present" else against
            if (
                name := symptom_name(vocabulary, known_as)
            ) not in named:  # two sources' words for one finding
                named.append(name)
            cited.append(
                cite_fact(model, vocabulary, disease, Relation.HAS_SYMPTOM, listed, evidence)
                if listed is not None
                else cite_risk_factor(model, vocabulary, disease, known_as, evidence)
            )
    known = vocabulary.known
    unreported = [
        symptom
        for symptom in disease.symptoms
        if symptom not in mentioned and ((concept := known(symptom)) is None or concept.id not in settled)
    ][:SHOWN_NOT_REPORTED]
    cited += [
        cite_fact(model, vocabulary, disease, Relation.HAS_SYMPTOM, symptom, evidence)
        for symptom in unreported
    ]
    return DiagnosisOut(
        name=disease.name,
        probability=min(1.0, probability),
        icd10=disease.icd10,
        key=disease.key,
        synonyms=disease.synonyms,
        source=disease.source,
        supporting=supporting,
        against=against,
        not_reported=[symptom_name(vocabulary, symptom) for symptom in unreported],
        evidence=cited,
    )
