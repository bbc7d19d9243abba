"""`meddx-experience`: interactive differential diagnosis with no LLM. Starting from age, sex and the initial
complaint, it asks the structured patient the question of highest expected information gain over the
diagnoses of similar past patients (`experience_policy`), one per turn, until `max_questions` or until the
top diagnosis reaches `confidence` (after at least `min_questions`). The differential is snapshotted at each
checkpoint, so one run scores every 5 questions; the dialogue is in the trace and the closest past
patients are the evidence. Every default is re-derived by `benchmarks/tune_experience.py`."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import ClassVar

import numpy as np
from pydantic import Field, model_validator

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import (
    DDX_SIZE,
    HIDDEN_HPO_OBSERVED,
    HPO_OBSERVED,
    Answer,
    Case,
    DdxSnapshot,
    RankedDiagnosis,
    StructuredResult,
)
from clinrag.methods.base import Method, MethodConfig, MethodSpec
from clinrag.methods.meddx.experience_policy import ExperienceModel
from clinrag.methods.meddx.hpo_patient import HpoPatient
from clinrag.methods.meddx.structured_patient import Reply, StructuredPatient, evidence_catalogue
from clinrag.methods.options import option_key
from clinrag.methods.registry import register
from clinrag.patients.record import PatientRecord
from clinrag.patients.similarity import patient_evidence


class ExperienceConfig(MethodConfig):
    method_name: ClassVar[str] = "meddx-experience"

    max_questions: int = Field(default=30, ge=0, le=200)
    # Question counts at which the differential is snapshotted; default every 5 up to max_questions.
    checkpoints: list[int] | None = None
    # Defaults chosen by benchmarks/tune_experience.py by 5-fold cross-validation over the 1,721 DDXPlus
    # development patients outside both evaluation samples (best GTPA@1 within 7 questions on average):
    # GTPA@1 0.992 after 4.5 questions. Stop when the top diagnosis reaches `confidence` (null: always ask
    # max_questions) once `min_questions` have been asked; the patients the base cannot settle ask up to 30.
    confidence: float | None = Field(default=0.99, gt=0, le=1)
    min_questions: int = Field(default=4, ge=0)
    mismatch: float = Field(default=0.3, gt=0, le=1)  # weight factor of a past patient per disagreement
    smoothing: float = Field(default=0.03, gt=0, le=100)  # pseudo-patients behind each P(answer | diagnosis)
    other_sex: float = Field(default=0.2, gt=0, le=1)  # prior weight of past patients of the other sex
    use_age: bool = False  # weight the prior by how common the patient's age group is for each diagnosis
    similar_patients: int = Field(default=5, ge=0, le=50)  # closest past patients returned as evidence
    # a finding fewer past patients have is not asked about (HPO-coded bases hold thousands of terms, most
    # seen once: 10 keeps 1,073 of phenopacket-store's 3,776)
    min_patients: int = Field(default=1, ge=1)

    @model_validator(mode="after")
    def _checkpoints_in_range(self) -> ExperienceConfig:
        if self.checkpoints is not None and any(not 0 < c <= self.max_questions for c in self.checkpoints):
            raise ValueError(f"checkpoints must be between 1 and max_questions ({self.max_questions})")
        return self

    def snapshot_points(self) -> list[int]:
        if self.checkpoints is not None:
            return sorted(set(self.checkpoints))
        return [*range(5, self.max_questions, 5), self.max_questions] if self.max_questions else []


class ExperienceQuestioning(Method):
    name = "meddx-experience"

    def __init__(
        self, model: ExperienceModel, labels: dict[str, list[str]], config: ExperienceConfig
    ) -> None:
        self.experience = model
        self.labels = labels
        self.config = config

    async def aanswer(self, case: Case) -> Answer:
        return await asyncio.to_thread(self._interview, case)

    def _interview(self, case: Case) -> Answer:
        patient = _patient(case)
        answer = Answer(case_id=case.id, method=self.name)
        demographics = case.patient.demographics if case.patient else None
        sex = demographics.sex if demographics else None
        age = demographics.age if demographics and self.config.use_age else None
        opening = patient.opening()
        weights = self.experience.prior(sex, age)
        for reply in opening:
            weights = self._heard(weights, reply)
        heard = [reply.evidence for reply in opening]
        with answer.trace.step("initial", sex=sex, age=age, evidence=",".join(heard)) as step:
            step.output = {"answer": " ".join(reply.text for reply in opening), "top": self._top(weights, 3)}
        history = [self._snapshot(0, 0, weights)]
        checkpoints = self.config.snapshot_points()
        dialogue: list[str] = []
        asked, stop = set(heard), "max_questions"
        while len(dialogue) < self.config.max_questions:
            top = max(self.experience.distribution(weights).values(), default=0.0)  # unrounded, as sessions
            confident = self.config.confidence and top >= self.config.confidence
            if confident and len(dialogue) >= self.config.min_questions:
                stop = "confident"
                break
            choice = self.experience.next_question(weights, asked)
            if choice is None:
                stop = "no question left"
                break
            question = patient.question(choice.evidence)
            with answer.trace.step(
                "ask",
                evidence=choice.evidence,
                question=question,
                expected_entropy=round(choice.expected_entropy, 4),
            ) as step:
                reply = patient.ask(choice.evidence)
                weights = self._heard(weights, reply)
                step.output = {"answer": reply.text, "top": self._top(weights, 3)}
            asked.add(choice.evidence)
            dialogue.append(f"Q: {question} A: {reply.text}")
            if len(dialogue) in checkpoints:
                history.append(self._snapshot(len(history), len(dialogue), weights))
        # Checkpoints after an early stop keep the final differential, so every run has the same iterations.
        while len(history) <= len(checkpoints):
            history.append(self._snapshot(len(history), len(dialogue), weights))
        with answer.trace.step("stop", questions=len(dialogue)) as step:
            step.output = {"reason": stop}
        return self._finish(answer, case, weights, history, dialogue)

    def _heard(self, weights: np.ndarray, reply: Reply) -> np.ndarray:
        if reply.present is None:  # "I don't know": nothing to learn
            return weights
        return self.experience.update(weights, reply.evidence, reply.present, reply.values)

    def _top(self, weights: np.ndarray, n: int) -> list[tuple[str, float]]:
        return [(name, round(p, 4)) for name, p in list(self.experience.distribution(weights).items())[:n]]

    def _ranked(self, weights: np.ndarray) -> list[RankedDiagnosis]:
        top = list(self.experience.distribution(weights).items())[:DDX_SIZE]
        return [RankedDiagnosis(name=name, probability=min(1.0, p)) for name, p in top]

    def _snapshot(self, iteration: int, questions: int, weights: np.ndarray) -> DdxSnapshot:
        return DdxSnapshot(iteration=iteration, questions_asked=questions, ddx=self._ranked(weights))

    def _finish(
        self, answer: Answer, case: Case, weights: np.ndarray, history: list[DdxSnapshot], dialogue: list[str]
    ) -> Answer:
        ddx = history[-1].ddx
        closest = np.argsort(-weights, kind="stable")[: self.config.similar_patients]
        total = float(weights.sum())
        found = [(self.experience.records[i], float(weights[i] / total)) for i in closest]
        answer.evidence = patient_evidence(found, self.labels)
        if not ddx:
            answer.error = "no past patient is compatible with the answers"
            return answer
        answer.result = StructuredResult(
            choice=option_key(ddx[0].name, case.options), ddx=ddx, ddx_history=history
        )
        summary = "; ".join(f"{d.name} {d.probability:.0%}" for d in ddx)
        answer.text = "\n".join([*dialogue, f"Differential after {len(dialogue)} questions: {summary}"])
        return answer


def _patient(case: Case) -> StructuredPatient | HpoPatient:
    """The structured patient of a coded interactive case: DDXPlus evidence, or HPO terms."""
    catalogue_path = case.meta.get("evidence_catalogue")
    if isinstance(catalogue_path, str):
        return StructuredPatient(case, evidence_catalogue(catalogue_path))
    if HIDDEN_HPO_OBSERVED in case.meta:
        return HpoPatient(case)
    raise InvalidInputError(
        f"case {case.id} has no coded hidden profile: meddx-experience asks coded questions and needs a "
        "coded interactive dataset such as ddxplus-interactive or phenopackets-interactive"
    )


def experience_model(
    records: Sequence[PatientRecord], labels: dict[str, list[str]], config: ExperienceConfig
) -> ExperienceModel:
    """The model over the past patients' coded findings: DDXPlus evidence where the base codes it, else HPO
    terms."""
    field = "evidence" if any(record.codes.get("evidence") for record in records) else HPO_OBSERVED
    return ExperienceModel(
        records,
        labels,
        field=field,
        mismatch=config.mismatch,
        smoothing=config.smoothing,
        other_sex=config.other_sex,
        min_patients=config.min_patients,
    )


SPEC = register(
    MethodSpec(
        name="meddx-experience",
        description="no LLM: interactive ddx, asking what best separates the diagnoses of similar patients",
        config=ExperienceConfig,
        factory=lambda context, config: ExperienceQuestioning(
            experience_model(context.experience, context.labels, config), context.labels, config
        ),
        uses_llm=False,
        needs_experience=True,
        uses_patients=True,
    )
)
