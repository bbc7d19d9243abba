"""Reading data files the same way everywhere: strict UTF-8, JSON and JSONL with broken lines reported, and
the `ReadReport` / `Reading` pair that says what one pass over a file read and skipped; and the private
directories and files that hold patients' words or full prompts.

Encoding is strict UTF-8: the first byte that is not UTF-8 raises `DataFormatError` naming the file and the
byte offset. A wrongly encoded file (Latin-1, GBK) would otherwise be read as silently corrupted medical
text, so it is refused as a whole, and the offset says where to look."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from clinrag.core.errors import DataFormatError

# Reasons for skipping, phrased to read after a count: "skipped 3 broken lines: 17, 18, 40".
BROKEN_LINES = "broken lines"
NOT_OBJECTS = "lines that are not JSON objects"
INVALID_RECORDS = "records with missing or invalid fields"
DUPLICATE_IDS = "records with a duplicate id"

T = TypeVar("T")
P = TypeVar("P")
M = TypeVar("M", bound=BaseModel)


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
    """An iterable over one source; `report` describes the latest (or current) pass. Each iteration starts
    a fresh report; a pass that yields nothing raises `DataFormatError` ("empty corpus") when it ends."""

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


# --- paths ----------------------------------------------------------------------------------------------


def existing(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise DataFormatError(f"{path}: no such file or directory")
    return path


def existing_file(path: str | Path) -> Path:
    path = existing(path)
    if not path.is_file():
        raise DataFormatError(f"{path}: not a file")
    return path


def data_file(path: str | Path, default_name: str | None = None) -> Path:
    """`path` itself when it is a file, or `default_name` inside it when it is a directory."""
    path = Path(path)
    if path.is_dir() and default_name is not None:
        path = path / default_name
    if not path.exists():
        raise DataFormatError(f"{path}: no such file")
    if not path.is_file():
        raise DataFormatError(f"{path}: not a file")
    return path


# --- private directories and files ---------------------------------------------------------------------

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def private_dir(path: str | Path) -> Path:
    """`path` as a directory, created with its missing parents owner-only (0700): clinrag's home, run
    directories and bases hold patients' words. A directory that exists keeps its mode (it may be one the
    user shares on purpose). `OSError` when it cannot be created (`NotADirectoryError` when a file is in
    the way)."""
    path = Path(path)
    missing = [folder for folder in [path, *path.parents] if not folder.exists()]
    for folder in reversed(missing):
        with contextlib.suppress(FileExistsError):  # created meanwhile by another process
            folder.mkdir(mode=PRIVATE_DIR_MODE)
    if not path.is_dir():
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(path))
    return path


def private_file(path: str | Path) -> Path:
    """`path` created empty if missing, owner-only (0600), and checked writable; a file of ours that exists
    loses any group and other access (an older clinrag created them readable by all; another user's file is
    theirs to share). `OSError` when it cannot be created or written (`IsADirectoryError` when a directory
    is in the way)."""
    path = Path(path)
    handle = os.open(path, os.O_WRONLY | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        found = os.fstat(handle)
        mode = stat.S_IMODE(found.st_mode)
        if mode & 0o077 and found.st_uid == os.geteuid():
            os.fchmod(handle, mode & ~0o077)
    finally:
        os.close(handle)
    return path


def os_reason(exc: OSError) -> str:
    """An `OSError` in a few words for a one-line message: "Permission denied: /home/x/.lock"."""
    if exc.strerror is None:
        return str(exc)
    return f"{exc.strerror}: {exc.filename}" if exc.filename is not None else exc.strerror


# --- text and JSON --------------------------------------------------------------------------------------


def decode(data: bytes, path: Path, offset: int = 0) -> str:
    """Strict UTF-8 (a leading byte-order mark is dropped); `offset` is where `data` starts in the file."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{path}: not UTF-8 at byte offset {offset + error.start}") from None
    return text.removeprefix("\ufeff") if offset == 0 else text


def read_text(path: Path) -> str:
    return decode(path.read_bytes(), path)


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise DataFormatError(
            f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None


# --- JSONL ----------------------------------------------------------------------------------------------


def read_jsonl(path: str | Path) -> Reading[tuple[int, dict[str, Any]]]:
    """(line number, record) for every line holding a JSON object; blank lines are ignored, other lines are
    skipped and reported."""
    path = existing_file(path)
    return Reading(path, lambda report: jsonl_records(path, report))


def valid_records(reading: Reading[tuple[P, Any]], model: type[M]) -> Iterator[tuple[P, M]]:
    """The records of `reading` that `model` validates, each with its place (a line number); every other one
    is skipped into the reading's report of this pass (`INVALID_RECORDS`)."""
    for place, raw in reading:
        try:
            record = model.model_validate(raw)
        except ValidationError:
            reading.report.skip(INVALID_RECORDS, place)
            continue
        yield place, record


def jsonl_records(path: Path, report: ReadReport) -> Iterator[tuple[int, dict[str, Any]]]:
    """The records of `read_jsonl`, counted and skipped into `report`."""
    offset = 0
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            line = decode(raw, path, offset)
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
