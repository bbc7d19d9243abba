"""PubMedQA's JSON object keyed by PMID: text items from the abstract paragraphs and the long answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clinrag.core.errors import DataFormatError
from clinrag.core.files import INVALID_RECORDS, Reading, ReadReport, existing_file, read_json
from clinrag.core.provenance import Origin, fingerprint
from clinrag.knowledge.formats import Sample, SourceFormat, register
from clinrag.knowledge.items import SourceItem

EMPTY_PASSAGES = "empty passages"


class PubMedQARecord(BaseModel):
    model_config = ConfigDict(populate_by_name=True)

    question: str = Field(alias="QUESTION")
    contexts: list[str] = Field(alias="CONTEXTS")
    labels: list[str] = Field(default_factory=list, alias="LABELS")
    meshes: list[str] = Field(default_factory=list, alias="MESHES")
    year: str | None = Field(default=None, alias="YEAR")
    long_answer: str | None = Field(default=None, alias="LONG_ANSWER")
    final_decision: str | None = None


def read_pubmedqa(path: str | Path) -> Reading[SourceItem]:
    """Text items from PubMedQA's JSON object keyed by PMID: one per abstract paragraph
    ("pubmedqa:<pmid>:<paragraph>") and one for the long answer ("pubmedqa:<pmid>:long_answer"), with the
    PMID, year, MeSH terms, the paragraph's section label, the question and the decision as provenance."""
    path = existing_file(path)

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        document = read_json(path)
        if not isinstance(document, dict):
            raise DataFormatError(f"{path}: expected a JSON object keyed by PMID")
        file = fingerprint(path)
        for pmid, raw in document.items():
            try:
                record = PubMedQARecord.model_validate(raw)
            except ValidationError:
                report.skip(INVALID_RECORDS, pmid)
                continue
            report.records += 1
            yield from _pubmedqa_items(pmid, record, Origin(file, pmid), report)

    return Reading(path, produce)


def _pubmedqa_items(
    pmid: str, record: PubMedQARecord, origin: Origin, report: ReadReport
) -> Iterator[SourceItem]:
    base = {
        "pmid": pmid,
        "year": record.year,
        "mesh": record.meshes,
        "question": record.question,
        "final_decision": record.final_decision,
    }
    passages = [
        (str(index), text, record.labels[index] if index < len(record.labels) else None)
        for index, text in enumerate(record.contexts)
    ]
    passages.append(("long_answer", record.long_answer or "", "LONG_ANSWER"))
    for key, text, section in passages:
        if not text.strip():
            report.skip(EMPTY_PASSAGES, f"{pmid}:{key}")
            continue
        provenance = {
            key_: value for key_, value in {**base, "section": section}.items() if value is not None
        }
        yield SourceItem(
            f"pubmedqa:{pmid}:{key}", "text", text.strip(), "pubmedqa", provenance, origin=origin
        )


def _read(path: Path, *, max_size: int, overlap: int) -> Reading[SourceItem]:
    return read_pubmedqa(path)


def _recognise(sample: Sample) -> bool:
    return sample.head.lstrip().startswith("{") and '"CONTEXTS"' in sample.head


register(SourceFormat("pubmedqa", _read, _recognise, rank=40))
