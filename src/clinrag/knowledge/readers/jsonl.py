"""Any other JSONL whose records carry their text in a `text` field, or in `content` as MedRAG distributes its
corpora (StatPearls, textbooks, PubMed snippets: `{"id", "title", "content", "contents"}`): chunked text
items."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from clinrag.core.files import Reading, ReadReport, existing_file, jsonl_records
from clinrag.core.provenance import Origin, fingerprint
from clinrag.knowledge.chunking import DEFAULT_MAX_SIZE, DEFAULT_OVERLAP, chunk_text
from clinrag.knowledge.formats import Sample, SourceFormat, register
from clinrag.knowledge.items import SourceItem

NO_TEXT = "records without text"
TEXT_FIELDS = ("text", "content")  # the first a record has holds its text (`content`: MedRAG's corpora)


def read_text_records(
    path: str | Path, *, max_size: int = DEFAULT_MAX_SIZE, overlap: int = DEFAULT_OVERLAP
) -> Reading[SourceItem]:
    """Text items from a JSONL file whose records carry a `text` (or `content`) field, chunked; the source is
    the file stem, and a record's own `id` and `title`, when present, go to the provenance."""
    path = existing_file(path)
    source = path.stem

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        file = fingerprint(path)
        for line, record in jsonl_records(path, report):
            text = next((record[field] for field in TEXT_FIELDS if field in record), None)
            chunks = chunk_text(text, max_size, overlap) if isinstance(text, str) else []
            if not chunks:
                report.skip(NO_TEXT, line)
                continue
            extra = {key: record[key] for key in ("id", "title") if isinstance(record.get(key), str | int)}
            for index, chunk in enumerate(chunks):
                provenance = {"file": path.name, "line": line, **extra, "chunk": index}
                origin = Origin(file, str(line))
                yield SourceItem(f"{source}:{line}:{index}", "text", chunk, source, provenance, origin=origin)

    return Reading(path, produce)


def _recognise(sample: Sample) -> bool:
    return sample.record is not None


# A .jsonl file with no parsable line is still JSONL: the reader reports the broken lines.
register(SourceFormat("jsonl", read_text_records, _recognise, rank=30, suffixes=frozenset({".jsonl"})))
