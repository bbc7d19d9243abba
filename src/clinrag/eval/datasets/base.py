"""What every dataset loader returns (`Dataset`), how one is registered (`DatasetSpec`), and the small file
helpers the loaders share.

Failure policy, the same as the corpus and patient loaders: a missing or unreadable file raises
`DataFormatError` naming it; a broken record is skipped and listed in `Dataset.report`; a file that yields no
case at all raises `DataFormatError`; two cases with one id raise `InvalidInputError`.

Conventions every loader follows:
- exam datasets (MCQ) keep the file's option letters as keys and `gold.answer` is a key;
- datasets with patient records use the option *texts* as keys, so an option key, `gold.answer`/`answers`,
  `gold.ddx` names and `Dataset.labels` values all live in one answer space;
- where a case describes the same patient as a record, the case id is the record id (leave-sample-out)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.models import Case
from clinrag.knowledge.sources import ReadReport
from clinrag.patients.record import PatientRecord

# Reasons for skipping, phrased to read after a count: "skipped 2 records with missing or invalid fields".
INVALID_RECORDS = "records with missing or invalid fields"
ANSWER_MISMATCH = "records whose answer is not among their options"
DUPLICATE_IDS = "records with a duplicate id"


@dataclass
class Dataset:
    """Cases to answer, plus (for patient datasets) the records a patient base is built from and each
    record's labels in the cases' answer space."""

    name: str
    cases: list[Case]
    records: list[PatientRecord] = field(default_factory=list)
    labels: dict[str, list[str]] = field(default_factory=dict)
    report: str = ""

    def experience(self, exclude: Iterable[str]) -> list[PatientRecord]:
        """The records whose id is not in `exclude` (the sampled test cases, for leave-sample-out)."""
        if isinstance(exclude, str):  # a bare id would be read as a set of characters
            exclude = [exclude]
        excluded = set(exclude)
        return [record for record in self.records if record.id not in excluded]


@dataclass(frozen=True)
class DatasetSpec:
    """A registered dataset. `default_path` is relative to a data root; for a `generated` dataset it is a
    generator spec (e.g. "synthetic:300:0") that `load` parses instead of a file, and no data root is
    needed."""

    name: str
    description: str
    default_path: str
    load: Callable[[Path], Dataset]
    generated: bool = False


# --- files ----------------------------------------------------------------------------------------------


def data_file(path: Path, default_name: str | None = None) -> Path:
    """`path` itself when it is a file, or `default_name` inside it when it is a directory."""
    if path.is_dir() and default_name is not None:
        path = path / default_name
    if not path.exists():
        raise DataFormatError(f"{path}: no such file")
    if not path.is_file():
        raise DataFormatError(f"{path}: not a file")
    return path


def read_text(path: Path) -> str:
    """Strict UTF-8: mis-encoded medical text would otherwise be read as silently corrupted."""
    try:
        return path.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as error:
        raise DataFormatError(f"{path}: not UTF-8 at byte offset {error.start}") from None


def read_json(path: Path) -> Any:
    try:
        return json.loads(read_text(path))
    except json.JSONDecodeError as error:
        raise DataFormatError(
            f"{path}: not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None


# --- finishing ------------------------------------------------------------------------------------------


def finish(
    name: str,
    cases: list[Case],
    readings: Iterable[ReadReport | str],
    *,
    records: list[PatientRecord] | None = None,
    labels: dict[str, list[str]] | None = None,
    notes: Iterable[str] = (),
) -> Dataset:
    """Check the cases (at least one, unique ids) and write the human report."""
    readings = list(readings)
    if not cases:
        details = "; ".join(r if isinstance(r, str) else r.summary() for r in readings)
        raise DataFormatError(f"{name}: no valid cases ({details})")
    duplicates = [case_id for case_id, count in Counter(c.id for c in cases).items() if count > 1]
    if duplicates:
        raise InvalidInputError(f"{name}: duplicate case ids: {', '.join(duplicates[:5])}")
    records = records or []
    head = f"{name}: {len(cases)} cases"
    if records:
        head += f", {len(records)} patient records"
    lines = [head, *(r if isinstance(r, str) else r.summary() for r in readings), *notes]
    return Dataset(name, cases, records, labels or {}, "\n".join(lines))
