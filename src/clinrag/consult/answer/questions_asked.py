"""The next questions as the report asks them: chosen by `reason.questions` (what a finding present implies
is not asked; the dangerous diagnoses in play weigh), named in a patient's words, each citing the facts of the
leading diagnoses that make it informative."""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from clinrag.consult.answer.report import QuestionOut
from clinrag.consult.facts import cite_fact
from clinrag.consult.reason.dangers import in_play
from clinrag.consult.reason.differential import Differential, leading
from clinrag.consult.reason.questions import Question, next_questions, questions_about
from clinrag.consult.settings import ConsultantSettings
from clinrag.consult.understand.finding_names import asked_name
from clinrag.consult.understand.finding_types import FindingStatus
from clinrag.consult.understand.vocabulary import Concept
from clinrag.core.models import Evidence
from clinrag.graph.schema import Relation


def asked_questions(
    differential: Differential,
    concepts: dict[str, Concept],
    settings: ConsultantSettings,
    dangerous: np.ndarray,
    posterior: np.ndarray,
    asked: Collection[str],
    statuses: dict[str, FindingStatus],
    evidence: dict[str, Evidence],
    cited_diagnoses: int,
) -> list[QuestionOut]:
    """The `settings.questions` next questions, none about a concept `asked` already."""
    # what a finding present implies is not asked ("cough?" of a barking cough)
    present = [concept for concept, status in statuses.items() if status == "present"]
    asked = {*asked, *differential.vocabulary.broader(present)}
    questions = next_questions(
        differential,
        posterior,
        asked,
        n=settings.questions,
        candidate_diseases=settings.candidate_diseases,
        dangerous=in_play(dangerous, posterior, settings.cant_miss_above).tolist(),
        danger_weight=settings.danger_weight,
    )
    return question_outs(differential, concepts, questions, posterior, evidence, cited_diagnoses)


def asked_back(
    differential: Differential,
    concepts: dict[str, Concept],
    settings: ConsultantSettings,
    prior: np.ndarray,
    contradicted: dict[str, str],
    evidence: dict[str, Evidence],
) -> list[QuestionOut]:
    """Before any finding the patient has is understood: the questions about what the text both states and
    denies (`contradicted`: concept id → name), with no differential yet, so no disease's facts cited."""
    questions = questions_about(differential, prior, contradicted)
    return question_outs(differential, concepts, questions[: settings.questions], prior, evidence, 0)


def question_outs(
    differential: Differential,
    concepts: dict[str, Concept],
    questions: list[Question],
    posterior: np.ndarray,
    evidence: dict[str, Evidence],
    cited_diagnoses: int,
) -> list[QuestionOut]:
    """The questions in words, each citing the facts of the leading diagnoses that make it informative."""
    chosen = []
    leading_rows = leading(posterior, cited_diagnoses)
    model, vocabulary = differential.model, differential.vocabulary
    for question in questions:
        concept = concepts[question.concept]
        cited = [
            cite_fact(model, vocabulary, model.diseases[row], Relation.HAS_SYMPTOM, listed, evidence)
            for row in leading_rows
            if (listed := differential.explained(question.concept, row)) is not None
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
