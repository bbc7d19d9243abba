"""Readers that turn corpora into raw knowledge-base items (`SourceItem`); no model is involved here.

Every reader takes a path and returns a `Reading`: iterating it yields items lazily, and its `report` (a
`ReadReport`) says afterwards how many records were read, how many items came out, and what was skipped
where and why — e.g. "skipped 3 broken lines: 17, 18, 40". Each iteration starts a fresh report.

Failure policy:
- a missing file (or directory) raises `DataFormatError` when the reader is called;
- a broken record (a line that is not JSON, a record with missing fields, an unusable explanation) is skipped
  and reported, never fatal;
- encoding is strict UTF-8: the first byte that is not UTF-8 raises `DataFormatError` naming the file and
  the byte offset. A wrongly encoded file (Latin-1, GBK) would otherwise be read as silently corrupted
  medical text, so it is refused as a whole, and the offset says where to look;
- a source that yields no item at all raises `DataFormatError` ("empty corpus") when iteration ends.

Item ids are stable across reads: they come from the source name and the record's own identifier (MedMCQA
id, PubMed id) or its line number in the file, plus a chunk index where a text is chunked."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.knowledge.chunking import DEFAULT_MAX_SIZE, DEFAULT_OVERLAP, chunk_text

ItemKind = Literal["mcq", "text", "record"]
SourceFormat = Literal["medqa", "medmcqa", "pubmedqa", "jsonl", "text", "ddxplus-conditions"]
_FORMATS: tuple[SourceFormat, ...] = get_args(SourceFormat)

# Reasons for skipping, phrased to read after a count: "skipped 3 broken lines: 17, 18, 40".
BROKEN_LINES = "broken lines"
NOT_OBJECTS = "lines that are not JSON objects"
INVALID_RECORDS = "records with missing or invalid fields"
ANSWER_MISMATCH = "records whose answer is not among their options"
DUPLICATE_IDS = "records with a duplicate id"
NO_EXPLANATION = "records without a usable explanation"
NO_TEXT = "records without text"
EMPTY_PASSAGES = "empty passages"
EMPTY_FILES = "empty files"

MIN_EXPLANATION_WORDS = 5
_HEAD_BYTES = 64 * 1024
_SNIFF_LINES = 5
_TEXT_SUFFIXES = frozenset({".txt", ".md"})
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

T = TypeVar("T")


@dataclass(frozen=True)
class SourceItem:
    """A raw item: for kind "mcq", `question` and its correct `answer` (never the wrong options), with `text`
    combining both; for kind "text", a passage in `text`; for kind "record", a structured record (a
    terminology entry, a disease-table row) as text, with its facts already written as declarative
    `statements` and, where the record carries a code, its ICD-10-CM chapter `tags`."""

    id: str
    kind: ItemKind
    text: str
    source: str
    provenance: dict[str, Any] = field(default_factory=dict)
    question: str | None = None
    answer: str | None = None
    statements: tuple[str, ...] = ()
    tags: tuple[int, ...] = ()


@dataclass
class ReadReport:
    """What one pass over a source read and skipped. `skipped` maps a reason to where it happened (line
    numbers, or record keys for sources that are not line-based)."""

    path: str
    records: int = 0
    items: int = 0
    skipped: dict[str, list[int | str]] = field(default_factory=dict)
    complete: bool = False  # False while reading, or when the consumer stopped early

    def skip(self, reason: str, where: int | str) -> None:
        self.skipped.setdefault(reason, []).append(where)

    @property
    def skipped_count(self) -> int:
        return sum(len(places) for places in self.skipped.values())

    def summary(self, max_listed: int = 10) -> str:
        """One line for a CLI or a build report, listing at most `max_listed` places per reason."""
        head = f"{self.path}: {self.records} records read, {self.items} items"
        if not self.complete:
            head += " (stopped before the end)"
        skips = [
            f"skipped {len(places)} {reason}: {_listing(places, max_listed)}"
            for reason, places in self.skipped.items()
        ]
        return "; ".join([head, *skips])


def _listing(places: list[int | str], max_listed: int) -> str:
    shown = ", ".join(str(place) for place in places[:max_listed])
    hidden = len(places) - max_listed
    return f"{shown}, … (+{hidden} more)" if hidden > 0 else shown


class Reading(Generic[T]):
    """An iterable over one source; `report` describes the latest (or current) pass."""

    def __init__(self, path: Path, produce: Callable[[ReadReport], Iterator[T]]) -> None:
        self.path = path
        self._produce = produce
        self.report = ReadReport(str(path))

    def __iter__(self) -> Iterator[T]:
        report = self.report = ReadReport(str(self.path))
        for value in self._produce(report):
            report.items += 1
            yield value
        report.complete = True
        if report.items == 0:
            raise DataFormatError(f"empty corpus: no valid records in {report.summary()}")


# --- files and encodings ------------------------------------------------------------------------------


def _existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise DataFormatError(f"{path}: no such file or directory")
    return path


def _existing_file(path: str | Path) -> Path:
    path = _existing(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: not a file")
    return path


def _decode(data: bytes, path: Path, offset: int = 0) -> str:
    """Strict UTF-8 (a leading byte-order mark is dropped); `offset` is where `data` starts in the file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{path}: not UTF-8 at byte offset {offset + error.start}") from None
    return text.removeprefix("\ufeff") if offset == 0 else text


