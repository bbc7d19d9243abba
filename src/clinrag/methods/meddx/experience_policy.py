"""Experience-driven questioning (beyond MEDDxAgent): choose the next question by expected information gain
over the diagnoses of the past patients who resemble the current one, and update from the answer.

Every past patient p carries a weight, its likelihood of having produced the answers heard so far. An answer
g to evidence e (its coded value set, or "absent") multiplies w_p by

    (1 if p answered e with g else `mismatch`)
        × (1 if some past patient with p's diagnosis answered g else `unseen`)

so the weight concentrates on the most similar patients, softly (a single disagreement does not exclude a
patient), and a diagnosis under which nobody ever gave that answer is nearly ruled out. The distribution
over diagnoses is the weight summed by diagnosis. The next question is the one whose answer leaves, in
expectation under the current weights, the lowest entropy of that distribution."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.patients.loaders import EvidenceDecoder
from clinrag.patients.record import PatientRecord

ABSENT = 0  # the signature id of "the patient does not have this evidence"


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
        mismatch: float = 0.02,
        unseen: float = 1e-4,
        other_sex: float = 0.05,
    ) -> None:
        for name, value in (("mismatch", mismatch), ("unseen", unseen), ("other_sex", other_sex)):
            if not 0 < value <= 1:
                raise InvalidInputError(f"{name} must be in (0, 1], got {value}")
        kept = [r for r in records if labels.get(r.id) and r.codes.get(field)]
        if not kept:
            raise InvalidInputError(
                f"experience-driven questioning needs past patients with a label and coded {field!r} findings"
            )
        answers = [EvidenceDecoder.values_by_evidence(r.codes[field]) for r in kept]
        self.evidences = sorted({name for profile in answers for name in profile})
        self._column = {name: i for i, name in enumerate(self.evidences)}
        # Per evidence: value set → signature id (0 is "absent").
        self._signatures: list[dict[frozenset[str] | None, int]] = [{None: ABSENT} for _ in self.evidences]
        self.answers = np.zeros((len(kept), len(self.evidences)), dtype=np.int32)
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
        self.mismatch, self.unseen, self.other_sex = mismatch, unseen, other_sex
        # seen[e, g, d]: some past patient with diagnosis d answered g to evidence e.
        width = max(len(ids) for ids in self._signatures)
        self._seen = np.zeros((len(self.evidences), width, len(self.diagnoses)), dtype=bool)
        columns = np.broadcast_to(np.arange(len(self.evidences)), self.answers.shape)
        self._seen[columns, self.answers, self.diagnosis[:, None]] = True
        self._present_signatures = [np.unique(self.answers[:, e]) for e in range(len(self.evidences))]

    def prior(self, sex: str | None) -> np.ndarray:
        """Uniform weights, patients of the other sex down-weighted (sex-specific diagnoses)."""
        weights = np.ones(len(self.records))
        if sex:
            weights[self._sex != sex.upper()[:1]] = self.other_sex
        return weights

    def signature(self, evidence: str, present: bool, values: frozenset[str]) -> int | None:
        """The signature id of an answer; None for an evidence or value set no past patient has."""
        column = self._column.get(evidence)
        if column is None:
            return None
        return self._signatures[column].get(values if present else None)

    def update(self, weights: np.ndarray, evidence: str, present: bool, values: frozenset[str]) -> np.ndarray:
        """The weights after hearing the answer. An answer nobody in the base gave carries no information."""
        signature = self.signature(evidence, present, values)
        if signature is None:
            return weights
        return weights * self._likelihood(self._column[evidence], signature)

    def distribution(self, weights: np.ndarray) -> dict[str, float]:
        """Diagnosis → probability, most probable first."""
        mass = self._by_diagnosis(weights)
        total = mass.sum()
        if total <= 0:
            return {}
        order = np.argsort(-mass, kind="stable")
        return {self.diagnoses[i]: float(mass[i] / total) for i in order}

    def next_question(self, weights: np.ndarray, asked: set[str]) -> QuestionChoice | None:
        """The unasked evidence with the lowest expected posterior entropy over diagnoses (None when all
        have been asked)."""
        best: QuestionChoice | None = None
        for column, evidence in enumerate(self.evidences):
            if evidence in asked:
                continue
            signatures = self._present_signatures[column]
            likelihood = np.stack([self._likelihood(column, g) for g in signatures])  # answers × patients
            likelihood /= likelihood.sum(axis=0, keepdims=True)  # each patient's predictive over answers
            joint = np.stack([self._by_diagnosis(row * weights) for row in likelihood])  # answers × diagnoses
            answer_mass = joint.sum(axis=1)
            expected = float((answer_mass * _entropy(joint)).sum() / answer_mass.sum())
            if best is None or expected < best.expected_entropy:
                best = QuestionChoice(evidence, expected)
        return best

    def _by_diagnosis(self, weights: np.ndarray) -> np.ndarray:
        return np.bincount(self.diagnosis, weights=weights, minlength=len(self.diagnoses))

    def _likelihood(self, column: int, signature: int) -> np.ndarray:
        same = np.where(self.answers[:, column] == signature, 1.0, self.mismatch)
        plausible = np.where(self._seen[column, signature, self.diagnosis], 1.0, self.unseen)
        return same * plausible


def _entropy(mass: np.ndarray) -> np.ndarray:
    """Entropy (nats) of each row of unnormalised non-negative masses."""
    total = mass.sum(axis=1, keepdims=True)
    p = mass / np.where(total > 0, total, 1.0)
    logs = np.log(np.where(p > 0, p, 1.0))
    return -(p * logs).sum(axis=1)
