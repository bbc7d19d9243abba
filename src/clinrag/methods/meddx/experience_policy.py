"""Experience-driven questioning (beyond MEDDxAgent): choose the next question by expected information gain
over the diagnoses of the past patients who resemble the current one, and update from the answer.

Every past patient p, with diagnosis d, carries a weight: how likely it is to have produced the answers heard
so far. An answer g to evidence e (absent, or present with its coded value set) multiplies w_p by

    (1 if p answered e with g else `mismatch`) × P(g | d, e)

The first factor is a soft nearest-neighbour kernel (one disagreement does not exclude a patient). The second
is a naive-Bayes likelihood of the diagnosis, decomposed so that a value set nobody gave still counts:

    P(absent | d) = 1 − π_e(d),   P(present with S | d) = π_e(d) × Π_v (θ_ev(d) if v ∈ S else 1 − θ_ev(d))

over the values v of e seen in the base, with π_e(d) the share of d's patients who have e and θ_ev(d) the
share of those who have it with value v, both estimated with `smoothing` pseudo-patients at the base-wide
share (an m-estimate), so that an answer nobody with d gave, but others did, makes d unlikely, not
impossible. Before any answer, past patients of the other sex weigh `other_sex`. The distribution over
diagnoses is the weight summed by diagnosis. The next question is the one whose answer leaves, in
expectation under the current weights, the lowest entropy of that distribution."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.patients.loaders import EvidenceDecoder
from clinrag.patients.record import PatientRecord

ABSENT = 0  # the signature id of "the patient does not have this evidence"
AGE_BINS = (1, 5, 15, 30, 45, 60, 75)  # upper bounds (years) of the age groups the prior distinguishes


@dataclass(frozen=True)
class QuestionChoice:
    evidence: str
    expected_entropy: float


class ExperienceModel:
    """The patient base as a matrix of answers (patients × evidences) with each patient's diagnosis."""

    def __init__(
        self,
        records: Sequence[PatientRecord],
        labels: dict[str, list[str]],
        *,
        field: str = "evidence",
        mismatch: float = 0.3,
        smoothing: float = 0.03,
        other_sex: float = 0.2,
        min_patients: int = 1,
    ) -> None:
        for name, value in (("mismatch", mismatch), ("other_sex", other_sex)):
            if not 0 < value <= 1:
                raise InvalidInputError(f"{name} must be in (0, 1], got {value}")
        if smoothing <= 0:
            raise InvalidInputError(f"smoothing must be positive, got {smoothing}")
        kept = [r for r in records if labels.get(r.id) and r.codes.get(field)]
        if not kept:
            raise InvalidInputError(
                f"experience-driven questioning needs past patients with a label and coded {field!r} findings"
            )
        answers = [EvidenceDecoder.values_by_evidence(r.codes[field]) for r in kept]
        held = Counter(name for profile in answers for name in profile)  # by how many past patients
        self.evidences = sorted(name for name, count in held.items() if count >= min_patients)
        answers = [{n: v for n, v in profile.items() if held[n] >= min_patients} for profile in answers]
        self._column = {name: i for i, name in enumerate(self.evidences)}
        # Per evidence: value set → signature id (0 is "absent").
        self._signatures: list[dict[frozenset[str] | None, int]] = [{None: ABSENT} for _ in self.evidences]
        self.answers = np.zeros((len(kept), len(self.evidences)), dtype=np.int64)
        for row, profile in enumerate(answers):
            for name, values in profile.items():
                column = self._column[name]
                ids = self._signatures[column]
                self.answers[row, column] = ids.setdefault(values, len(ids))
        self.diagnoses = sorted({labels[r.id][0] for r in kept})
        index = {label: i for i, label in enumerate(self.diagnoses)}
        self.diagnosis = np.array([index[labels[r.id][0]] for r in kept])
        self.records = kept
        self._sex = np.array([str(r.metadata.get("sex", "")).upper()[:1] for r in kept])
        self._age = np.array([_age_group(r.metadata.get("age")) for r in kept])
        self.mismatch, self.smoothing, self.other_sex = mismatch, smoothing, other_sex
        self._onehot = np.eye(len(self.diagnoses))[self.diagnosis]  # patients × diagnoses
        size = self._onehot.sum(axis=0)
        present = self.answers != ABSENT
        # pi[e, d] = P(e present | d); per evidence, its values and theta[v, d] = P(v | d, e present).
        self._pi = self._smoothed(present.T @ self._onehot, size, present.mean(axis=0))
        self._values = [
            self._value_shares(column, present[:, column]) for column in range(len(self.evidences))
        ]
        # Every (evidence, answer) pair gets a global id t; likelihood[t, d] = P(answer | d).
        widths = np.array([len(ids) for ids in self._signatures])
        self._offset = np.concatenate([[0], np.cumsum(widths)[:-1]])
        self._evidence_of = np.repeat(np.arange(len(self.evidences)), widths)
        self._pair = self._offset + self.answers  # patients × evidences → global answer id
        self._likelihood = np.concatenate(
            [self._answer_likelihood(column, list(ids)) for column, ids in enumerate(self._signatures)]
        )
        groups = np.eye(len(AGE_BINS) + 2)[self._age]  # patients × age groups
        self._age_likelihood = self._smoothed(groups.T @ self._onehot, size, groups.mean(axis=0))
        # Constant parts of the expected-entropy computation (see next_question).
        self._own = self._likelihood[self._pair, self.diagnosis[:, None]]  # patients × evidences
        total = np.zeros((len(self.evidences), len(self.diagnoses)))
        np.add.at(total, self._evidence_of, self._likelihood)
        self._normaliser = mismatch * total[:, self.diagnosis].T + (1 - mismatch) * self._own

    def prior(self, sex: str | None, age: float | None = None) -> np.ndarray:
        """Weights before any answer: patients of the other sex down-weighted (sex-specific diagnoses) and,
        given an age, each patient weighted by how common that age group is for its diagnosis."""
        weights = np.ones(len(self.records))
        if sex:
            weights[self._sex != sex.upper()[:1]] = self.other_sex
        if age is not None:
            by_age = self._age_likelihood[_age_group(age)]
            if by_age.any():  # an age group no past patient is in says nothing
                weights = weights * by_age[self.diagnosis]
        return weights / weights.sum()

    def signature(self, evidence: str, present: bool, values: frozenset[str]) -> int | None:
        """The signature id of an answer; None for an evidence or value set no past patient has."""
        column = self._column.get(evidence)
        if column is None:
            return None
        return self._signatures[column].get(values if present else None)

    def update(self, weights: np.ndarray, evidence: str, present: bool, values: frozenset[str]) -> np.ndarray:
        """The weights after hearing the answer. An evidence no past patient has carries no information; a
        value set none gave weighs by its likelihood alone (the kernel disagrees with everyone alike)."""
        column = self._column.get(evidence)
        if column is None:
            return weights
        signature = self.signature(evidence, present, values)
        if signature is None:
            answer = values if present else None
            updated = weights * self._answer_likelihood(column, [answer])[0, self.diagnosis]
        else:
            same = np.where(self.answers[:, column] == signature, 1.0, self.mismatch)
            updated = weights * same * self._likelihood[self._offset[column] + signature, self.diagnosis]
        total = updated.sum()
        if total <= 0:  # an answer the base deems impossible for every diagnosis: nothing to learn from it
            return weights
        return updated / total  # rescaled: thirty small factors stay representable

    def distribution(self, weights: np.ndarray) -> dict[str, float]:
        """Diagnosis → probability, most probable first."""
        mass = np.bincount(self.diagnosis, weights=weights, minlength=len(self.diagnoses))
        total = mass.sum()
        if total <= 0:
            return {}
        order = np.argsort(-mass, kind="stable")
        return {self.diagnoses[i]: float(mass[i] / total) for i in order}

    def next_question(self, weights: np.ndarray, asked: set[str]) -> QuestionChoice | None:
        """The unasked evidence with the lowest expected posterior entropy over diagnoses (None when all
        have been asked)."""
        open_columns = np.array([e not in asked for e in self.evidences])
        if not open_columns.any():
            return None
        # Patient p predicts answer g to evidence e with probability kernel(p, g) × likelihood[g, d_p] / Z_pe;
        # summed by diagnosis, joint[t, d] = likelihood[t, d] × (mismatch × Σ_p∈d v + (1 − mismatch) ×
        # Σ_p∈d answered t v), with v = w_p / Z_pe, for every (evidence, answer) pair t at once.
        # Patients below 1e-12 of the heaviest cannot move the choice; leaving them out saves most work.
        alive = np.flatnonzero(weights >= weights.max() * 1e-12)
        share = weights[alive, None] / self._normaliser[alive]
        diagnoses = len(self.diagnoses)
        answered = np.bincount(
            (self._pair[alive] * diagnoses + self.diagnosis[alive, None]).ravel(),
            weights=share.ravel(),
            minlength=len(self._evidence_of) * diagnoses,
        ).reshape(-1, diagnoses)
        # Each patient gives one answer per evidence, so summing an evidence's answers gives Σ_p∈d v.
        by_diagnosis = np.add.reduceat(answered, self._offset, axis=0)
        joint = self._likelihood * (
            self.mismatch * by_diagnosis[self._evidence_of] + (1 - self.mismatch) * answered
        )
        mass = joint.sum(axis=1)
        evidences = len(self.evidences)
        spread = np.bincount(self._evidence_of, weights=mass * _entropy(joint), minlength=evidences)
        answer_mass = np.bincount(self._evidence_of, weights=mass, minlength=evidences)
        expected = spread / np.maximum(answer_mass, 1e-300)
        column = int(np.argmin(np.where(open_columns, expected, np.inf)))
        return QuestionChoice(self.evidences[column], float(expected[column]))

    def _value_shares(self, column: int, present: np.ndarray) -> tuple[list[str], np.ndarray]:
        """The values of an evidence seen in the base and theta[v, d]: P(value v | diagnosis d, present)."""
        answers = sorted(self._signatures[column], key=self._signatures[column].__getitem__)  # by id
        values = sorted({v for answer in answers if answer for v in answer})
        if not values:
            return values, np.zeros((0, len(self.diagnoses)))
        members = _membership(answers, values)[self.answers[:, column]]  # patients × values
        share = members.sum(axis=0) / max(present.sum(), 1)
        return values, self._smoothed(members.T @ self._onehot, present @ self._onehot, share)

    def _answer_likelihood(self, column: int, answers: Sequence[frozenset[str] | None]) -> np.ndarray:
        """P(answer | d) for each answer to one evidence (None: absent): answers × diagnoses."""
        present = self._pi[column]
        values, theta = self._values[column]
        members = _membership(answers, values)[:, :, None]  # answers × values × 1
        by_value = np.where(members, theta[None], 1 - theta[None]).prod(axis=1)
        absent = np.array([answer is None for answer in answers])[:, None]
        return np.where(absent, 1 - present, present * by_value)

    def _smoothed(self, counts: np.ndarray, totals: np.ndarray, share: np.ndarray) -> np.ndarray:
        """m-estimates of per-diagnosis shares: `smoothing` pseudo-patients at the base-wide `share` (one per
        row of `counts`), so rare diagnoses lean on the base and an answer anyone gave stays possible."""
        return (counts + self.smoothing * share[:, None]) / (totals + self.smoothing)


def _membership(answers: Sequence[frozenset[str] | None], values: list[str]) -> np.ndarray:
    """answers × values: whether each answer's value set holds each value (an absent answer holds none)."""
    return np.array([[v in (answer or ()) for v in values] for answer in answers], dtype=bool).reshape(
        len(answers), len(values)
    )


def _age_group(age: object) -> int:
    """The index of the age group; past patients without an age form a group of their own."""
    if not isinstance(age, int | float):
        return len(AGE_BINS) + 1
    return int(np.searchsorted(AGE_BINS, age, side="right"))


def _entropy(mass: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of unnormalised non-negative masses."""
    total = mass.sum(axis=1, keepdims=True)
    p = mass / np.where(total > 0, total, 1.0)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(axis=1)
