"""A method in one file: rank the options shortest first (a length-bias baseline for option sets)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from clinrag.core.models import Answer, Case
from clinrag.methods.answering import ranked_result
from clinrag.methods.base import Method, MethodConfig, MethodSpec
from clinrag.methods.registry import register


class ShortestConfig(MethodConfig):
    method_name: ClassVar[str] = "shortest-option"

    power: float = Field(default=1.0, gt=0)  # how strongly shorter options are preferred


class ShortestOption(Method):
    name = "shortest-option"

    def __init__(self, config: ShortestConfig) -> None:
        self.config = config

    async def aanswer(self, case: Case) -> Answer:
        weights = {key: len(text) ** -self.config.power for key, text in case.options.items()}
        total = sum(weights.values())
        answer = Answer(case_id=case.id, method=self.name)
        answer.result = ranked_result(case, {key: w / total for key, w in weights.items()})
        answer.text = case.options[answer.result.choice]
        return answer


register(
    MethodSpec(
        name="shortest-option",
        description="no LLM: the shortest option is the most likely",
        config=ShortestConfig,
        factory=lambda context, config: ShortestOption(config),
        uses_llm=False,
    )
)
