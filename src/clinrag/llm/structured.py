"""Structured output: ask for JSON matching a pydantic model, parse, repair once, validate — or raise."""

from __future__ import annotations

from typing import TypeVar

import json_repair
from pydantic import BaseModel, ValidationError

from clinrag.core.errors import StructuredOutputError, validation_problems
from clinrag.llm.base import ChatModel, ChatRequest, Completion

M = TypeVar("M", bound=BaseModel)


def parse_structured(text: str, schema: type[M]) -> M:
    """Validate `text` as `schema`; on failure repair the JSON syntax once (unclosed brackets, stray prose,
    single quotes) and validate again. Raises `StructuredOutputError` carrying the raw text."""
    try:
        return schema.model_validate_json(text)
    except ValidationError as first:
        repaired = json_repair.loads(text)
        try:
            return schema.model_validate(repaired)
        except ValidationError as second:
            problems = validation_problems(second.errors(), root="<root>", shown=5)
            raise StructuredOutputError(
                f"the model's output is not a valid {schema.__name__} even after repair: {problems}", text
            ) from first


def with_schema(request: ChatRequest, schema: type[BaseModel]) -> ChatRequest:
    return request.model_copy(update={"json_schema": schema.model_json_schema()})


def complete_structured(model: ChatModel, request: ChatRequest, schema: type[M]) -> tuple[M, Completion]:
    completion = model.complete(with_schema(request, schema))
    return parse_structured(completion.text, schema), completion


async def acomplete_structured(
    model: ChatModel, request: ChatRequest, schema: type[M]
) -> tuple[M, Completion]:
    completion = await model.acomplete(with_schema(request, schema))
    return parse_structured(completion.text, schema), completion
