"""An interactive differential with a person answering: the experience policy asks the catalogue question
of highest expected information gain, the person answers (yes / no / I don't know, or the values of a
multiple-choice question), and the differential over the patient base's diagnoses is updated after each
answer — the same model and stopping rule as `meddx-experience`, with a human in place of the simulator."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import DDX_SIZE, RankedDiagnosis
from clinrag.methods.meddx.experience import ExperienceConfig
from clinrag.methods.meddx.experience_policy import ExperienceModel
from clinrag.patients.loaders import EvidenceDecoder

QuestionKind = Literal["yes_no", "choice", "multi_choice"]
Reply = Literal["yes", "no", "unknown"]


@dataclass(frozen=True)
class Question:
    evidence: str
    text: str
    kind: QuestionKind
    choices: tuple[tuple[str, str], ...] = ()  # (value code, meaning)


@dataclass
class Exchange:
    question: str
    answer: str


@dataclass
class DdxSession:
    """One person's differential: the patient-base weights and what has been asked."""

    weights: np.ndarray
    asked: set[str] = field(default_factory=set)
    dialogue: list[Exchange] = field(default_factory=list)
    question: Question | None = None
    stop_reason: str | None = None

    @property
    def done(self) -> bool:
        return self.stop_reason is not None


class InteractiveDdx:
    def __init__(self, model: ExperienceModel, catalogue: EvidenceDecoder, config: ExperienceConfig) -> None:
        self.model = model
        self.catalogue = catalogue
        self.config = config

    def complaints(self) -> list[str]:
        """The yes/no symptoms a session may start from (those some past patient has)."""
        return [
            name
            for name in self.model.evidences
            if self.catalogue.evidences[name].get("data_type") == "B"
            and not self.catalogue.is_antecedent(name)
        ]

    def start(self, sex: str | None, complaint: str) -> DdxSession:
        if complaint not in self.complaints():
            raise InvalidInputError(f"{complaint!r} is not a symptom a session can start from")
        session = DdxSession(weights=self.model.prior(sex))
        self._record(session, complaint, "yes", frozenset())
        self._next(session)
        return session

    def answer(self, session: DdxSession, reply: Reply, values: list[str]) -> DdxSession:
        """Apply the answer to the pending question, then choose the next one (or stop)."""
        question = session.question
        if session.done or question is None:
            raise InvalidInputError("this session has ended: start a new one")
        chosen = frozenset(values)
        if question.kind == "yes_no" and chosen:
            raise InvalidInputError(f"{question.evidence} is a yes/no question: it takes no values")
        if chosen and reply != "yes":
            raise InvalidInputError("values are given only with a 'yes' answer")
        allowed = {code for code, _ in question.choices}
        if chosen - allowed:
            raise InvalidInputError(f"unknown values for {question.evidence}: {sorted(chosen - allowed)}")
        if question.kind == "choice" and len(chosen) > 1:
            raise InvalidInputError(f"{question.evidence} takes one value")
        if question.kind != "yes_no" and reply == "yes" and not chosen:
            raise InvalidInputError(f"{question.evidence} needs the value(s) that apply")
        self._record(session, question.evidence, reply, chosen)
        self._next(session)
        return session

    def differential(self, session: DdxSession) -> list[RankedDiagnosis]:
        top = list(self.model.distribution(session.weights).items())[:DDX_SIZE]
        return [RankedDiagnosis(name=name, probability=min(1.0, p)) for name, p in top]

    def _record(self, session: DdxSession, evidence: str, reply: Reply, values: frozenset[str]) -> None:
        session.asked.add(evidence)
        said = {"yes": "Yes", "no": "No", "unknown": "I don't know"}[reply]
        if values:
            said = ", ".join(sorted(self.catalogue.value_text(evidence, v) for v in values))
        session.dialogue.append(Exchange(self.catalogue.question(evidence) or evidence, said))
        if reply != "unknown":  # "I don't know" carries no information
            session.weights = self.model.update(session.weights, evidence, reply == "yes", values)

    def _next(self, session: DdxSession) -> None:
        asked = len(session.dialogue) - 1  # the complaint is not a question
        top = self.differential(session)
        confident = self.config.confidence and top and (top[0].probability or 0) >= self.config.confidence
        if confident and asked >= self.config.min_questions:
            session.question, session.stop_reason = None, "confident"
        elif asked >= self.config.max_questions:
            session.question, session.stop_reason = None, "max_questions"
        elif (choice := self.model.next_question(session.weights, session.asked)) is None:
            session.question, session.stop_reason = None, "no question left"
        else:
            session.question = self._question(choice.evidence)

    def _question(self, evidence: str) -> Question:
        entry = self.catalogue.evidences[evidence]
        text = self.catalogue.question(evidence) or evidence
        if entry.get("data_type") == "B":
            return Question(evidence, text, "yes_no")
        values = [str(v) for v in entry.get("possible-values") or []]
        choices = tuple((v, self.catalogue.value_text(evidence, v)) for v in values)
        return Question(
            evidence, text, "multi_choice" if entry.get("data_type") == "M" else "choice", choices
        )
