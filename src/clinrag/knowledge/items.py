"""What every knowledge reader yields: raw knowledge-base items (`SourceItem`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from clinrag.core.provenance import Origin

ItemKind = Literal["mcq", "text", "record"]

# A reason for skipping, phrased to read after a count (see `clinrag.core.files.ReadReport`).
ANSWER_MISMATCH = "records whose answer is not among their options"


@dataclass(frozen=True)
class SourceItem:
    """A raw item: for kind "mcq", `question` and its correct `answer` (never the wrong options), with `text`
    combining both; for kind "text", a passage in `text`; for kind "record", a structured record (a
    terminology entry, a disease-table row) as text, with its facts already written as declarative
    `statements` and, where the record carries a code, its ICD-10-CM chapter `tags`. `origin` is the source
    file and record it was read from (None for knowledge shipped in a package)."""

    id: str
    kind: ItemKind
    text: str
    source: str
    provenance: dict[str, Any] = field(default_factory=dict)
    question: str | None = None
    answer: str | None = None
    statements: tuple[str, ...] = ()
    tags: tuple[int, ...] = ()
    origin: Origin | None = None


def mcq_item(
    item_id: str, question: str, answer: str, source: str, provenance: dict[str, Any], origin: Origin
) -> SourceItem:
    """An "mcq" item; provenance values that are None are left out."""
    kept = {key: value for key, value in provenance.items() if value is not None}
    text = f"{question}\nAnswer: {answer}"
    return SourceItem(item_id, "mcq", text, source, kept, question, answer, origin=origin)
