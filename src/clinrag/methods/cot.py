"""`cot`: zero-shot chain of thought (Kojima et al. 2022) — the model first reasons ("Let's think step by
step."), then, seeing its reasoning, gives the answer: extracted by parsing the reply (`answer=generate`, the
default: a reply naming no option is a recorded `AnswerParseError`) or by scoring the options as the
continuation of the reasoning (`answer=score`).

With `samples` > 1 it is self-consistency (Wang et al. 2023), i-MedRAG's baseline: that many chains are
sampled at `temperature`, each with its own seed, and the option most of them answer wins (a tie: the one
answered first). A vote needs options; a case without them is a recorded error."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import ClassVar

from pydantic import Field

from clinrag.core.models import Answer, Case, StructuredResult
from clinrag.llm.base import ChatModel, ChatRequest, Message
from clinrag.methods.answering import AnswerMode, absorb, answer_case, generate
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
    samples: int = Field(default=1, ge=1, le=40)  # > 1: self-consistency over this many sampled chains
    temperature: float = Field(default=0.7, gt=0.0, le=2.0)  # of each sampled chain (samples > 1)


class CoTMethod(Method):
    name = "cot"

    def __init__(self, model: ChatModel, config: CoTConfig | None = None) -> None:
        self.model = model
        self.config = config or CoTConfig()

    async def aanswer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        if self.config.samples == 1:
            return await self._chain(case, answer)
        if not _chooses(case):
            answer.error = "InvalidInputError: self-consistency votes over options, and this case has none"
            return answer
        chains = await asyncio.gather(
            *(
                self._chain(case, Answer(case_id=case.id, method=self.name), self.config.temperature, seed)
                for seed in range(self.config.samples)
            )
        )
        votes: Counter[str] = Counter()
        for chain in chains:
            absorb(answer, chain)
            if chain.result.choice is not None:
                votes[chain.result.choice] += 1
        with answer.trace.step("self_consistency", samples=self.config.samples) as step:
            step.output = {"votes": dict(votes), "answers": [chain.result.choice for chain in chains]}
        if not votes:
            answer.error = f"AnswerParseError: none of the {len(chains)} sampled chains gave an answer"
            return answer
        winner = votes.most_common(1)[0][0]  # a tie: the option answered first
        answer.result = StructuredResult(choice=winner)
        answer.text = f"{winner} ({votes[winner]} of {len(chains)} reasoning chains)"
        return answer

    async def _chain(
        self, case: Case, answer: Answer, temperature: float = 0.0, seed: int | None = None
    ) -> Answer:
        """One chain of thought into `answer`: the reasoning, then the answer that reads it."""
        prompt = task_prompt(case)
        question = [
            Message(role="system", content=prompt.system),
            Message(role="user", content=f"{prompt.render(case)}\n\n{REASON}"),
        ]
        reasoning = await generate(
            self.model,
            ChatRequest(
                messages=question, max_tokens=self.config.reasoning_tokens, temperature=temperature, seed=seed
            ),
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
            seed=seed,
        )
        await answer_case(self.model, conclusion, case, prompt, answer, self.config.answer)
        answer.text = f"{reasoning.text.strip()}\n\nAnswer: {answer.text.strip()}"
        return answer


def _chooses(case: Case) -> bool:
    return bool(case.options) and case.task in CHOICE_TASKS


SPEC = register(
    MethodSpec(
        name="cot",
        description="zero-shot chain of thought: reason step by step, then answer (samples > 1: "
        "self-consistency)",
        config=CoTConfig,
        factory=lambda context, config: CoTMethod(context.chat_model, config),
    )
)
