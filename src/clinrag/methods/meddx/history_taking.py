"""MEDDxAgent's history-taking agent: an LLM doctor that asks the patient one question per turn, given the
initial information, the dialogue so far and the driver's goals, until it has asked `max_questions` or says
the goals are met. On coded datasets the experience policy can add its most informative question to the
goals (`ExperienceAdvisor`), so the doctor may ask what separates the diagnoses of similar patients."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, Field

from clinrag.core.models import Answer
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.methods.answering import complete_structured
from clinrag.methods.meddx.consultation import Consultation
from clinrag.methods.meddx.experience_policy import ExperienceModel
from clinrag.methods.meddx.interviewee import CodedInterviewee

DOCTOR_SYSTEM = """You are a doctor taking a patient's medical history to reach a differential diagnosis. \
Ask exactly one short question per turn, one the patient can answer with yes or no or a few words. \
Do not repeat a question already asked."""
GOALS_MET = ' Set "goals_met" to true only when the goals are met.'

DOCTOR_TURN = """The patient: {initial}

Questions asked so far:
{dialogue}

Goal: {goals}

What do you ask the patient next? Reply in JSON with "question"{goals_met}."""


class DoctorQuestion(BaseModel):
    question: str = Field(max_length=300)


class DoctorTurn(DoctorQuestion):
    goals_met: bool = False


class ExperienceAdvisor:
    """The experience policy's next question for a coded patient: the catalogue question of highest expected
    information gain over similar past patients, given what the patient has revealed so far."""

    def __init__(self, model: ExperienceModel) -> None:
        self.model = model

    def suggestion(self, consultation: Consultation) -> str | None:
        interviewee = consultation.interviewee
        if not isinstance(interviewee, CodedInterviewee):
            return None
        patient = consultation.case.patient
        weights: np.ndarray = self.model.prior(patient.demographics.sex if patient else None)
        revealed = interviewee.patient.revealed
        for reply in revealed.values():
            weights = self.model.update(weights, reply.evidence, reply.present, reply.values)
        choice = self.model.next_question(weights, set(revealed))
        return interviewee.patient.catalogue.question(choice.evidence) if choice else None


@dataclass
class HistoryTaker:
    model: ChatModel
    advisor: ExperienceAdvisor | None = None
    # Let the doctor end the interview early by saying the goals are met. Off by default: a small model says
    # so on its first turn (SmolLM2-135M did on every turn tried), which would end every interview at once.
    stop_on_goals: bool = False
    max_tokens: int = 80

    async def interview(
        self, consultation: Consultation, goals: str, max_questions: int, answer: Answer
    ) -> int:
        """Ask up to `max_questions`, each answered by the consultation's interviewee; returns how many
        were asked. Each turn is a trace step with the question, the answer and what it was matched to."""
        assert consultation.interviewee is not None
        asked = 0
        while asked < max_questions:
            suggestion = self.advisor.suggestion(consultation) if self.advisor else None
            turn_goals = f"{goals} Suggested question: {suggestion}" if suggestion else goals
            request = ChatRequest.of(
                DOCTOR_TURN.format(
                    initial=consultation.initial,
                    dialogue=consultation.dialogue_text() or "none",
                    goals=turn_goals,
                    goals_met=' and "goals_met"' if self.stop_on_goals else "",
                ),
                system=DOCTOR_SYSTEM + (GOALS_MET if self.stop_on_goals else ""),
                max_tokens=self.max_tokens,
            )
            schema = DoctorTurn if self.stop_on_goals else DoctorQuestion
            with answer.trace.step("meddx.history.turn", goals=turn_goals) as step:
                turn, _ = await complete_structured(self.model, request, schema, answer, step)
                goals_met = isinstance(turn, DoctorTurn) and turn.goals_met
                step.output = {"question": turn.question, "goals_met": goals_met}
                if goals_met and asked > 0:
                    step.output["stopped"] = "goals met"
                    break
                if not turn.question.strip():
                    step.output["stopped"] = "no question"
                    break
                exchange = await consultation.interviewee.reply(turn.question)
                consultation.exchanges.append(exchange)
                step.output |= {
                    "answer": exchange.answer,
                    "matched": exchange.evidence,
                    "score": exchange.match_score,
                }
            asked += 1
        return asked