def _read_text(path: Path) -> str:
    return _decode(path.read_bytes(), path)


def _load_json_document(path: Path) -> Any:
    try:
        return json.loads(_read_text(path))
    except json.JSONDecodeError as error:
        raise DataFormatError(
            f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None


# --- generic JSONL ------------------------------------------------------------------------------------


def read_jsonl(path: str | Path) -> Reading[tuple[int, dict[str, Any]]]:
    """(line number, record) for every line holding a JSON object; blank lines are ignored, other lines are
    skipped and reported."""
    path = _existing_file(path)
    return Reading(path, lambda report: _jsonl_records(path, report))


def _jsonl_records(path: Path, report: ReadReport) -> Iterator[tuple[int, dict[str, Any]]]:
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = _decode(raw, path, offset)
            offset += len(raw)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                report.skip(BROKEN_LINES, number)
                continue
            if not isinstance(record, dict):
                report.skip(NOT_OBJECTS, number)
                continue
            report.records += 1
            yield number, record


def read_text_records(
    path: str | Path, *, max_size: int = DEFAULT_MAX_SIZE, overlap: int = DEFAULT_OVERLAP
) -> Reading[SourceItem]:
    """Text items from a JSONL file whose records carry a `text` field (chunked); the source is the file
    stem, and a record's own `id` and `title`, when present, go to the provenance."""
    path = _existing_file(path)
    source = path.stem

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        for line, record in _jsonl_records(path, report):
            text = record.get("text")
            chunks = chunk_text(text, max_size, overlap) if isinstance(text, str) else []
            if not chunks:
                report.skip(NO_TEXT, line)
                continue
            extra = {key: record[key] for key in ("id", "title") if isinstance(record.get(key), str | int)}
            for index, chunk in enumerate(chunks):
                provenance = {"file": path.name, "line": line, **extra, "chunk": index}
                yield SourceItem(f"{source}:{line}:{index}", "text", chunk, source, provenance)

    return Reading(path, produce)


# --- plain text ---------------------------------------------------------------------------------------


def read_text_corpus(
    path: str | Path, *, max_size: int = DEFAULT_MAX_SIZE, overlap: int = DEFAULT_OVERLAP
) -> Reading[SourceItem]:
    """Chunks of a .txt file, or of every .txt file under a directory (in sorted path order). The source is
    the file stem or the directory name; ids are "<source>:<chunk>" for a file and
    "<source>:<relative path>:<chunk>" for a directory."""
    path = _existing(path)

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
    chunks = chunk_text(_read_text(file), max_size, overlap)
    report.records += 1
    if not chunks:
        report.skip(EMPTY_FILES, relative or file.name)
    prefix = f"{source}:{relative}" if relative else source
    for index, chunk in enumerate(chunks):
        yield SourceItem(
            f"{prefix}:{index}", "text", chunk, source, {"file": relative or file.name, "chunk": index}
        )


# --- MedQA --------------------------------------------------------------------------------------------


class _MedQARecord(BaseModel):
    question: str = Field(min_length=1)
    options: dict[str, str] = Field(min_length=2)
    answer: str = Field(min_length=1)
    answer_idx: str | None = None
    context: list[str] = Field(default_factory=list)  # MediQ / iCraft-MD: the vignette as atomic facts
    meta_info: str | None = None


def read_medqa(path: str | Path, *, source: str = "medqa") -> Reading[SourceItem]:
    """MCQ items from a MedQA-style JSONL file (question, options, answer, answer_idx; a `context` list of
    facts, as in MediQ and iCraft-MD, is put before the question). Ids are "<source>:<line>"."""
    path = _existing_file(path)

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        for line, raw in _jsonl_records(path, report):
            try:
                record = _MedQARecord.model_validate(raw)
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
            yield _mcq_item(f"{source}:{line}", question, record.answer.strip(), source, provenance)

    return Reading(path, produce)


def _mcq_item(
    item_id: str, question: str, answer: str, source: str, provenance: dict[str, Any]
) -> SourceItem:
    kept = {key: value for key, value in provenance.items() if value is not None}
    return SourceItem(item_id, "mcq", f"{question}\nAnswer: {answer}", source, kept, question, answer)


# --- MedMCQA ------------------------------------------------------------------------------------------


class _MedMCQARecord(BaseModel):
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
    path = _existing_file(path)
    if not kinds or not set(kinds) <= {"mcq", "text"}:
        raise InvalidInputError(f"kinds must be a non-empty selection of 'mcq' and 'text', got {kinds!r}")

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        seen: set[str] = set()
        for line, raw in _jsonl_records(path, report):
            try:
                record = _MedMCQARecord.model_validate(raw)
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
                report,
                kinds,
                min_words,
                max_size,
                overlap,
            )

    return Reading(path, produce)


