"""MedMCQA JSONL (opa..opd, cop, exp): text items from the explanations and/or MCQ items."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from clinrag.core.errors import InvalidInputError
from clinrag.core.files import (
    DUPLICATE_IDS,
    INVALID_RECORDS,
    Reading,
    ReadReport,
    existing_file,
    jsonl_records,
)
from clinrag.core.provenance import Origin, fingerprint
from clinrag.knowledge.chunking import DEFAULT_MAX_SIZE, DEFAULT_OVERLAP, chunk_text
from clinrag.knowledge.formats import Sample, SourceFormat, register
from clinrag.knowledge.items import ItemKind, SourceItem, mcq_item

NO_EXPLANATION = "records without a usable explanation"
MIN_EXPLANATION_WORDS = 5
# MedMCQA explanations often open with the answer letter ("Ans-a.", "Ans: B.", "Ans. is 'a' i.e.,"),
# which means nothing once the options are gone; the rest of the explanation is kept.
_ANSWER_MARKER = re.compile(
    r"""^\s* ans(?:wer)?\b [\s.:\-]* (?:is\b\s*)?         # "Ans.", "Answer-", "Ans. is"
    (?: ['"(]?[a-d]['")]? (?=\s*[.):,(]|\s+i\.?e|\s*$)   # a letter followed by punctuation or "i.e."
      | [b-d](?=\s)                                      # B, C and D before a space are not words
    )?
    [\s.:,)\-]* (?:i\.?\s?e\.?,?\s*)?                    # what separates the marker from the text
    """,
    re.IGNORECASE | re.VERBOSE,
)


class MedMCQARecord(BaseModel):
    id: str = Field(min_length=1)
    question: str = Field(min_length=1)
    opa: str
    opb: str
    opc: str
    opd: str
    cop: int
    exp: str | None = None
    subject_name: str | None = None
    topic_name: str | None = None


def read_medmcqa(
    path: str | Path,
    *,
    kinds: Collection[ItemKind] = ("text",),
    cop_base: Literal[0, 1] = 1,
    min_words: int = MIN_EXPLANATION_WORDS,
    max_size: int = DEFAULT_MAX_SIZE,
    overlap: int = DEFAULT_OVERLAP,
) -> Reading[SourceItem]:
    """Items from MedMCQA JSONL: "text" items from the explanation `exp` (chunked; explanations with fewer
    than `min_words` words are skipped), and/or "mcq" items (question + correct option). `cop` is the
    correct option's position, 1-based in the MIRAGE/original release (`cop_base=1`); the Hugging Face
    export counts from 0. Ids: "medmcqa:<id>" for the MCQ, "medmcqa:<id>:exp:<chunk>" for explanations."""
    path = existing_file(path)
    if not kinds or not set(kinds) <= {"mcq", "text"}:
        raise InvalidInputError(f"kinds must be a non-empty selection of 'mcq' and 'text', got {kinds!r}")

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        seen: set[str] = set()
        file = fingerprint(path)
        for line, raw in jsonl_records(path, report):
            try:
                record = MedMCQARecord.model_validate(raw)
            except ValidationError:
                report.skip(INVALID_RECORDS, line)
                continue
            options = [record.opa, record.opb, record.opc, record.opd]
            if not 0 <= record.cop - cop_base < len(options) or not options[record.cop - cop_base].strip():
                report.skip(INVALID_RECORDS, line)
                continue
            if record.id in seen:
                report.skip(DUPLICATE_IDS, line)
                continue
            seen.add(record.id)
            yield from _medmcqa_items(
                record,
                options[record.cop - cop_base],
                line,
                path,
                Origin(file, record.id),
                report,
                kinds,
                min_words,
                max_size,
                overlap,
            )

    return Reading(path, produce)


def _medmcqa_items(
    record: MedMCQARecord,
    answer: str,
    line: int,
    path: Path,
    origin: Origin,
    report: ReadReport,
    kinds: Collection[ItemKind],
    min_words: int,
    max_size: int,
    overlap: int,
) -> Iterator[SourceItem]:
    provenance = {
        "file": path.name,
        "line": line,
        "question_id": record.id,
        "subject": record.subject_name,
        "topic": record.topic_name,
    }
    if "mcq" in kinds:
        question = record.question.strip()
        yield mcq_item(f"medmcqa:{record.id}", question, answer.strip(), "medmcqa", provenance, origin)
    if "text" in kinds:
        explanation = record.exp or ""
        chunks = chunk_text(_ANSWER_MARKER.sub("", explanation), max_size, overlap)
        if len(explanation.split()) < min_words or not chunks:
            report.skip(NO_EXPLANATION, line)
            return
        kept = {key: value for key, value in provenance.items() if value is not None}
        for index, chunk in enumerate(chunks):
            yield SourceItem(
                f"medmcqa:{record.id}:exp:{index}",
                "text",
                chunk,
                "medmcqa",
                {**kept, "chunk": index},
                origin=origin,
            )


def _recognise(sample: Sample) -> bool:
    return sample.record is not None and {"opa", "opb", "opc", "opd", "cop"} <= sample.record.keys()


# As a knowledge source MedMCQA gives its explanations.
register(SourceFormat("medmcqa", read_medmcqa, _recognise, rank=10))
