"""The next questions: the findings whose answer would most reduce the uncertainty of the differential
(expected information gain: the entropy now minus the expected entropy after a yes or a no)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

import numpy as np

from clinrag.methods.consult.differential import Differential, leading

CANDIDATE_DISEASES = 10  # questions come from the findings of the leading diseases


@dataclass(frozen=True)
class Question:
    concept: str  # concept id
    name: str  # the finding's name as the knowledge gives it
    gain: float  # expected information gain (nats)
    p_yes: float  # the probability of a yes under the current differential


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
    candidates: dict[str, str] = {}
    for row in leading(posterior, candidate_diseases):
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
    `posterior`.

    A finding's likelihood is the leak for every disease but the few that explain it (`sparse_likelihood`),
    so each expected entropy is summed over those few, the rest in closed form: with masses m = π·q (q the
    probability of the answer), Z·H(m/Z) = Z log Z − Σ m log m, and over the rest, where q is constant,
    Σ m log m = q log q · Σπ + q · Σ π log π."""
    plogp = _xlogx(posterior)
    everywhere = float(plogp.sum())
    questions = []
    for concept, name in findings.items():
        rows, p, elsewhere = differential.sparse_likelihood(concept)
        prior = posterior[rows]
        rest = max(1.0 - float(prior.sum()), 0.0)
        rest_plogp = everywhere - float(plogp[rows].sum())
        expected = 0.0
        for answer, other in ((p, elsewhere), (1.0 - p, 1.0 - elsewhere)):
            mass = prior * answer
            total = float(mass.sum()) + other * rest
            mlogm = float(_xlogx(mass).sum()) + float(_xlogx(np.float64(other))) * rest + other * rest_plogp
            expected += float(_xlogx(np.float64(total))) - mlogm
        p_yes = float((prior * p).sum()) + elsewhere * rest
        questions.append(Question(concept, name, -everywhere - expected, p_yes))
    return questions


def _xlogx(x: np.ndarray) -> np.ndarray:
    """x log x, 0 at 0."""
    return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)
