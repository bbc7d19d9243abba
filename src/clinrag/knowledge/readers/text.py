"""Plain text: a .txt/.md file, or every .txt file under a directory, chunked."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from clinrag.core.files import Reading, ReadReport, existing, read_text
from clinrag.core.provenance import Origin, fingerprint
from clinrag.knowledge.chunking import DEFAULT_MAX_SIZE, DEFAULT_OVERLAP, chunk_text
from clinrag.knowledge.formats import Sample, SourceFormat, register
from clinrag.knowledge.items import SourceItem

EMPTY_FILES = "empty files"


def read_text_corpus(
    path: str | Path, *, max_size: int = DEFAULT_MAX_SIZE, overlap: int = DEFAULT_OVERLAP
) -> Reading[SourceItem]:
    """Chunks of a .txt file, or of every .txt file under a directory (in sorted path order). The source is
    the file stem or the directory name; ids are "<source>:<chunk>" for a file and
    "<source>:<relative path>:<chunk>" for a directory."""
    path = existing(path)

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        if path.is_file():
            yield from _text_file_items(path, None, path.stem, report, max_size, overlap)
            return
        for file in sorted(p for p in path.rglob("*.txt") if p.is_file()):
            yield from _text_file_items(
                file, file.relative_to(path).as_posix(), path.name, report, max_size, overlap
            )

    return Reading(path, produce)


def _text_file_items(
    file: Path, relative: str | None, source: str, report: ReadReport, max_size: int, overlap: int
) -> Iterator[SourceItem]:
    chunks = chunk_text(read_text(file), max_size, overlap)
    report.records += 1
    if not chunks:
        report.skip(EMPTY_FILES, relative or file.name)
    prefix = f"{source}:{relative}" if relative else source
    origin = Origin(fingerprint(file), "0") if chunks else None  # the whole file is one record
    for index, chunk in enumerate(chunks):
        provenance = {"file": relative or file.name, "chunk": index}
        yield SourceItem(f"{prefix}:{index}", "text", chunk, source, provenance, origin=origin)


def _recognise(sample: Sample) -> bool:
    return sample.path.is_dir()


register(SourceFormat("text", read_text_corpus, _recognise, rank=0, suffixes=frozenset({".txt", ".md"})))
