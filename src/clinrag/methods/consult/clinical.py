"""Clinical attributes the disease sources do not give, kept as data with a source on every line
(`clinical_tables/`, see its NOTICE.md): how long a disease's symptoms typically last when it presents
(`course.jsonl`), the dangerous diagnoses not to miss with how urgently to act and what rules them in or out
(`cant_miss.jsonl`), red-flag findings that call for urgent care whatever the diagnosis
(`red_flags.jsonl`, by HPO term), and the readings of a measured quantity that state or deny a finding
(`readings.jsonl`: a temperature of 38.5 is a fever).

Course and danger are keyed by the disease's ICD-10 code, so they reach every source that codes its diseases
(the packaged disease table, DDXPlus); a disease without a code (OMIM, Orphanet) has neither, and the
differential then makes no assumption about its course."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clinrag.core.errors import DataFormatError
from clinrag.methods.consult.diseases import Disease

TABLES = Path(__file__).parent / "clinical_tables"
Urgency = Literal["emergency", "same_day"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Course(_Record):
    """How long a disease's symptoms typically last when it presents (days), and its course."""

    icd10: str
    name: str
    course: Literal["acute", "subacute", "chronic", "episodic"]
    presents_within_days: tuple[int, int]
    source: str
    note: str | None = None

    @model_validator(mode="after")
    def _ordered(self) -> Course:
        low, high = self.presents_within_days
        if not 0 <= low <= high:
            raise ValueError(f"presents_within_days must be 0 <= low <= high, got {low}, {high}")
        return self


class Danger(_Record):
    """A diagnosis not to miss: how urgently to act, and what rules it in or out."""

    icd10: str
    name: str
    urgency: Urgency
    rule_out: tuple[str, ...]
    source: str


class RedFlag(_Record):
    """A finding (HPO term) that calls for urgent care: at some ages only, or only with one of `with_`."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    hpo: str
    label: str
    words: tuple[str, ...]
    ages: tuple[float, float] | None = None
    with_: tuple[str, ...] | None = Field(default=None, alias="with")  # "with" is a Python keyword
    urgency: Urgency
    why: str
    source: str

    def holds(self, present_hpo: set[str], age: float | None, self_told: bool = False) -> bool:
        """Whether this red flag holds for a patient showing `present_hpo` at `age`. An unknown age is one
        the flag may hold at (the safe side), unless the patients tell of themselves (`self_told`): whoever
        writes their own account is no young child, and every age-bounded flag of the table is a child's."""
        if self.hpo not in present_hpo:
            return False
        if self.ages is not None and (self_told if age is None else not self.ages[0] <= age <= self.ages[1]):
            return False
        return self.with_ is None or bool(present_hpo & set(self.with_))


class Reading(_Record):
    """A measured quantity the patient may give ("my temperature is 38.7") and the finding it states at or
    above `present_at_least`, or denies at or below `absent_at_most`, in `unit`; a reading between the two
    says neither, and one outside `plausible` is not a reading of the quantity."""

    quantity: str
    hpo: str
    label: str
    unit: str
    present_at_least: float
    absent_at_most: float
    plausible: tuple[float, float]
    source: str

    @model_validator(mode="after")
    def _ordered(self) -> Reading:
        low, high = self.plausible
        if not low <= self.absent_at_most < self.present_at_least <= high:
            raise ValueError("need plausible low <= absent_at_most < present_at_least <= plausible high")
        return self

    def status(self, value: float) -> Literal["present", "absent"] | None:
        if value >= self.present_at_least:
            return "present"
        return "absent" if value <= self.absent_at_most else None


def icd10_key(code: str | None) -> str | None:
    """A code as the tables are keyed: the first of a list, upper case ("j17, j18" → "J17")."""
    if not code:
        return None
    first = code.split(",")[0].strip().upper()
    return first or None


@dataclass(frozen=True)
class ClinicalTables:
    courses: dict[str, Course]
    dangers: dict[str, Danger]
    red_flags: tuple[RedFlag, ...]
    readings: tuple[Reading, ...]

    @classmethod
    def read(cls, folder: Path = TABLES) -> ClinicalTables:
        courses = _read(folder / "course.jsonl", Course)
        dangers = _read(folder / "cant_miss.jsonl", Danger)
        return cls(
            {key: c for c in courses if (key := icd10_key(c.icd10))},
            {key: d for d in dangers if (key := icd10_key(d.icd10))},
            tuple(_read(folder / "red_flags.jsonl", RedFlag)),
            tuple(_read(folder / "readings.jsonl", Reading)),
        )

    def course_of(self, disease: Disease) -> Course | None:
        key = icd10_key(disease.icd10)
        return self.courses.get(key) if key else None

    def danger_of(self, disease: Disease) -> Danger | None:
        key = icd10_key(disease.icd10)
        return self.dangers.get(key) if key else None

    def flags_raised(
        self, present_hpo: set[str], age: float | None, self_told: bool = False
    ) -> list[RedFlag]:
        return [flag for flag in self.red_flags if flag.holds(present_hpo, age, self_told)]


R = TypeVar("R", bound=_Record)


@cache
def packaged_tables() -> ClinicalTables:
    return ClinicalTables.read()


def _read(path: Path, kind: type[R]) -> Sequence[R]:
    records = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DataFormatError(f"{path}: cannot read the clinical table ({exc})") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(kind(**json.loads(line)))
        except (json.JSONDecodeError, ValidationError, TypeError) as exc:
            raise DataFormatError(f"{path}:{number}: not a {kind.__name__} record ({exc})") from exc
    return records
