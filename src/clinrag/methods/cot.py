"""`cot`: zero-shot chain of thought (Kojima et al. 2022) — the model first reasons ("Let's think step by
step."), then, seeing its reasoning, gives the answer: extracted by parsing the reply (`answer=generate`, the
default: a reply naming no option is a recorded `AnswerParseError`) or by scoring the options as the
continuation of the reasoning (`answer=score`)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from clinrag.core.models import Answer, Case
from clinrag.llm.base import ChatModel, ChatRequest, Message
from clinrag.methods.answering import AnswerMode, answer_case, generate
from clinrag.methods.base import Method, MethodConfig, MethodSpec
from clinrag.methods.registry import register
from clinrag.tasks.templates import CHOICE_TASKS, task_prompt

REASON = "Let's think step by step."
CONCLUDE = "Therefore, the answer is (reply with the answer only, in the format asked above):"


class CoTConfig(MethodConfig):
    method_name: ClassVar[str] = "cot"

    answer: AnswerMode = "generate"
    reasoning_tokens: int = Field(default=256, ge=16)
    answer_tokens: int = Field(default=32, ge=1)


class CoTMethod(Method):
    name = "cot"

    def __init__(self, model: ChatModel, config: CoTConfig | None = None) -> None:
        self.model = model
        self.config = config or CoTConfig()

    async def aanswer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        prompt = task_prompt(case)
        question = [
            Message(role="system", content=prompt.system),
            Message(role="user", content=f"{prompt.render(case)}\n\n{REASON}"),
        ]
        reasoning = await generate(
            self.model,
            ChatRequest(messages=question, max_tokens=self.config.reasoning_tokens, temperature=0.0),
            answer,
            "reason",
        )
        conclusion = ChatRequest(
            messages=[
                *question,
                Message(role="assistant", content=reasoning.text.strip() or "(no reasoning)"),
                Message(role="user", content=CONCLUDE),
            ],
            # A letter or a name is short; a free reply or a list needs the room the reasoning had.
            max_tokens=self.config.answer_tokens if _chooses(case) else self.config.reasoning_tokens,
            temperature=0.0,
        )
        await answer_case(self.model, conclusion, case, prompt, answer, self.config.answer)
        answer.text = f"{reasoning.text.strip()}\n\nAnswer: {answer.text.strip()}"
        return answer


def _chooses(case: Case) -> bool:
    return bool(case.options) and case.task in CHOICE_TASKS


SPEC = register(
    MethodSpec(
        name="cot",
        description="zero-shot chain of thought: reason step by step, then answer",
        config=CoTConfig,
        factory=lambda context, config: CoTMethod(context.chat_model, config),
    )
)
