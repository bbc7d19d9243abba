"""The record shapes of the knowledge base's files (see `data/README.md`): a source of the registry, and a
condition with its cited facts. Read from JSON lines and validated here, at the boundary."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Frequency = Literal["obligate", "very_frequent", "frequent", "occasional", "very_rare"]
Prevalence = Literal["very_common", "common", "uncommon", "rare", "very_rare"]
Disposition = Literal["emergency", "urgent", "soon", "self_care"]
Language = Literal["en", "fr", "zh"]

# HPO's frequency classes, each as the middle of its range (as `clinrag.terms.hpo.FREQUENCY_TERMS`)
FREQUENCY_SHARES: dict[str, float] = {
    "obligate": 1.0,
    "very_frequent": 0.895,
    "frequent": 0.545,
    "occasional": 0.17,
    "very_rare": 0.025,
}
# consultations for the condition per 1,000 consultations in a setting, the middle of each class's range on a
# log scale (the classes are decades: very common >= 10, common 1-10, …)
PREVALENCE_PER_1000: dict[str, float] = {
    "very_common": 30.0,
    "common": 3.0,
    "uncommon": 0.3,
    "rare": 0.03,
    "very_rare": 0.003,
}


def how_often(share: float) -> str:
    """A finding's share among a condition's patients in words, by HPO's frequency classes ("in most")."""
    if share >= 0.995:
        return "in all"
    if share >= 0.8:
        return "in most"
    if share >= 0.3:
        return "in many"
    return "in some" if share >= 0.05 else "in few"


def ordered_span(span: tuple[float, float], name: str) -> None:
    """A (low, high) span of ages or days must have 0 <= low <= high."""
    low, high = span
    if not 0 <= low <= high:
        raise ValueError(f"{name} must be 0 <= low <= high, got {low}, {high}")


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Source(_Record):
    """A document of the registry: who issued it, its title and year, and where a reader finds it."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    issuer: str = Field(min_length=1)
    title: str = Field(min_length=1)
    year: int = Field(ge=1900, le=2100)
    url: str = Field(pattern=r"^https?://\S+$")
    kind: Literal["guideline", "review", "textbook", "fact_sheet", "patient_information", "study"]
    checked: str = Field(min_length=1)  # how the document was found to exist

    def citation(self) -> str:
        return f"{self.issuer}: {self.title} ({self.year})"


class _Cited(_Record):
    source: tuple[str, ...] = Field(min_length=1)  # ids in the registry


class Finding(_Cited):
    """A finding by its HPO term or its DDXPlus evidence code, and its exact name there."""

    hpo: str | None = Field(default=None, pattern=r"^HP:\d{7}$")
    ddxplus: str | None = Field(default=None, pattern=r"^E_\d+$")
    label: str

    @model_validator(mode="after")
    def _one_code(self) -> Finding:
        if (self.hpo is None) == (self.ddxplus is None):
            raise ValueError("a finding names exactly one of hpo or ddxplus")
        return self

    @property
    def code(self) -> str:
        return self.hpo or f"ddxplus:{self.ddxplus}"


class Feature(Finding):
    """A finding of the condition and how often its patients show it: an HPO frequency class, or a share the
    source states (`basis` "source"); a class is the source's or a clinician's estimate within it."""

    kind: Literal["symptom", "sign", "risk_factor", "exposure", "history"]
    frequency: Frequency | float
    basis: Literal["source", "estimate"]

    @model_validator(mode="after")
    def _stated_share(self) -> Feature:
        if isinstance(self.frequency, float):
            if not 0.0 < self.frequency <= 1.0:
                raise ValueError(f"a share is in (0, 1], got {self.frequency}")
            if self.basis != "source":
                raise ValueError("a share must be the source's (basis 'source'); else give a class")
        return self

    @property
    def share(self) -> float:
        return self.frequency if isinstance(self.frequency, float) else FREQUENCY_SHARES[self.frequency]


class Against(Finding):
    why: str | None = None


class RedFlag(Finding):
    why: str | None = None


class Test(_Cited):
    name: str = Field(min_length=1)
    use: Literal["confirm", "rule_in", "rule_out", "assess"]


class Care(_Cited):
    text: str = Field(min_length=1)


class Setting(_Cited):
    primary_care: Prevalence
    emergency: Prevalence
    basis: Literal["source", "estimate"]


class Onset(_Cited):
    ages: tuple[float, float]
    typical_ages: tuple[float, float] | None = None
    sex: Literal["any", "female", "male", "mostly_female", "mostly_male"]

    @model_validator(mode="after")
    def _ordered(self) -> Onset:
        ordered_span(self.ages, "ages")
        ordered_span(self.typical_ages or (0, 0), "typical_ages")
        return self


class Course(_Cited):
    kind: Literal["acute", "subacute", "chronic", "episodic"]
    presents_within_days: tuple[float, float]

    @model_validator(mode="after")
    def _ordered(self) -> Course:
        ordered_span(self.presents_within_days, "presents_within_days")
        return self


class Urgency(_Cited):
    level: Disposition
    cant_miss: bool


class Condition(_Record):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    name: str = Field(min_length=1)
    icd10: str
    system: str
    ddxplus: str | None = None  # the DDXPlus condition it is, by DDXPlus's name
    names: dict[Language, tuple[str, ...]]
    lay: dict[Language, tuple[str, ...]] = {}
    prevalence: Setting
    onset: Onset
    course: Course
    urgency: Urgency
    features: tuple[Feature, ...] = Field(min_length=1)
    against: tuple[Against, ...] = ()
    red_flags: tuple[RedFlag, ...] = ()
    tests: tuple[Test, ...] = ()
    management: tuple[Care, ...] = ()

    def cited(self) -> list[tuple[str, _Cited]]:
        """Every fact of the condition with what it is, for the audit and the counts."""
        facts: list[tuple[str, _Cited]] = [
            ("prevalence", self.prevalence),
            ("onset", self.onset),
            ("course", self.course),
            ("urgency", self.urgency),
        ]
        facts += [(f"feature {f.label}", f) for f in self.features]
        facts += [(f"against {f.label}", f) for f in self.against]
        facts += [(f"red flag {f.label}", f) for f in self.red_flags]
        facts += [(f"test {t.name}", t) for t in self.tests]
        facts += [(f"management {m.text[:40]}", m) for m in self.management]
        return facts


class FindingNames(_Record):
    """An HPO finding's names in French and Chinese, as a patient or a clinician says it (terminology written
    for clinrag, so French and Chinese input reach the knowledge's findings)."""

    hpo: str = Field(pattern=r"^HP:\d{7}$")
    label: str
    fr: tuple[str, ...] = Field(min_length=1)
    zh: tuple[str, ...] = Field(min_length=1)
