"""The next steps for the leading diagnoses: the tests, drugs and care the knowledge recommends for each,
each citing its fact."""

from __future__ import annotations

from clinrag.consult.answer.report import DiagnosisOut, NextStep
from clinrag.consult.facts import cite_fact
from clinrag.consult.reason.differential import Differential
from clinrag.core.models import Evidence
from clinrag.graph.schema import Relation

STEP_DIAGNOSES = 3  # the leading diagnoses given next steps (and the knowledge base's statements)
STEP_KINDS = (
    ("test", Relation.RECOMMEND_TEST),
    ("drug", Relation.RECOMMEND_DRUG),
    ("care", Relation.RECOMMEND_CURE),
)


def next_steps(
    differential: Differential, diagnoses: list[DiagnosisOut], evidence: dict[str, Evidence]
) -> list[NextStep]:
    """Every test, drug and care the knowledge names for `diagnoses`, in that order per diagnosis."""
    steps = []
    model = differential.model
    for diagnosis in diagnoses:
        disease = model.by_name[diagnosis.name]
        for kind, relation in STEP_KINDS:
            items = {"test": disease.tests, "drug": disease.drugs, "care": disease.cures}[kind]
            steps += [
                NextStep(
                    diagnosis=disease.name,
                    kind=kind,
                    name=item,
                    evidence=cite_fact(model, differential.vocabulary, disease, relation, item, evidence),
                )
                for item in items
            ]
    return steps
