"""Reading any knowledge source into raw knowledge-base items (`SourceItem`); no model is involved here.

The readers are one module per format under `clinrag.knowledge.readers`, each registered in
`clinrag.knowledge.formats.SOURCES`; this module recognises a source's format and reads it, and re-exports
the readers' public names. Every reader takes a path and returns a `Reading`: iterating it yields items
lazily, and its `report` (a `ReadReport`) says afterwards how many records were read, how many items came
out, and what was skipped where and why — e.g. "skipped 3 broken lines: 17, 18, 40". Each iteration starts
a fresh report.

Failure policy:
- a missing file (or directory) raises `DataFormatError` when the reader is called;
- a broken record (a line that is not JSON, a record with missing fields, an unusable explanation) is skipped
  and reported, never fatal;
- encoding is strict UTF-8 (see `clinrag.core.files`): the first byte that is not UTF-8 raises
  `DataFormatError` naming the file and the byte offset;
- a source that yields no item at all raises `DataFormatError` ("empty corpus") when iteration ends.

Item ids are stable across reads: they come from the source name and the record's own identifier (MedMCQA
id, PubMed id) or its line number in the file, plus a chunk index where a text is chunked."""

from __future__ import annotations

from pathlib import Path

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.files import BROKEN_LINES, Reading, ReadReport, existing, read_jsonl
from clinrag.knowledge.chunking import DEFAULT_MAX_SIZE, DEFAULT_OVERLAP
from clinrag.knowledge.formats import SOURCES, SourceFormat, sample
from clinrag.knowledge.items import SourceItem
from clinrag.knowledge.readers.jsonl import NO_TEXT, read_text_records
from clinrag.knowledge.readers.medmcqa import NO_EXPLANATION, read_medmcqa
from clinrag.knowledge.readers.medqa import read_medqa
from clinrag.knowledge.readers.pubmedqa import read_pubmedqa
from clinrag.knowledge.readers.text import EMPTY_FILES, read_text_corpus

__all__ = [
    "BROKEN_LINES",
    "EMPTY_FILES",
    "NO_EXPLANATION",
    "NO_TEXT",
    "ReadReport",
    "Reading",
    "SourceItem",
    "detect_format",
    "read_jsonl",
    "read_medmcqa",
    "read_medqa",
    "read_pubmedqa",
    "read_source",
    "read_text_corpus",
    "read_text_records",
]


def detect_format(path: str | Path) -> str:
    """Recognise a source by its content: MedMCQA (opa..opd, cop) and MedQA (question, options, answer)
    records, PubMedQA's JSON object (CONTEXTS), other JSONL, or plain text (.txt/.md, or a directory)."""
    path = existing(path)
    found = sample(path)
    if path.is_file() and not found.head.strip():
        raise DataFormatError(f"{path}: empty corpus (the file is empty)")
    formats = _path_formats().values()
    for source in sorted(formats, key=lambda f: (f.rank, f.name)):
        if source.recognise is not None and source.recognise(found):
            return source.name
    for source in formats:
        if path.suffix.lower() in source.suffixes:
            return source.name
    raise DataFormatError(
        f"{path}: unrecognised source format (expected JSONL, PubMedQA JSON, DDXPlus "
        "release_conditions.json or .txt)"
    )


def read_source(
    path: str | Path,
    *,
    reader: str | None = None,
    max_size: int = DEFAULT_MAX_SIZE,
    overlap: int = DEFAULT_OVERLAP,
) -> Reading[SourceItem]:
    """The items of a source, with its reader chosen by `reader` (a format name) or recognised by
    `detect_format`. MedMCQA gives its explanations; MedQA-style files with a `context` list are named after
    the file; `packaged:NAME` reads knowledge shipped in an installed package (see
    `clinrag.knowledge.readers.packaged`)."""
    spec = str(path)
    for source in SOURCES.items().values():
        if source.prefix is not None and spec.startswith(source.prefix):
            return source.read(Path(spec), max_size=max_size, overlap=overlap)
    path = existing(path)
    formats = _path_formats()
    chosen = reader or detect_format(path)
    if chosen not in formats:
        raise InvalidInputError(f"unknown reader {chosen!r}; expected one of {', '.join(formats)}")
    return formats[chosen].read(path, max_size=max_size, overlap=overlap)


def _path_formats() -> dict[str, SourceFormat]:
    """The formats a path can be read with, by name (sorted)."""
    return {name: source for name, source in sorted(SOURCES.items().items()) if source.prefix is None}
