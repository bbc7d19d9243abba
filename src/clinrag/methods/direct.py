"""`direct`: the model answers alone, with no retrieval — the floor every other method is compared with.

The case is asked through the task prompts (no system prompt: the model alone, as the question is written)
and answered by the answering kernel: an option by generation and parsing, or by option scoring with
`mode=score`; a ranked differential by scoring every option as the top diagnosis; several options by
schema-constrained JSON; free text by plain generation. An answer that cannot be parsed is a recorded failure
(`Answer.error`), never a default option.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from clinrag.core.models import Answer, Case
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.methods.answering import AnswerMode, answer_case
from clinrag.methods.base import Method, MethodConfig, MethodSpec
from clinrag.methods.registry import register
from clinrag.tasks.templates import get_task_prompt, task_prompt


class DirectConfig(MethodConfig):
    method_name: ClassVar[str] = "direct"

    mode: AnswerMode = "generate"  # single-choice cases: generated and parsed, or scored
    max_tokens: int = Field(default=64, ge=1)


class DirectMethod(Method):
    name = "direct"

    def __init__(self, model: ChatModel, config: DirectConfig | None = None) -> None:
        self.model = model
        self.config = config or DirectConfig()

    async def aanswer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        prompt = task_prompt(case)
        # A differential is scored option by option as the whole reply, so it is asked as its top diagnosis.
        asked = get_task_prompt("diagnosis", case.language) if case.task == "ddx" and case.options else prompt
        max_tokens = self.config.max_tokens
        if case.task in ("multi_select", "treatment"):
            max_tokens = max(max_tokens, 16 * len(case.options))
        elif not case.options:
            max_tokens = None  # free text: the backend's default length
        request = ChatRequest.of(asked.render(case), max_tokens=max_tokens, temperature=0.0)
        mode = "score" if case.task == "ddx" else self.config.mode
        await answer_case(self.model, request, case, prompt, answer, mode)
        return answer


SPEC = register(
    MethodSpec(
        name="direct",
        description="the model answers alone (no retrieval)",
        config=DirectConfig,
        factory=lambda context, config: DirectMethod(context.chat_model, config),
    )
)
