"""What every dataset loader returns (`Dataset`), how one is registered (`DatasetSpec`, `DATASETS`), and how
a loader finishes its cases. The loaders read files with `clinrag.core.files`.

Failure policy, the same as the corpus and patient loaders: a missing or unreadable file raises
`DataFormatError` naming it; a broken record is skipped and listed in `Dataset.report`; a file that yields no
case at all raises `DataFormatError`; two cases with one id raise `InvalidInputError`.

Conventions every loader follows:
- exam datasets (MCQ) keep the file's option letters as keys and `gold.answer` is a key;
- datasets with patient records use the option *texts* as keys, so an option key, `gold.answer`/`answers`,
  `gold.ddx` names and `Dataset.labels` values all live in one answer space;
- where a case describes the same patient as a record, the case id is the record id (leave-sample-out)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.files import ReadReport
from clinrag.core.models import Case
from clinrag.core.registry import Registry
from clinrag.patients.record import PatientRecord


@dataclass
class Dataset:
    """Cases to answer, plus (for patient datasets) the records a patient base is built from and each
    record's labels in the cases' answer space."""

    name: str
    cases: list[Case]
    records: list[PatientRecord] = field(default_factory=list)
    labels: dict[str, list[str]] = field(default_factory=dict)
    report: str = ""
    # record id → its group, where patients come in groups that share more than a diagnosis (a
    # phenopacket-store cohort: one paper, often one family): a case's group is left out with it
    groups: dict[str, str] = field(default_factory=dict)

    def experience(self, exclude: Iterable[str]) -> list[PatientRecord]:
        """The records whose id is not in `exclude` (the sampled test cases, for leave-sample-out), nor in the
        group of one that is (leave-group-out)."""
        if isinstance(exclude, str):  # a bare id would be read as a set of characters
            exclude = [exclude]
        excluded = set(exclude)
        groups = {self.groups[case] for case in excluded if case in self.groups}
        return [
            record
            for record in self.records
            if record.id not in excluded
            and (record.id not in self.groups or self.groups[record.id] not in groups)
        ]


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


DATASETS: Registry[DatasetSpec] = Registry(
    "dataset", packages=["clinrag.eval.datasets"], entry_point_group="clinrag.datasets"
)


def register(*specs: DatasetSpec) -> None:
    """Register each spec under its name (a dataset module calls this when it is imported)."""
    for spec in specs:
        DATASETS.register(spec.name, spec)


# --- finishing ------------------------------------------------------------------------------------------


def finish(
    name: str,
    cases: list[Case],
    readings: Iterable[ReadReport | str],
    *,
    records: list[PatientRecord] | None = None,
    labels: dict[str, list[str]] | None = None,
    notes: Iterable[str] = (),
    groups: dict[str, str] | None = None,
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
    return Dataset(name, cases, records, labels or {}, "\n".join(lines), groups or {})
