"""Clinical attributes the disease sources do not give, kept as data with a source on every line
(`clinical_tables/`, see its NOTICE.md): how long a disease's symptoms typically last when it presents
(`course.jsonl`), the dangerous diagnoses not to miss with how urgently to act and what rules them in or out
(`cant_miss.jsonl`), red-flag findings that call for urgent care whatever the diagnosis
(`red_flags.jsonl`, by HPO term), the crises whose words alone call for emergency care, with their first
advice (`crisis.jsonl`: an overdose, self-harm; the words are each language's `crisis.json`), and the
readings of a measured quantity that state or deny a finding
(`readings.jsonl`: a temperature of 38.5 is a fever).

Course and danger are keyed by the disease's ICD-10 code, so they reach every source that codes its diseases
(the packaged disease table, DDXPlus); a disease without a code (OMIM, Orphanet) has neither, and the
differential then makes no assumption about its course."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clinrag.conditions.catalogue import Catalogue, packaged_catalogue, read_records
from clinrag.conditions.records import Disposition, ordered_span
from clinrag.core.models import Evidence

if TYPE_CHECKING:  # annotations only: the tables load without the disease model's readers
    from clinrag.consult.diseases import Disease

TABLES = Path(__file__).parent / "clinical_tables"
Urgency = Literal["emergency", "urgent"]  # how urgently a danger or a red flag asks to be seen


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
        ordered_span(self.presents_within_days, "presents_within_days")
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


class Crisis(_Record):
    """A situation the person's words alone make an emergency (an overdose, self-harm), whatever else the
    text says; `advice` names the template of its first words (`crisis_<advice>` in `templates.json`)."""

    crisis: str
    label: str
    advice: str
    why: str
    source: str


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


# DDXPlus's severity (1: most severe … 5: least) as the care a typical presentation needs
SEVERITY_DISPOSITIONS: dict[int, Disposition] = {
    1: "emergency",
    2: "urgent",
    3: "soon",
    4: "soon",
    5: "self_care",
}


def cite_table(evidence: dict[str, Evidence], cited: str, text: str, table: str, **provenance: str) -> str:
    """Cite a line of a clinical table (`table`, e.g. "red_flags") as evidence `cited`, once."""
    evidence.setdefault(
        cited,
        Evidence(id=cited, kind="citation", text=text, source=f"clinical:{table}", provenance=provenance),
    )
    return cited


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
    crises: dict[str, Crisis]
    # the knowledge base's conditions by code: how urgently a typical presentation needs care, and the
    # changes that mean seeking help at once (their red flags, by name, with the documents that name them)
    dispositions: dict[str, Disposition]
    watch_for: dict[str, tuple[tuple[str, ...], str]]

    @classmethod
    def read(cls, folder: Path = TABLES, catalogue: Catalogue | None = None) -> ClinicalTables:
        """The tables of `folder`, with the course and the danger of each condition of the knowledge base
        `catalogue` whose code the tables do not give."""
        courses = [*_read(folder / "course.jsonl", Course), *_catalogue_courses(catalogue)]
        dangers = [*_read(folder / "cant_miss.jsonl", Danger), *_catalogue_dangers(catalogue)]
        by_code: dict[str, Course] = {}
        for course in courses:
            if key := icd10_key(course.icd10):
                by_code.setdefault(key, course)
        dangerous: dict[str, Danger] = {}
        for danger in dangers:
            if key := icd10_key(danger.icd10):
                dangerous.setdefault(key, danger)
        conditions = catalogue.conditions if catalogue is not None else ()
        dispositions: dict[str, Disposition] = {}
        watch_for: dict[str, tuple[tuple[str, ...], str]] = {}
        for condition in conditions:
            if key := icd10_key(condition.icd10):
                dispositions.setdefault(key, condition.urgency.level)
                cited = tuple(dict.fromkeys(s for flag in condition.red_flags for s in flag.source))
                labels = tuple(flag.label for flag in condition.red_flags)
                watch_for.setdefault(key, (labels, _documents_with_links(catalogue, cited)))
        return cls(
            by_code,
            dangerous,
            tuple(_read(folder / "red_flags.jsonl", RedFlag)),
            tuple(_read(folder / "readings.jsonl", Reading)),
            {crisis.crisis: crisis for crisis in _read(folder / "crisis.jsonl", Crisis)},
            dispositions,
            watch_for,
        )

    def course_of(self, disease: Disease) -> Course | None:
        key = icd10_key(disease.icd10)
        return self.courses.get(key) if key else None

    def danger_of(self, disease: Disease) -> Danger | None:
        key = icd10_key(disease.icd10)
        return self.dangers.get(key) if key else None

    def disposition_of(self, disease: Disease) -> Disposition | None:
        """How urgently a typical presentation of `disease` needs care: the knowledge base's condition of its
        code, else its danger's urgency, else its source's severity rating (None: nothing says)."""
        key = icd10_key(disease.icd10)
        if key and key in self.dispositions:
            return self.dispositions[key]
        if (danger := self.danger_of(disease)) is not None:
            return danger.urgency
        return SEVERITY_DISPOSITIONS.get(disease.severity) if disease.severity is not None else None

    def watch_for_of(self, disease: Disease) -> tuple[tuple[str, ...], str]:
        """The red flags the knowledge base names for `disease`, and the documents naming them."""
        key = icd10_key(disease.icd10)
        return self.watch_for.get(key, ((), "")) if key else ((), "")

    def flags_raised(
        self, present_hpo: set[str], age: float | None, self_told: bool = False
    ) -> list[RedFlag]:
        return [flag for flag in self.red_flags if flag.holds(present_hpo, age, self_told)]


R = TypeVar("R", bound=_Record)


@cache
def packaged_tables() -> ClinicalTables:
    return ClinicalTables.read(catalogue=packaged_catalogue())


def _documents(catalogue: Catalogue, ids: Sequence[str]) -> str:
    return "; ".join(source.citation() for source in catalogue.documents(ids))


def _documents_with_links(catalogue: Catalogue, ids: Sequence[str]) -> str:
    return "; ".join(f"{source.citation()} {source.url}" for source in catalogue.documents(ids))


def _catalogue_courses(catalogue: Catalogue | None) -> list[Course]:
    return [
        Course(
            icd10=c.icd10,
            name=c.name,
            course=c.course.kind,
            presents_within_days=tuple(int(days) for days in c.course.presents_within_days),
            source=_documents(catalogue, c.course.source),
        )
        for c in (catalogue.conditions if catalogue is not None else ())
    ]


def _catalogue_dangers(catalogue: Catalogue | None) -> list[Danger]:
    """The knowledge base's can't-miss conditions: an emergency is one, anything less urgent to be seen the
    same day; ruled in or out by the tests it names for that."""
    return [
        Danger(
            icd10=c.icd10,
            name=c.name,
            urgency="emergency" if c.urgency.level == "emergency" else "urgent",
            rule_out=tuple(t.name for t in c.tests),
            source=_documents(catalogue, c.urgency.source),
        )
        for c in (catalogue.conditions if catalogue is not None else ())
        if c.urgency.cant_miss
    ]


def _read(path: Path, kind: type[R]) -> Sequence[R]:
    return [record for _, record in read_records(path, kind)]
