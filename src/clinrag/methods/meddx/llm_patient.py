"""The simulated patient of MEDDxAgent's history taking: an LLM that holds the whole profile and answers the
doctor's question with yes, no or "I don't know" — only from what the profile states (synonyms allowed),
never inventing anything — naming one related finding after "I don't know" unless `volunteers` is off (as
MEDDxAgent's patient, which answers only what it is asked).

The reply is grammar-constrained JSON (`PatientAnswer`), so the answer is typed; an invalid reply is a
`StructuredOutputError`, recorded by the caller, never a guessed answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field

from clinrag.core.errors import InvalidInputError
from clinrag.core.models import Case
from clinrag.core.usage import Usage
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import acomplete_structured

MAX_QUESTION_CHARS = 1000

PATIENT_SYSTEM = """You are the patient whose profile is given below, talking with a doctor who is taking \
your medical history. Answer only from your profile; a synonym of something in your profile counts as \
the same thing. Never make anything up.
- If your profile says you have what the doctor asks about, the answer is "yes".
- If your profile says you do not have it, the answer is "no".
- If your profile does not mention it, the answer is "I don't know": do not say yes or no. {unknown}
- If the doctor asks what brings you in, name one or two of your most important symptoms.
Reply in JSON: "answer" is "yes", "no" or "I don't know"; "details" is what you say to the doctor, in one \
short sentence.

Your profile:
{profile}"""

# After "I don't know": one related finding of the profile (`volunteers`), or nothing, as MEDDxAgent's
# patient answers only what it is asked
VOLUNTEER = "You may then mention one finding from your profile that is closely related to the question; \
otherwise add nothing."
ONLY_ASKED = "Add nothing else."

PATIENT_TURN = """What you told the doctor at the start: {initial}
{dialogue}
Doctor: {question}"""


class PatientAnswer(BaseModel):
    answer: Literal["yes", "no", "I don't know"]
    details: str = Field(default="", max_length=400)


@dataclass(frozen=True)
class Turn:
    question: str
    answer: PatientAnswer

    def text(self) -> str:
        details = self.answer.details.strip()
        said = self.answer.answer.capitalize()
        return f"{said}. {details}" if details and details.casefold() != said.casefold() else f"{said}."


@dataclass
class LLMPatient:
    """One patient's side of a history-taking dialogue; `dialogue` grows by one turn per question."""

    model: ChatModel
    profile: list[str]
    initial: str
    max_tokens: int = 96
    volunteers: bool = True  # after "I don't know", it may name one related finding of its profile
    dialogue: list[Turn] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)

    @classmethod
    def for_case(cls, model: ChatModel, case: Case, **options: Any) -> LLMPatient:
        """The patient of a case: its findings are the profile, its initial presentation what it said."""
        if case.patient is None or not case.patient.findings:
            raise InvalidInputError(f"case {case.id} has no patient findings for a simulated patient to hold")
        return cls(model, list(case.patient.findings), case.patient.initial_presentation, **options)

    async def ask(self, question: str) -> Turn:
        question = " ".join(question.split())
        if not question:
            raise InvalidInputError("the doctor's question is empty")
        if len(question) > MAX_QUESTION_CHARS:
            raise InvalidInputError(f"the doctor's question is longer than {MAX_QUESTION_CHARS} characters")
        request = ChatRequest.of(
            PATIENT_TURN.format(initial=self.initial, dialogue=self._dialogue_text(), question=question),
            system=PATIENT_SYSTEM.format(
                profile="\n".join(f"- {fact}" for fact in self.profile),
                unknown=VOLUNTEER if self.volunteers else ONLY_ASKED,
            ),
            max_tokens=self.max_tokens,
        )
        answer, completion = await acomplete_structured(self.model, request, PatientAnswer)
        self.usage += completion.usage
        turn = Turn(question, answer)
        self.dialogue.append(turn)
        return turn

    def _dialogue_text(self) -> str:
        return "".join(f"Doctor: {t.question}\nPatient: {t.text()}\n" for t in self.dialogue)