def _medmcqa_items(
    record: _MedMCQARecord,
    answer: str,
    line: int,
    path: Path,
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
        yield _mcq_item(
            f"medmcqa:{record.id}", record.question.strip(), answer.strip(), "medmcqa", provenance
        )
    if "text" in kinds:
        explanation = record.exp or ""
        chunks = chunk_text(_ANSWER_MARKER.sub("", explanation), max_size, overlap)
        if len(explanation.split()) < min_words or not chunks:
            report.skip(NO_EXPLANATION, line)
            return
        kept = {key: value for key, value in provenance.items() if value is not None}
        for index, chunk in enumerate(chunks):
            yield SourceItem(
                f"medmcqa:{record.id}:exp:{index}", "text", chunk, "medmcqa", {**kept, "chunk": index}
            )


# --- PubMedQA -----------------------------------------------------------------------------------------


class _PubMedQARecord(BaseModel):
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
    path = _existing_file(path)

    def produce(report: ReadReport) -> Iterator[SourceItem]:
        document = _load_json_document(path)
        if not isinstance(document, dict):
            raise DataFormatError(f"{path}: expected a JSON object keyed by PMID")
        for pmid, raw in document.items():
            try:
                record = _PubMedQARecord.model_validate(raw)
            except ValidationError:
                report.skip(INVALID_RECORDS, pmid)
                continue
            report.records += 1
            yield from _pubmedqa_items(pmid, record, report)

    return Reading(path, produce)


def _pubmedqa_items(pmid: str, record: _PubMedQARecord, report: ReadReport) -> Iterator[SourceItem]:
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
        yield SourceItem(f"pubmedqa:{pmid}:{key}", "text", text.strip(), "pubmedqa", provenance)


# --- dispatch -----------------------------------------------------------------------------------------


def detect_format(path: str | Path) -> SourceFormat:
    """Recognise a source by its content: MedMCQA (opa..opd, cop) and MedQA (question, options, answer)
    records, PubMedQA's JSON object (CONTEXTS), other JSONL, or plain text (.txt/.md, or a directory)."""
    path = _existing(path)
    if path.is_dir():
        return "text"
    with path.open("rb") as handle:
        head = handle.read(_HEAD_BYTES).decode(
            "utf-8", errors="ignore"
        )  # only to recognise; readers are strict
    if not head.strip():
        raise DataFormatError(f"{path}: empty corpus (the file is empty)")
    lines = [line for line in head.splitlines() if line.strip()][:_SNIFF_LINES]
    record = next((parsed for parsed in map(_json_object, lines) if parsed is not None), None)
    if record is not None:
        if {"opa", "opb", "opc", "opd", "cop"} <= record.keys():
            return "medmcqa"
        if {"question", "options", "answer"} <= record.keys():
            return "medqa"
        return "jsonl"
    if head.lstrip().startswith("{") and '"CONTEXTS"' in head:
        return "pubmedqa"
    if head.lstrip().startswith("{") and '"cond-name-eng"' in head:
        return "ddxplus-conditions"
    if path.suffix.lower() == ".jsonl":
        return "jsonl"  # no line parsed: the reader reports the broken lines
    if path.suffix.lower() in _TEXT_SUFFIXES:
        return "text"
    raise DataFormatError(
        f"{path}: unrecognised source format (expected JSONL, PubMedQA JSON, DDXPlus "
        "release_conditions.json or .txt)"
    )


def _json_object(line: str) -> dict[str, Any] | None:
    try:
        value = json.loads(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def read_source(
    path: str | Path,
    *,
    reader: SourceFormat | None = None,
    max_size: int = DEFAULT_MAX_SIZE,
    overlap: int = DEFAULT_OVERLAP,
) -> Reading[SourceItem]:
    """The items of a source, with its reader chosen by `reader` or recognised by `detect_format`. MedMCQA
    gives its explanations; MedQA-style files with a `context` list are named after the file;
    `packaged:NAME` reads knowledge shipped in an installed package (see `clinrag.knowledge.packaged`)."""
    # Imported here: these readers build on this module.
    from clinrag.knowledge.ddxplus import read_ddxplus_conditions
    from clinrag.knowledge.packaged import is_packaged, read_packaged

    if is_packaged(path):
        return read_packaged(str(path))
    path = _existing(path)
    chosen = reader or detect_format(path)
    if chosen not in _FORMATS:
        raise InvalidInputError(f"unknown reader {chosen!r}; expected one of {', '.join(_FORMATS)}")
    if chosen == "medqa":
        return read_medqa(path, source=path.stem if _first_record_has(path, "context") else "medqa")
    if chosen == "medmcqa":
        return read_medmcqa(path, max_size=max_size, overlap=overlap)
    if chosen == "pubmedqa":
        return read_pubmedqa(path)
    if chosen == "jsonl":
        return read_text_records(path, max_size=max_size, overlap=overlap)
    if chosen == "ddxplus-conditions":
        return read_ddxplus_conditions(path)
    return read_text_corpus(path, max_size=max_size, overlap=overlap)


def _first_record_has(path: Path, key: str) -> bool:
    with path.open("rb") as handle:
        lines = handle.read(_HEAD_BYTES).decode("utf-8", errors="ignore").splitlines()
    return any(key in record for record in map(_json_object, lines[:_SNIFF_LINES]) if record is not None)
