"""MEDDxAgent's DDxDriver: a ReAct loop (thought, action, observation) over the history-taking, knowledge-
retrieval and diagnosis components, keeping the consultation (profile, dialogue, notes, differential).

`fixed` mode runs the enabled components in the order history → knowledge → diagnosis, `iterations` times;
with `instructed`, as in MEDDxAgent, the driver's model writes each step's input (the goal of the
questions, the question to look up, what the diagnosis should weigh) with a thought, and a reply that is not
valid JSON leaves the step its template input (recorded). `dynamic` mode lets the LLM choose the next
component (or to finish) with a thought; a choice that is not valid now — an unknown or disabled component,
history taking with the question budget spent, finishing before a diagnosis — is rejected with the reason as
its observation and asked again, up to `retries` times, then the fixed order's next component runs instead
(recorded). Both stop after `iterations` diagnoses or when the top-k of the differential has not changed for
`stable_for` diagnoses in a row. Every step is in the trace as `meddx.react`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, create_model

from clinrag.core.errors import AnswerParseError, StructuredOutputError
from clinrag.core.models import Answer, Evidence
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.methods.answering import complete_structured
from clinrag.methods.meddx.consultation import Consultation
from clinrag.methods.meddx.diagnosis_agent import DiagnosisAgent
from clinrag.methods.meddx.history_taking import HistoryTaker
from clinrag.methods.meddx.knowledge_agent import KnowledgeAgent

Component = Literal["history", "knowledge", "diagnosis"]
ORDER: tuple[Component, ...] = ("history", "knowledge", "diagnosis")
FINISH = "finish"
SCRATCHPAD_STEPS = 6

# what each action does, and its input (none for finishing)
ACTIONS: dict[str, tuple[str, str | None]] = {
    "history": ("ask the patient more questions", "the goal of the questions"),
    "knowledge": ("search medical knowledge", "the question to look up"),
    "diagnosis": ("rank the differential diagnosis from what is known now", "what it should weigh"),
    FINISH: ("stop; the last differential is the answer", None),
}
DRIVER_SYSTEM = (
    "You direct a differential diagnosis. Each turn, think about what is missing, then choose one action:\n"
    + "\n".join(
        f'- "{action}": {does}' + (f" (input: {given})" if given else "")
        for action, (does, given) in ACTIONS.items()
    )
    + '\nAvailable now: {actions}. Reply in JSON with "thought", "action" and "input".'
)
INSTRUCT_SYSTEM = """You direct a differential diagnosis. The next step is fixed: {action}, to {does}; its \
input is {given}. Think about what is missing, then write the input. Reply in JSON with "thought" and \
"input"."""

DRIVER_TURN = """Patient: {profile}

Current differential: {ddx}

