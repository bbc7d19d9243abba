"""The disease knowledge a consultation reasons over: every disease of the graph sources in use with its
symptoms, tests, drugs and non-drug care, its ICD-10 code where the source gives one, and a base rate.

The diseases are the records of the graph importers (`clinrag.graph.importers`), the same records that
`clinrag graph build -s SPEC` imports, so a fact cites the graph fact it is (`graph:Disease|RELATION|name`).
Reading every source takes tens of seconds (HPO's 12,000 diseases), so the model is saved with the compiled
knowledge (`compiled`) and loaded from there afterwards.

Base rates: the sources do not give prevalences, but they declare which diseases are rare
(`SourceTraits.rare`). OMIM and Orphanet diseases (`packaged:hpo-diseases`) are rare diseases, which
together affect about 3.5–5.9 % of people (Nguengang Wakap et al., Eur J Hum Genet 2020); the common-disease
tables (the packaged disease table, DDXPlus) share the rest. Within each group the base rate is uniform,
unless a patient base gives the diagnoses' frequencies (see `differential`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields
from functools import cache, cached_property
from pathlib import Path
from typing import Literal

import srsly
from pydantic import BaseModel, ConfigDict, Field, model_validator

from clinrag.conditions.catalogue import read_records
from clinrag.core.errors import DataFormatError
from clinrag.graph.importers import read_source
from clinrag.graph.importers.records import SourceRecords, SourceTraits
from clinrag.graph.importers.registry import graph_source
from clinrag.graph.schema import Relation

# The language the knowledge sources name their diseases and findings in (HPO, DDXPlus and the packaged
# tables name them in English): text in it is read against the sources' own names, and another language
# against the names the sources give their findings in it (`GraphSource.names_in`).
KNOWLEDGE_LANGUAGE = "en"
RARE_SHARE = 0.05  # the rare diseases' share of the base rate (see the module docstring)
FORMAT_VERSION = 14
_ICD10 = re.compile(r"ICD-10 ([A-TV-Z][0-9][0-9A-Z](?:\.[0-9A-Z]{1,4})?)")
# the ICD-10 blocks of conditions of one sex: {"sex", "first", "last", "title", "source"}
SEX_TABLE = Path(__file__).parent / "clinical_tables" / "icd10_sex.jsonl"


@dataclass
class Disease:
    name: str
    source: str  # the importer's source name ("faker-diseases", "hpo-diseases", "ddxplus", …)
    key: str  # the record's key in its source ("OMIM:100070", "16:J18.9")
    description: str | None = None
    icd10: str | None = None
    symptoms: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    drugs: list[str] = field(default_factory=list)
    cures: list[str] = field(default_factory=list)
    ranked: int = 0  # how many of `symptoms`, from the first, are in their source's order of salience
    rare: bool = False  # its source's diseases are rare diseases
    # per symptom, where the source states them: the share of the disease's patients who show it, and the
    # publications or records that state it, ";"-separated as in `phenotype.hpoa` ("PMID:…;OMIM:…"; one
    # string a symptom loads in half the time of a list)
    frequencies: list[float | None] = field(default_factory=list)
    references: list[str] = field(default_factory=list)
    excluded: list[str] = field(default_factory=list)  # findings it is stated not to show (HPO's NOT)
    onset: tuple[float, float] | None = None  # the ages (years) it begins within, where its source says
    severity: int | None = None  # where its source rates it: 1 (most severe) to 5 (least), as DDXPlus does
    # per symptom, the source that lists it (a name in two sources joins their lists)
    origins: list[str] = field(default_factory=list)
    risk_factors: list[str] = field(default_factory=list)  # what makes it likelier, where its source says
    # how many of 1,000 primary-care consultations are for it, where its source says
    prevalence: float | None = None
    # the documents that state a test or a care item, where its source names them: "RELATION|name" → ids,
    # ";"-separated as `references`
    cited: dict[str, str] = field(default_factory=dict)
    synonyms: list[str] = field(
        default_factory=list
    )  # other names it is known by, where its source gives them

    def __post_init__(self) -> None:  # a source that states no frequency or reference: one None, [] each
        if len(self.origins) < len(self.symptoms):
            self.origins += [self.source] * (len(self.symptoms) - len(self.origins))
        if self.onset is not None:  # msgpack loads a pair as a list
            self.onset = (float(self.onset[0]), float(self.onset[1]))
        if len(self.frequencies) < len(self.symptoms):
            self.frequencies += [None] * (len(self.symptoms) - len(self.frequencies))
        if len(self.references) < len(self.symptoms):
            self.references += [""] * (len(self.symptoms) - len(self.references))

    def listed_with(self) -> list[int]:
        """Per symptom, how many symptoms the source that lists it lists for this disease."""
        return [self.origins.count(origin) for origin in self.origins]

    def fact_id(self, relation: Relation, target: str) -> str:
        """The id of the graph fact `(self)-[relation]->(target)`, as graph evidence is named."""
        return f"graph:{self.name}|{relation}|{target}"


@dataclass
class DiseaseModel:
    """The diseases of the sources in `specs`, one entry per name (a name in two sources joins their
    facts, as the graph joins their nodes), and what each source declares it is (by source name)."""

    specs: list[str]
    diseases: list[Disease]
    traits: dict[str, SourceTraits]

    @classmethod
    def read(cls, specs: Sequence[str]) -> DiseaseModel:
        by_name: dict[str, Disease] = {}
        traits: dict[str, SourceTraits] = {}
        for spec in specs:
            records = read_source(spec)
            traits[records.name] = graph_source(spec).traits
            for disease in _diseases(records, traits[records.name]):
                present = by_name.get(disease.name)
                if present is None:
                    by_name[disease.name] = disease
                else:
                    _join(present, disease)
        return cls(list(specs), list(by_name.values()), traits)

    def save(self, path: Path) -> None:
        """The diseases as rows of field values, in msgpack (a tenth of a second to load, half JSON's)."""
        names = [f.name for f in fields(Disease)]
        srsly.write_msgpack(
            path,
            {
                "format": FORMAT_VERSION,
                "specs": self.specs,
                "fields": names,
                "diseases": [[getattr(d, name) for name in names] for d in self.diseases],
                "traits": {name: asdict(t) for name, t in self.traits.items()},
            },
        )

    @classmethod
    def load(cls, path: Path) -> DiseaseModel:
        try:
            raw = srsly.read_msgpack(path)
            if raw.get("format") != FORMAT_VERSION:
                raise ValueError(f"format {raw.get('format')!r}, expected {FORMAT_VERSION}")
            if raw["fields"] != [f.name for f in fields(Disease)]:
                raise ValueError(f"its diseases have the fields {raw['fields']}")
            traits = {name: SourceTraits(**t) for name, t in raw["traits"].items()}
            return cls(list(raw["specs"]), [Disease(*row) for row in raw["diseases"]], traits)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise DataFormatError(f"{path}: not a saved disease model ({exc}); delete it to rebuild") from exc

    @cached_property
    def by_name(self) -> dict[str, Disease]:
        return {disease.name: disease for disease in self.diseases}

    def risk_source(self, disease: Disease) -> str | None:
        """The source that names `disease`'s risk factors (one of its sources, when two name it), if any."""
        sources = (disease.source, *disease.origins)
        return next((source for source in sources if self.traits[source].risk_factors), None)

    def base_rates(self, prevalence_exponent: float = 1.0) -> list[float]:
        """Each disease's base rate (summing to 1): rare diseases share `RARE_SHARE` evenly, common ones the
        rest in proportion to how common their source says they are (its prevalence, raised to
        `prevalence_exponent`: 0 treats them alike), one whose source says nothing as the median one."""
        rare = sum(d.rare for d in self.diseases)
        common = len(self.diseases) - rare
        rare_share = RARE_SHARE if rare and common else float(bool(rare))
        stated = sorted(d.prevalence for d in self.diseases if not d.rare and d.prevalence)
        middle = stated[len(stated) // 2] if stated else 1.0
        weights = [(d.prevalence or middle) ** prevalence_exponent for d in self.diseases]
        common_total = sum(w for w, d in zip(weights, self.diseases, strict=True) if not d.rare)
        return [
            rare_share / rare if d.rare else (1.0 - rare_share) * w / common_total
            for w, d in zip(weights, self.diseases, strict=True)
        ]


class SexBlock(BaseModel):
    """ICD-10 categories `first` to `last` (three characters, inclusive) of conditions only one sex can have:
    pregnancy, the genital organs and their tumours, gonadal dysfunction."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sex: Literal["female", "male"]
    first: str = Field(pattern=r"^[A-Z][0-9][0-9A-Z]$")
    last: str = Field(pattern=r"^[A-Z][0-9][0-9A-Z]$")
    title: str
    source: str

    @model_validator(mode="after")
    def _ordered(self) -> SexBlock:
        if self.first > self.last:
            raise ValueError(f"first {self.first} is after last {self.last}")
        return self


@cache
def sex_blocks(path: Path = SEX_TABLE) -> tuple[SexBlock, ...]:
    """The blocks of `clinical_tables/icd10_sex.jsonl`, read once; a malformed line is a `DataFormatError`."""
    return tuple(block for _, block in read_records(path, SexBlock))


def sex_of(icd10: str | None) -> str | None:
    """ "female" or "male" for a condition only that sex can have, by its ICD-10 block; else None."""
    if not icd10:
        return None
    category = icd10.upper()[:3]
    return next((b.sex for b in sex_blocks() if b.first <= category <= b.last), None)


def _diseases(records: SourceRecords, traits: SourceTraits) -> list[Disease]:
    diseases = []
    for record in records.records:
        code = _ICD10.search(record.description or "")
        symptoms = list(record.relations.get(Relation.HAS_SYMPTOM, []))
        diseases.append(
            Disease(
                name=record.name,
                source=records.name,
                key=record.key,
                description=record.description,
                icd10=code.group(1) if code else None,
                symptoms=symptoms,
                tests=list(record.relations.get(Relation.RECOMMEND_TEST, [])),
                drugs=list(record.relations.get(Relation.RECOMMEND_DRUG, [])),
                cures=list(record.relations.get(Relation.RECOMMEND_CURE, [])),
                ranked=len(symptoms) if traits.salience_ordered else 0,
                rare=traits.rare,
                frequencies=[record.frequencies.get((Relation.HAS_SYMPTOM, s)) for s in symptoms],
                references=[";".join(record.references.get((Relation.HAS_SYMPTOM, s), [])) for s in symptoms],
                excluded=list(record.excluded),
                onset=record.onset,
                severity=record.severity,
                risk_factors=list(record.risk_factors),
                prevalence=record.prevalence,
                cited={
                    f"{relation}|{target}": ";".join(cited)
                    for (relation, target), cited in record.references.items()
                    if relation is not Relation.HAS_SYMPTOM and cited
                },
                synonyms=[s for s in record.synonyms if s != record.name],
            )
        )
    return diseases


def _join(present: Disease, other: Disease) -> None:
    for symptom, share, cited in zip(other.symptoms, other.frequencies, other.references, strict=True):
        if symptom not in present.symptoms:
            present.symptoms.append(symptom)
            present.frequencies.append(share)
            present.references.append(cited)
            present.origins.append(other.source)
    for name in ("tests", "drugs", "cures", "excluded", "risk_factors", "synonyms"):
        mine: list[str] = getattr(present, name)
        mine.extend(item for item in getattr(other, name) if item not in mine)
    if other.onset is not None:  # a name in two sources: every age either says it begins at
        spans = [span for span in (present.onset, other.onset) if span is not None]
        present.onset = (min(s for s, _ in spans), max(e for _, e in spans))
    if other.severity is not None:  # the graver rating of the two
        present.severity = min(present.severity or other.severity, other.severity)
    for key, cited in other.cited.items():
        present.cited.setdefault(key, cited)
    present.prevalence = present.prevalence or other.prevalence
    present.icd10 = present.icd10 or other.icd10
    present.description = present.description or other.description
    # a disease a table of common conditions names is common there, whichever source was read first
    present.rare = present.rare and other.rare
