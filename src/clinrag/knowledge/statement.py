"""A knowledge-base item: one declarative statement with its ICD-10 chapter tags."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from clinrag.core.provenance import Origin


class Statement(BaseModel):
    """`tags` are ICD-10-CM chapter numbers (1–22); an empty list means the tagger found none (untagged).
    `origin` is the source file and record the statement was derived from (None: packaged knowledge, or a
    base built before origins were recorded)."""

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    tags: list[int] = Field(default_factory=list)
    source: str
    provenance: dict[str, Any] = Field(default_factory=dict)
    origin: Origin | None = None
