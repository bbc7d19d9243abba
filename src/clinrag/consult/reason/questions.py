"""The next questions: the findings whose answer would most reduce the uncertainty of the differential
(expected information gain: the entropy now minus the expected entropy after a yes or a no), with weight
given to those that would rule a dangerous diagnosis in or out (`danger_gain`)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from clinrag.consult.reason.differential import Differential, leading


@dataclass(frozen=True)
class Question:
    concept: str  # concept id
    name: str  # the finding's name as the knowledge gives it
    gain: float  # expected information gain (nats)
    p_yes: float  # the probability of a yes under the current differential
    danger: float = 0.0  # how much the answer is expected to settle the dangerous diagnoses (nats)

    def score(self, danger_weight: float) -> float:
        return self.gain + danger_weight * self.danger


def next_questions(
    differential: Differential,
    posterior: np.ndarray,
    asked: Collection[str],
    *,
    n: int,
    candidate_diseases: int,
    danger_weight: float,
    dangerous: Sequence[int] = (),
) -> list[Question]:
    """The `n` best askable findings (`Concept.askable`: a source declares its findings can be asked in a
    patient's words) not yet asked about, best first, among the findings of the `candidate_diseases` leading
    diseases and of the `dangerous` ones (rows of the dangerous diagnoses still in play). A question scores
    its information gain plus `danger_weight` times how much it would settle the dangerous diagnoses: a
    doctor asks first what rules out what must not be missed, not only what splits the likely ones."""
    candidates: dict[str, str] = {}
    for row in [*leading(posterior, candidate_diseases), *dangerous]:
        for symptom in differential.model.diseases[row].symptoms:
            concept = differential.vocabulary.known(symptom)
            if concept is not None and concept.id not in asked and concept.askable:
                candidates.setdefault(concept.id, concept.name)
    questions = questions_about(differential, posterior, candidates)
    if dangerous and danger_weight > 0:
        settled = danger_gain(differential, posterior, questions, np.asarray(dangerous, dtype=int))
        questions = [replace(q, danger=float(d)) for q, d in zip(questions, settled, strict=True)]
    questions.sort(key=lambda q: (-q.score(danger_weight), q.concept))
    return questions[:n]


def danger_gain(
    differential: Differential, posterior: np.ndarray, questions: Sequence[Question], dangerous: np.ndarray
) -> np.ndarray:
    """Per question: the expected fall, summed over the `dangerous` diseases (rows), of the uncertainty
    whether the patient has each one (the binary entropy of its probability), after a yes or a no."""
    prior = np.clip(posterior[dangerous], 0.0, 1.0)
    now = _binary_entropy(prior).sum()
    gains = np.zeros(len(questions))
    for i, question in enumerate(questions):
        likelihood = differential.likelihood(question.concept)[dangerous]
        p_yes = min(max(question.p_yes, 1e-12), 1.0 - 1e-12)
        after_yes = np.clip(prior * likelihood / p_yes, 0.0, 1.0)
        after_no = np.clip(prior * (1.0 - likelihood) / (1.0 - p_yes), 0.0, 1.0)
        expected = p_yes * _binary_entropy(after_yes).sum() + (1.0 - p_yes) * _binary_entropy(after_no).sum()
        gains[i] = now - expected
    return gains


def questions_about(
    differential: Differential, posterior: np.ndarray, findings: Mapping[str, str]
) -> list[Question]:
    """The question about each finding (concept id → name), with what its answer is expected to tell under
    `posterior`.

    A finding's likelihood is a leak for every disease but the few that explain it (`sparse_likelihood`):
    one for annotated spectra, one for plain lists. So each expected entropy is
    summed over those few, and over each group of the rest in closed form: with masses m = π·q (q the
    probability of the answer), Z·H(m/Z) = Z log Z − Σ m log m, and over a group where q is constant,
    Σ m log m = q log q · Σπ + q · Σ π log π."""
    if not findings:
        return []
    plogp = _xlogx(posterior)
    everywhere = float(plogp.sum())
    # every finding's explaining diseases one after another: the sums below are per finding (segment)
    sparse = [differential.sparse_likelihood(concept) for concept in findings]
    rows = np.concatenate([entry[0] for entry in sparse])
    p = np.concatenate([entry[1] for entry in sparse])
    leaks = np.array([entry[2] for entry in sparse]).reshape(-1, 2)  # per finding: (annotated, plain)
    sizes = np.array([len(entry[0]) for entry in sparse])
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def per_finding(values: np.ndarray) -> np.ndarray:
        # one 0 appended: a last finding explained by none starts past the end
        sums = np.add.reduceat(np.append(values, 0.0), starts)
        return np.where(sizes > 0, sums, 0.0)  # reduceat gives an empty segment its next element

    prior, prior_plogp = posterior[rows], plogp[rows]
    # the rest of each group: (its mass, its Σ π log π, its P(yes)), per finding
    rest = []
    for group, yes in ((differential.annotated, leaks[:, 0]), (~differential.annotated, leaks[:, 1])):
        inside = group[rows]
        mass = np.maximum(float(posterior[group].sum()) - per_finding(prior * inside), 0.0)
        rest.append((mass, float(plogp[group].sum()) - per_finding(prior_plogp * inside), yes))
    expected = np.zeros(len(sizes))
    # 0 < p < 1 (the leak and 1 − leak bound it): m log m = q · π log π + π · q log q, no zero to mind
    for answer, log_answer, yes_answer in ((p, np.log(p), True), (1.0 - p, np.log1p(-p), False)):
        total = per_finding(prior * answer)
        mlogm = per_finding(answer * prior_plogp + prior * answer * log_answer)
        for mass, mass_plogp, yes in rest:
            other = yes if yes_answer else 1.0 - yes
            total = total + other * mass
            mlogm = mlogm + _xlogx(np.asarray(other)) * mass + other * mass_plogp
        expected += _xlogx(total) - mlogm
    p_yes = per_finding(prior * p) + sum(yes * mass for mass, _, yes in rest)
    return [
        Question(concept, name, float(-everywhere - gain), float(yes))
        for (concept, name), gain, yes in zip(findings.items(), expected, p_yes, strict=True)
    ]


def _binary_entropy(p: np.ndarray) -> np.ndarray:
    return -_xlogx(p) - _xlogx(1.0 - p)


def _xlogx(x: np.ndarray) -> np.ndarray:
    """x log x, 0 at 0."""
    return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)
