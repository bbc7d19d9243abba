"""MedQA-style JSONL (question, options, answer, answer_idx): MCQ items with the correct answer only. A
`context` list of facts, as in MediQ and iCraft-MD, is put before the question."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from clinrag.core.files import INVALID_RECORDS, Reading, ReadReport, existing_file, jsonl_records
from clinrag.core.provenance import Origin, fingerprint
from clinrag.knowledge.formats import SNIFF_LINES, Sample, SourceFormat, head, json_object, register
from clinrag.knowledge.items import ANSWER_MISMATCH, SourceItem, mcq_item


class MedQARecord(BaseModel):
    question: str = Field(min_length=1)
    options: dict[str, str] = Field(min_length=2)
    answer: str = Field(min_length=1)
    answer_idx: str | None = None
    context: list[str] = Field(default_factory=list)  # MediQ / iCraft-MD: the vignette as atomic facts
    meta_info: str | None = None


def read_medqa(path: str | Path, *, source: str = "medqa") -> Reading[SourceItem]:
    """MCQ items from a MedQA-style JSONL file (question, options, answer, answer_idx; a `context` list of
    facts, as in MediQ and iCraft-MD, is put before the question). Ids are "<source>:<line>"."""
    path = existing_file(path)

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        file = fingerprint(path)
        for line, raw in jsonl_records(path, report):
            try:
                record = MedQARecord.model_validate(raw)
            except ValidationError:
                report.skip(INVALID_RECORDS, line)
                continue
            if record.answer not in record.options.values() or (
                record.answer_idx is not None and record.options.get(record.answer_idx) != record.answer
            ):
                report.skip(ANSWER_MISMATCH, line)
                continue
            question = " ".join(part.strip() for part in [*record.context, record.question] if part.strip())
            provenance = {
                "file": path.name,
                "line": line,
                "answer_idx": record.answer_idx,
                "exam": record.meta_info,
            }
            origin = Origin(file, str(line))
            yield mcq_item(f"{source}:{line}", question, record.answer.strip(), source, provenance, origin)

    return Reading(path, produce)


def _read(path: Path, *, max_size: int, overlap: int) -> Reading[SourceItem]:
    # Files whose records carry a `context` (MediQ, iCraft-MD) are named after the file.
    lines = head(path).splitlines()[:SNIFF_LINES]
    with_context = any("context" in record for record in map(json_object, lines) if record is not None)
    return read_medqa(path, source=path.stem if with_context else "medqa")


def _recognise(sample: Sample) -> bool:
    return sample.record is not None and {"question", "options", "answer"} <= sample.record.keys()


register(SourceFormat("medqa", _read, _recognise, rank=20))
