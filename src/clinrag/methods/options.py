"""Answering a case from a prepared request: choosing among its options — every option scored by likelihood as
the whole reply, or the reply generated and parsed — or generating a free reply. An unparseable reply is a
recorded failure (`AnswerParseError`, `StructuredOutputError`), never a default option."""

from __future__ import annotations

from typing import Literal

from clinrag.core.errors import AnswerParseError, StructuredOutputError
from clinrag.core.models import Answer, Case, RankedDiagnosis, StructuredResult
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.tasks.prompts import TaskPrompt

AnswerMode = Literal["score", "generate"]
DDX_SIZE = 10
CHOICE_TASKS = ("diagnosis", "multiple_choice", "ddx")


def option_key(label: str, options: dict[str, str]) -> str:
    """The option key whose text is `label` (labels are option texts), or the label itself."""
    return next((key for key, text in options.items() if text == label), label)


async def score_choice(
    model: ChatModel, request: ChatRequest, case: Case, answer: Answer
) -> dict[str, float]:
    """A distribution over the option keys. Letter keys are scored as letters; options keyed by their text
    are scored as whole names, averaged per token so that long names are not penalised for their length."""
    keys = list(case.options)
    by_letter = all(len(key) <= 2 for key in keys)
    targets = keys if by_letter else [case.options[key] for key in keys]
    with answer.trace.step(
        "score_options", options=len(keys), scored="keys" if by_letter else "texts"
    ) as step:
        scores = await model.ascore_options(request, targets)
        answer.usage += scores.usage
        distribution = dict(zip(keys, scores.probabilities("sum" if by_letter else "mean"), strict=True))
        step.output = {"probabilities": top(distribution)}
    return distribution


def ranked_result(case: Case, distribution: dict[str, float]) -> StructuredResult:
    """The best option as the choice and the top of the distribution as a ranked differential."""
    order = sorted(distribution, key=lambda key: -distribution[key])
    ddx = [RankedDiagnosis(name=case.options[key], probability=distribution[key]) for key in order[:DDX_SIZE]]
    return StructuredResult(choice=order[0], ddx=ddx)


async def choose(
    model: ChatModel,
    request: ChatRequest,
    case: Case,
    prompt: TaskPrompt,
    answer: Answer,
    mode: AnswerMode,
) -> None:
    """Fill `answer` with the chosen option of a single-choice or differential case: by likelihood (`score`)
    or by generation and parsing (`generate`, which raises `AnswerParseError` on a reply naming no option)."""
    if mode == "score":
        distribution = await score_choice(model, request, case, answer)
        answer.result = ranked_result(case, distribution)
        answer.text = case.options[answer.result.choice]
        return
    with answer.trace.step("generate_choice") as step:
        completion = await model.acomplete(request)
        answer.usage += completion.usage
        answer.text = completion.text
        step.output = {"text": completion.text}
        answer.result = prompt.parse(completion.text, case)
        step.output["choice"] = answer.result.choice


async def answer_case(
    model: ChatModel,
    request: ChatRequest,
    case: Case,
    prompt: TaskPrompt,
    answer: Answer,
    mode: AnswerMode,
) -> None:
    """Fill `answer` for any task: single-choice and differential cases by `choose`, the others by generation
    (under the task's JSON schema where it has one) and the task's parser. A reply that cannot be parsed is
    recorded on `answer.error`, with the raw reply kept as the text."""
    try:
        if case.options and case.task in CHOICE_TASKS:
            await choose(model, request, case, prompt, answer, mode)
            return
        schema = prompt.json_schema(case)
        with answer.trace.step("generate", constrained=schema is not None) as step:
            completion = await model.acomplete(
                request.model_copy(update={"json_schema": schema}) if schema else request
            )
            answer.usage += completion.usage
            answer.text = completion.text
            step.output = {"text": completion.text}
            answer.result = prompt.parse(completion.text, case)
    except (AnswerParseError, StructuredOutputError) as exc:
        answer.error = f"{type(exc).__name__}: {exc}"
        answer.text = answer.text or exc.raw


def top(distribution: dict[str, float], n: int = DDX_SIZE) -> dict[str, float]:
    return {key: round(p, 4) for key, p in sorted(distribution.items(), key=lambda kv: -kv[1])[:n]}
