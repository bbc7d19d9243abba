"""Concept tagging: text → ICD-10-CM chapters (DoctorRAG B.4).

`LLMTagger` is the paper's agent: the model picks chapters from the 22-line menu; every answer is validated
against the vocabulary, non-chapters are rejected and the model is asked once more, and a text with no valid
chapter after that is recorded as untagged with the reason. `EmbeddingTagger` is a fast model-free
alternative for large builds: cosine similarity between the text and each chapter's title."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pydantic import BaseModel, Field

from clinrag.core.errors import InvalidInputError, StructuredOutputError
from clinrag.embed.base import Embedder
from clinrag.llm.base import ChatModel, ChatRequest
from clinrag.llm.structured import complete_structured
from clinrag.terms.icd10 import chapter_menu, chapters, parse_chapter_reference

MAX_TAGS = 3

TAG_PROMPT = """Which ICD-10 chapters does this medical text belong to? Choose {how_many} from the list.

{menu}

Text: {text}

Answer as JSON: {{"chapters": [numbers]}}"""

RETRY_NOTE = (
    "\n\nThese answers are not chapters of the list: {rejected}. Answer with chapter numbers 1-22 only."
)


class _ChapterAnswer(BaseModel):
    # Servers without guided decoding may answer "IX" or a title: accept strings, validate them below.
    chapters: list[int | str] = Field(min_length=1, max_length=MAX_TAGS)


@dataclass(frozen=True)
class Tagging:
    """Chapter numbers (sorted, possibly empty = untagged), what was rejected, and why it is untagged."""

    tags: list[int]
    rejected: list[str] = field(default_factory=list)
    untagged_reason: str | None = None


class Tagger(Protocol):
    name: str

    def tag(self, text: str) -> Tagging: ...


def _schema(max_tags: int = MAX_TAGS) -> dict:
    numbers = [c.number for c in chapters()]
    return {
        "type": "object",
        "properties": {
            "chapters": {
                "type": "array",
                "items": {"type": "integer", "enum": numbers},
                "minItems": 1,
                "maxItems": max_tags,
            }
        },
        "required": ["chapters"],
    }


class LLMTagger:
    name = "llm"

    def __init__(self, model: ChatModel, max_tokens: int = 32, max_tags: int = MAX_TAGS) -> None:
        """`max_tags`: at most this many chapters a text (1: one category, as DoctorRAG's agent picks)."""
        if not 1 <= max_tags <= MAX_TAGS:
            raise InvalidInputError(f"max_tags must be 1 to {MAX_TAGS}, got {max_tags}")
        self.model = model
        self.max_tokens = max_tokens
        self.max_tags = max_tags

    def tag(self, text: str) -> Tagging:
        how_many = "one chapter number" if self.max_tags == 1 else f"1 to {self.max_tags} chapter numbers"
        prompt = TAG_PROMPT.format(how_many=how_many, menu=chapter_menu(), text=text.strip())
        rejected: list[str] = []
        for attempt in range(2):
            note = RETRY_NOTE.format(rejected=", ".join(rejected)) if attempt else ""
            request = ChatRequest.of(
                prompt + note, max_tokens=self.max_tokens, json_schema=_schema(self.max_tags)
            )
            try:
                answer, _ = complete_structured(self.model, request, _ChapterAnswer)
            except StructuredOutputError as exc:
                rejected.append(f"unparseable: {exc.raw[:60]!r}")
                continue
            valid, invalid = validate_chapters(answer.chapters)
            rejected.extend(invalid)
            if len(valid) > self.max_tags:  # a server without guided decoding may list more
                rejected.extend(str(number) for number in valid[self.max_tags :])
                valid = valid[: self.max_tags]
            if valid:
                return Tagging(valid, rejected)
        return Tagging([], rejected, untagged_reason="no valid chapter after one retry")


def validate_chapters(values: list[int | str]) -> tuple[list[int], list[str]]:
    """(valid chapter numbers, sorted and unique; the values that are not chapters)."""
    valid, invalid = set(), []
    for value in values:
        number = parse_chapter_reference(value)
        if number is None:
            invalid.append(str(value))
        else:
            valid.add(number)
    return sorted(valid), invalid


class EmbeddingTagger:
    """Chapters whose title is most similar to the text: the best one, plus any within `margin` of it."""

    name = "embedding"

    def __init__(self, embedder: Embedder, margin: float = 0.03, max_tags: int = MAX_TAGS) -> None:
        self.embedder = embedder
        self.margin = margin
        self.max_tags = max_tags
        self._numbers = [c.number for c in chapters()]
        self._titles = embedder.encode([c.title for c in chapters()])

    def tag_many(self, texts: list[str]) -> list[Tagging]:
        similarity = self.embedder.encode(texts) @ self._titles.T
        results = []
        for row in similarity:
            order = np.argsort(-row)[: self.max_tags]
            keep = [self._numbers[i] for i in order if row[i] >= row[order[0]] - self.margin]
            results.append(Tagging(sorted(keep)))
        return results

    def tag(self, text: str) -> Tagging:
        return self.tag_many([text])[0]
