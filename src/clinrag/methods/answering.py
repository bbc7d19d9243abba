"""The answering kernel every method shares.

- Traced model calls: `complete`, `score` and `complete_structured` call the model and account the call's
  usage to the answer (or any other ledger: a refinement run) and to the trace step it ran in — the one place
  where model usage is added up.
- Option scoring to a distribution over the option keys (`option_distribution`) and from a distribution to a
  ranked result (`ranked_result`, `DDX_SIZE` diagnoses).
- Answering a case from a prepared request (`answer_case`): single-choice and differential cases by scoring or
  by generation and parsing, the other tasks by (schema-constrained) generation and the task's parser. A reply
  that cannot be parsed is a typed error recorded on the answer (`record_failure`), never a default option.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Literal, Protocol, TypeVar

from pydantic import BaseModel

from clinrag.core.errors import AnswerParseError, StructuredOutputError
from clinrag.core.models import DDX_SIZE, Answer, Case, RankedDiagnosis, StructuredResult, Trace, TraceStep
from clinrag.core.usage import Usage
from clinrag.llm.base import ChatModel, ChatRequest, Completion, OptionScores
from clinrag.llm.structured import parse_structured, with_schema
from clinrag.methods.options import option_key
from clinrag.patients.similarity import Neighbours, label_vote
from clinrag.tasks.templates import CHOICE_TASKS, TaskPrompt

AnswerMode = Literal["score", "generate"]
M = TypeVar("M", bound=BaseModel)


class Ledger(Protocol):
    """What model calls are accounted to: an `Answer`, or the run of a component that reports its cost."""

    trace: Trace
    usage: Usage


def account(ledger: Ledger, step: TraceStep, usage: Usage) -> None:
    ledger.usage += usage
    step.usage += usage


def absorb(ledger: Ledger, part: Ledger) -> None:
    """A part answered on its own ledger (one sampled chain of several), its steps and cost, into `ledger`."""
    ledger.trace.steps.extend(part.trace.steps)
    ledger.usage += part.usage


async def complete(model: ChatModel, request: ChatRequest, ledger: Ledger, step: TraceStep) -> Completion:
    """One completion, accounted to `ledger` and to the open trace `step`."""
    completion = await model.acomplete(request)
    account(ledger, step, completion.usage)
    return completion


async def score(
    model: ChatModel, request: ChatRequest, targets: Sequence[str], ledger: Ledger, step: TraceStep
) -> OptionScores:
    """The model's scores of `targets` as replies to `request`, accounted like `complete`; the step records
    how they were scored (likelihoods, or a ranking's rank rule)."""
    scores = await model.ascore_options(request, targets)
    account(ledger, step, scores.usage)
    step.output["scoring"] = scores.method
    return scores


async def complete_structured(
    model: ChatModel, request: ChatRequest, schema: type[M], ledger: Ledger, step: TraceStep
) -> tuple[M, Completion]:
    """A reply constrained to and validated as `schema` (one repair); an invalid reply raises
    `StructuredOutputError` after its usage has been accounted."""
    completion = await complete(model, with_schema(request, schema), ledger, step)
    return parse_structured(completion.text, schema), completion


async def generate(model: ChatModel, request: ChatRequest, ledger: Ledger, name: str, **inputs) -> Completion:
    """A completion in a trace step of its own, whose output is the text."""
    with ledger.trace.step(name, **inputs) as step:
        completion = await complete(model, request, ledger, step)
        step.output["text"] = completion.text
    return completion


def record_failure(answer: Answer, error: AnswerParseError | StructuredOutputError) -> None:
    """An unusable reply: the typed error on the answer, the raw reply kept as its text."""
    answer.error = f"{type(error).__name__}: {error}"
    answer.text = answer.text or error.raw


# --- options ----------------------------------------------------------------------------------------------


def by_letter(case: Case) -> bool:
    """Options keyed by letters (exams) are scored as their keys; others as their texts (names)."""
    return all(len(key) <= 2 for key in case.options)


async def option_distribution(
    model: ChatModel,
    request: ChatRequest,
    case: Case,
    ledger: Ledger,
    *,
    step_name: str = "score_options",
    continuation: bool = False,
) -> dict[str, float]:
    """A distribution over the option keys. Letter keys are scored as letters (the whole reply's likelihood);
    options keyed by their text as names, averaged per token so that long names are not penalised for their
    length. `continuation` scores names as the continuation of a prompt that ends before the answer (with a
    leading space) rather than as the whole reply."""
    keys = list(case.options)
    letters = by_letter(case)
    prefix = " " if continuation else ""
    targets = keys if letters else [prefix + case.options[key] for key in keys]
    with ledger.trace.step(step_name, options=len(keys), scored="keys" if letters else "texts") as step:
        scores = await score(model, request, targets, ledger, step)
        distribution = dict(zip(keys, scores.probabilities("sum" if letters else "mean"), strict=True))
        step.output["probabilities"] = dict(sorted(distribution.items(), key=lambda kv: -kv[1]))
    return distribution


def ranked_result(case: Case, distribution: dict[str, float]) -> StructuredResult:
    """The best option as the choice and the top of the distribution as a ranked differential."""
    order = sorted(distribution, key=lambda key: -distribution[key])
    ddx = [RankedDiagnosis(name=case.options[key], probability=distribution[key]) for key in order[:DDX_SIZE]]
    return StructuredResult(choice=order[0], ddx=ddx)


def top(distribution: dict[str, float], n: int = DDX_SIZE) -> dict[str, float]:
    """The n most probable entries, rounded for a trace."""
    return {key: round(p, 4) for key, p in sorted(distribution.items(), key=lambda kv: -kv[1])[:n]}


# --- the experience prior over the options ----------------------------------------------------------------

PRIOR_FLOOR = 0.01  # ε: an option no similar patient had keeps a small chance


def option_prior(case: Case, neighbours: Neighbours, labels: Mapping[str, list[str]]) -> dict[str, float]:
    """The similar patients' similarity-weighted label vote over the option keys (labels are option texts or
    keys), normalised over the options they had; options no similar patient had are absent."""
    shares: dict[str, float] = {}
    for label, share in label_vote(neighbours, labels).items():
        key = option_key(label, case.options)
        if key in case.options:
            shares[key] = shares.get(key, 0.0) + share
    total = sum(shares.values())
    return {key: share / total for key, share in shares.items()} if total else {}


def combine(llm: dict[str, float], prior: dict[str, float], weight: float) -> dict[str, float]:
    """P(o) ∝ P_llm(o) · (P_exp(o) + ε)^λ over the options either part scored; either part may be empty."""
    if not prior:
        return dict(llm)
    keys = list(llm) or list(prior)
    logs = {
        key: (math.log(llm[key]) if llm and llm[key] > 0 else (0.0 if not llm else -math.inf))
        + weight * math.log(prior.get(key, 0.0) + PRIOR_FLOOR)
        for key in keys
    }
    top = max(logs.values())
    weights = {key: math.exp(value - top) for key, value in logs.items()}
    total = sum(weights.values())
    return {key: value / total for key, value in weights.items()}


# --- answering from a prepared request --------------------------------------------------------------------


async def choose(
    model: ChatModel, request: ChatRequest, case: Case, prompt: TaskPrompt, answer: Answer, mode: AnswerMode
) -> None:
    """Fill `answer` with the chosen option of a single-choice or differential case: by likelihood (`score`)
    or by generation and parsing (`generate`, which raises `AnswerParseError` on a reply naming no option)."""
    if mode == "score":
        distribution = await option_distribution(model, request, case, answer)
        answer.result = ranked_result(case, distribution)
        answer.text = case.options[answer.result.choice]
        return
    with answer.trace.step("generate_choice") as step:
        completion = await complete(model, request, answer, step)
        answer.text = completion.text
        step.output = {"text": completion.text}
        answer.result = prompt.parse(completion.text, case)
        step.output["choice"] = answer.result.choice


async def answer_case(
    model: ChatModel, request: ChatRequest, case: Case, prompt: TaskPrompt, answer: Answer, mode: AnswerMode
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
            completion = await complete(
                model, request.model_copy(update={"json_schema": schema}) if schema else request, answer, step
            )
            answer.text = completion.text
            step.output = {"text": completion.text}
            answer.result = prompt.parse(completion.text, case)
    except (AnswerParseError, StructuredOutputError) as exc:
        record_failure(answer, exc)
