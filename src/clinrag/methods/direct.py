"""`direct`: the model answers alone, with no retrieval — the floor every other method is compared with.

Per task: one option key by generation and parsing (or by option scoring with `mode="score"`); a ranked
differential by scoring every option text (a distribution over all options, not a parsed list); several
options by grammar-/schema-constrained JSON; free text by plain generation. An answer that cannot be parsed
is a recorded failure (`Answer.error`), never a default option.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, create_model

from clinrag.core.errors import AnswerParseError, InvalidInputError, StructuredOutputError
from clinrag.core.models import Answer, Case, RankedDiagnosis, StructuredResult
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import complete_structured
from clinrag.methods.base import Method, MethodContext, MethodSpec
from clinrag.tasks.multiple_choice import parse_choice, render_prompt
from clinrag.tasks.render import case_text, options_block

DDX_PROMPT = """{case}

Candidate diagnoses:
{options}

The most likely diagnosis is:"""

MULTI_SELECT_PROMPT = """{case}

Options:
{options}

Select every option that applies. Reply in JSON as {{"answers": [<option letters or names>]}}."""

FREE_TEXT_PROMPT = """{case}

Answer as a careful physician, briefly."""

DDX_SIZE = 10


class DirectMethod(Method):
    name = "direct"

    def __init__(
        self, model: ChatModel, *, mode: Literal["generate", "score"] = "generate", max_tokens: int = 64
    ) -> None:
        if mode not in ("generate", "score"):
            raise InvalidInputError(f"direct mode must be 'generate' or 'score', got {mode!r}")
        self.model = model
        self.mode = mode
        self.max_tokens = max_tokens

    def answer(self, case: Case) -> Answer:
        answer = Answer(case_id=case.id, method=self.name)
        with_options = bool(case.options)
        try:
            if case.task == "ddx" and with_options:
                self._rank(case, answer)
            elif case.task in ("multi_select", "treatment") and with_options:
                self._select_many(case, answer)
            elif with_options:
                self._choose(case, answer)
            else:
                self._free_text(case, answer)
        except (AnswerParseError, StructuredOutputError) as exc:
            answer.error = f"{type(exc).__name__}: {exc}"
            answer.text = answer.text or exc.raw
        return answer

    def _choose(self, case: Case, answer: Answer) -> None:
        request = ChatRequest.of(render_prompt(case), max_tokens=self.max_tokens, temperature=0.0)
        keys = list(case.options)
        with answer.trace.step("choose", mode=self.mode, options=keys) as step:
            if self.mode == "score":
                scores = self.model.score_options(request, keys)
                answer.usage += scores.usage
                probabilities = scores.probabilities()
                choice = keys[scores.best()]
                answer.text = choice
                step.output = {"choice": choice, "probabilities": dict(zip(keys, probabilities, strict=True))}
            else:
                completion = self.model.complete(request)
                answer.usage += completion.usage
                answer.text = completion.text
                step.output = {"text": completion.text}
                choice = parse_choice(completion.text, case.options)
                step.output["choice"] = choice
        answer.result = StructuredResult(choice=choice)

    def _rank(self, case: Case, answer: Answer) -> None:
        texts = list(case.options.values())
        keys = list(case.options)
        prompt = DDX_PROMPT.format(case=case_text(case), options="\n".join(f"- {t}" for t in texts))
        with answer.trace.step("rank_options", options=len(texts)) as step:
            scores = self.model.score_options(ChatRequest.of(prompt), [f" {t}" for t in texts])
            answer.usage += scores.usage
            # Per-token means: summed log-likelihoods would favour the shortest names.
            probabilities = scores.probabilities("mean")
            order = sorted(range(len(texts)), key=lambda i: -probabilities[i])[:DDX_SIZE]
            ddx = [RankedDiagnosis(name=texts[i], probability=probabilities[i]) for i in order]
            step.output = {"ddx": [d.model_dump() for d in ddx]}
        answer.text = "\n".join(f"{n}. {d.name} ({d.probability:.1%})" for n, d in enumerate(ddx, 1))
        answer.result = StructuredResult(choice=keys[order[0]], ddx=ddx)

    def _select_many(self, case: Case, answer: Answer) -> None:
        keys = list(case.options)
        schema = _answers_schema(keys)
        prompt = MULTI_SELECT_PROMPT.format(case=case_text(case), options=options_block(case.options))
        request = ChatRequest.of(prompt, max_tokens=max(self.max_tokens, 16 * len(keys)), temperature=0.0)
        with answer.trace.step("select", options=keys) as step:
            try:
                parsed, completion = complete_structured(self.model, request, schema)
            except StructuredOutputError as exc:
                answer.text = exc.raw
                raise
            answer.usage += completion.usage
            answer.text = completion.text
            choices = list(dict.fromkeys(parsed.answers))
            step.output = {"choices": choices}
        if not choices:
            raise AnswerParseError("the model selected no option", completion.text)
        answer.result = StructuredResult(choices=choices)

    def _free_text(self, case: Case, answer: Answer) -> None:
        request = ChatRequest.of(FREE_TEXT_PROMPT.format(case=case_text(case)), temperature=0.0)
        with answer.trace.step("generate") as step:
            completion = self.model.complete(request)
            answer.usage += completion.usage
            answer.text = completion.text
            step.output = {"text": completion.text}


def _answers_schema(keys: list[str]) -> type[BaseModel]:
    # The enum constrains the embedded model's grammar and a server's response_format to valid keys.
    choice = Literal[tuple(keys)]  # type: ignore[valid-type]
    return create_model("SelectedOptions", answers=(list[choice], ...))


def build(context: MethodContext) -> DirectMethod:
    params = dict(context.params)
    unknown = set(params) - {"mode", "max_tokens"}
    if unknown:
        raise InvalidInputError(f"direct takes the parameters mode, max_tokens; got {sorted(unknown)}")
    return DirectMethod(context.chat_model, **params)


SPEC = MethodSpec(
    name="direct", description="the model answers alone (no retrieval)", build=build, uses_llm=True
)
