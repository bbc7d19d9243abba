"""The next questions: the findings whose answer would most reduce the uncertainty of the differential
(expected information gain: the entropy now minus the expected entropy after a yes or a no)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from clinrag.methods.consult.differential import Differential

CANDIDATE_DISEASES = 10  # questions come from the findings of the leading diseases


@dataclass(frozen=True)
class Question:
    concept: str  # concept id
    name: str  # the finding's name as the knowledge gives it
    gain: float  # expected information gain (nats)
    p_yes: float  # the probability of a yes under the current differential


def entropy(p: np.ndarray) -> float:
    nonzero = p[p > 0]
    return float(-(nonzero * np.log(nonzero)).sum())


def next_questions(
    differential: Differential,
    posterior: np.ndarray,
    asked: Collection[str],
    n: int = 3,
    candidate_diseases: int = CANDIDATE_DISEASES,
) -> list[Question]:
    """The `n` most informative askable findings (`Concept.askable`: a source declares its findings can be
    asked in a patient's words) not yet asked about, most informative first, among the findings of the
    `candidate_diseases` leading diseases."""
    leading = np.argsort(-posterior, kind="stable")[:candidate_diseases]
    candidates: dict[str, str] = {}
    for row in leading:
        for symptom in differential.model.diseases[row].symptoms:
            concept = differential.vocabulary.lookup(symptom)
            if concept is not None and concept.id not in asked and concept.askable:
                candidates.setdefault(concept.id, concept.name)
    questions = questions_about(differential, posterior, candidates)
    questions.sort(key=lambda q: (-q.gain, q.concept))
    return questions[:n]


def questions_about(
    differential: Differential, posterior: np.ndarray, findings: Mapping[str, str]
) -> list[Question]:
    """The question about each finding (concept id → name), with what its answer is expected to tell under
    `posterior`."""
    now = entropy(posterior)
    questions = []
    for concept, name in findings.items():
        p = differential.likelihood(concept)
        yes = posterior * p
        p_yes = float(yes.sum())
        no = posterior - yes
        expected = p_yes * entropy(yes / p_yes) + (1 - p_yes) * entropy(no / (1 - p_yes))
        questions.append(Question(concept, name, now - expected, p_yes))
    return questions