Steps so far:
{scratchpad}
{feedback}"""


@dataclass(frozen=True)
class DriverConfig:
    mode: Literal["fixed", "dynamic"] = "fixed"
    instructed: bool = False  # fixed mode: the driver's model writes each step's input (else: templates)
    iterations: int = 3
    questions: int = 5  # per history-taking step
    components: tuple[Component, ...] = ORDER
    stable_top_k: int = 0  # 0: never stop on a stable differential
    stable_for: int = 1
    retries: int = 2
    max_steps: int = 20  # dynamic mode: component runs at most (fixed mode runs iterations × components)


@dataclass
class ReactStep:
    thought: str
    action: str
    observation: str


@dataclass
class DDxDriver:
    model: ChatModel | None
    diagnosis: DiagnosisAgent
    history: HistoryTaker | None = None
    knowledge: KnowledgeAgent | None = None
    config: DriverConfig = field(default_factory=DriverConfig)

    async def run(self, consultation: Consultation, answer: Answer) -> str:
        """Drive the consultation; returns why it stopped. Evidence used is added to `answer`."""
        steps: list[ReactStep] = []
        pending = list(self._fixed_order())
        dynamic = self.config.mode == "dynamic"
        limit = self.config.max_steps if dynamic else self.config.iterations * len(pending)
        for _ in range(limit):
            if dynamic:
                thought, action, given = await self._choose(consultation, steps, answer)
            else:
                if not pending:
                    pending = list(self._fixed_order())
                action, given, thought = pending.pop(0), "", "fixed order"
                if self.config.instructed:
                    thought, given = await self._instruct(consultation, steps, action, answer)
            if action == FINISH:
                return "finished by the driver"
            step = await self._act(consultation, action, given, thought, answer)
            steps.append(step)
            if action == "diagnosis":
                if len(consultation.history) >= self.config.iterations:
                    return "iterations"
                if self._stable(consultation):
                    return f"stable top-{self.config.stable_top_k}"
        return "max steps"

    def _fixed_order(self) -> list[Component]:
        return [c for c in ORDER if c in self.config.components]

    async def _act(
        self, consultation: Consultation, action: str, given: str, thought: str, answer: Answer
    ) -> ReactStep:
        with answer.trace.step("meddx.react", thought=thought, action=action, input=given) as record:
            try:
                observation = await self._run_component(consultation, action, given, answer)
            except (StructuredOutputError, AnswerParseError) as exc:
                observation = f"failed: {type(exc).__name__}: {exc}"
            record.output = {"observation": observation}
        return ReactStep(thought, action, observation)

    async def _run_component(
        self, consultation: Consultation, action: str, given: str, answer: Answer
    ) -> str:
        top = ", ".join(consultation.top(3))
        if action == "history":
            assert self.history is not None
            goals = given or (
                f"Ask questions that help tell apart the leading diagnoses: {top}."
                if top
                else "Find out which other symptoms the patient has, to tell apart the diseases that could "
                "cause the complaint."
            )
            budget = self._questions_left(consultation)
            asked = await self.history.interview(
                consultation, goals, min(self.config.questions, budget), answer
            )
            recent = consultation.exchanges[-asked:] if asked else []
            return "; ".join(f"{e.question} → {e.answer}" for e in recent) or "no question was asked"
        if action == "knowledge":
            assert self.knowledge is not None
            query = given or (
                f"Which findings distinguish {top}?"
                if top
                else f"Which diseases explain: {consultation.initial}"
            )
            note = await self.knowledge.retrieve(consultation, query, answer)
            consultation.notes.append(note)
            _add_evidence(answer, note.evidence)
            return note.summary
        ddx, examples = await self.diagnosis.diagnose(consultation, answer, given)
        consultation.record_ddx(ddx)
        _add_evidence(answer, examples)
        return consultation.ddx_text(5)

    def _questions_left(self, consultation: Consultation) -> int:
        return self.config.iterations * self.config.questions - len(consultation.exchanges)

    def invalid_reason(self, action: str, consultation: Consultation) -> str | None:
        """Why `action` cannot run now, or None when it can."""
        if action == FINISH:
            return None if consultation.history else "there is no differential yet: run diagnosis first"
        if action not in self.config.components:
            return f"{action!r} is not one of the available actions {self._available(consultation)}"
        if action == "history" and self._questions_left(consultation) <= 0:
            return "the question budget is spent"
        return None

    def _available(self, consultation: Consultation) -> list[str]:
        return [a for a in [*self._fixed_order(), FINISH] if self.invalid_reason(a, consultation) is None]

    async def _choose(
        self, consultation: Consultation, steps: list[ReactStep], answer: Answer
    ) -> tuple[str, str, str]:
        """(thought, action, input) chosen by the model and validated; the fixed order's next component
        after `retries` rejected choices."""
        assert self.model is not None
        available = self._available(consultation)
        schema = _choice_schema(available)
        feedback = ""
        for attempt in range(self.config.retries + 1):
            request = ChatRequest.of(
                self._turn(consultation, steps, feedback),
                system=DRIVER_SYSTEM.format(actions=", ".join(available)),
                max_tokens=128,
            )
            with answer.trace.step("meddx.driver.choose", attempt=attempt, available=available) as record:
                try:
                    choice, _ = await complete_structured(self.model, request, schema, answer, record)
                except StructuredOutputError as exc:
                    reason, choice = f"the reply is not a valid choice: {exc}", None
                else:
                    reason = self.invalid_reason(choice.action, consultation)
                record.output = {
                    "thought": choice.thought if choice else None,
                    "action": choice.action if choice else None,
                    "rejected": reason,
                }
            if reason is None and choice is not None:
                return choice.thought, choice.action, choice.input
            feedback = f"\nYour last choice was rejected: {reason}. Choose again."
        fallback = self._fallback(consultation, steps)
        with answer.trace.step("meddx.driver.fallback", action=fallback) as record:
            record.output = {"reason": f"{self.config.retries + 1} choices rejected"}
        return "fallback to the fixed order", fallback, ""

    async def _instruct(
        self, consultation: Consultation, steps: list[ReactStep], action: str, answer: Answer
    ) -> tuple[str, str]:
        """(thought, input) the model writes for the fixed order's next step; ("fixed order", "") — the
        step's template input — when its reply is not valid."""
        assert self.model is not None
        request = ChatRequest.of(
            self._turn(consultation, steps),
            system=INSTRUCT_SYSTEM.format(action=action, does=ACTIONS[action][0], given=ACTIONS[action][1]),
            max_tokens=128,
        )
        with answer.trace.step("meddx.driver.instruct", action=action) as record:
            try:
                reply, _ = await complete_structured(self.model, request, _Instruction, answer, record)
            except StructuredOutputError as exc:
                record.output = {"rejected": f"the reply is not a valid instruction: {exc}"}
                return "fixed order", ""
            record.output = {"thought": reply.thought, "input": reply.input}
        return reply.thought, reply.input

    def _turn(self, consultation: Consultation, steps: list[ReactStep], feedback: str = "") -> str:
        return DRIVER_TURN.format(
            profile=consultation.profile_text(),
            ddx="; ".join(consultation.top(5)) or "(none yet)",
            scratchpad=_scratchpad(steps) or "(none yet)",
            feedback=feedback,
        )

    def _fallback(self, consultation: Consultation, steps: list[ReactStep]) -> str:
        order = self._fixed_order()
        last = steps[-1].action if steps else None
        following = order[(order.index(last) + 1) % len(order)] if last in order else order[0]
        candidates = order[order.index(following) :] + order[: order.index(following)]
        return next(c for c in candidates if self.invalid_reason(c, consultation) is None)

    def _stable(self, consultation: Consultation) -> bool:
        k, span = self.config.stable_top_k, self.config.stable_for
        if not k or len(consultation.history) <= span:
            return False
        tops = [[d.name for d in snap.ddx[:k]] for snap in consultation.history[-span - 1 :]]
        return all(top == tops[0] for top in tops)


class _Instruction(BaseModel):
    thought: str = Field(max_length=600)
    input: str = Field(max_length=600)


def _choice_schema(actions: Sequence[str]) -> type[BaseModel]:
    # The enum constrains an embedded model's grammar; a server may still reply otherwise, and is rejected.
    action = Literal[tuple(actions)]  # type: ignore[valid-type]
    return create_model(
        "DriverChoice",
        thought=(str, Field(max_length=600)),
        action=(action, ...),
        input=(str, Field(default="", max_length=600)),
    )


def _scratchpad(steps: list[ReactStep]) -> str:
    return "\n".join(
        f"Thought: {s.thought}\nAction: {s.action}\nObservation: {s.observation[:300]}"
        for s in steps[-SCRATCHPAD_STEPS:]
    )


def _add_evidence(answer: Answer, items: Sequence[Evidence]) -> None:
    known = set(answer.evidence_ids)
    for item in items:
        if item.id not in known:
            known.add(item.id)
            answer.evidence.append(item)
