"""`phenopackets`: published rare-disease patients as GA4GH Phenopacket v2 files (the Monarch Initiative's
phenopacket-store), each told as a short English presentation whose gold answer is the diagnosed disease.

The store keeps one folder per cohort (a gene or a disease) of `*.json` packets; its release is a zip of the
same folders. A packet becomes a `PhenopacketCase`: the observed and excluded HPO terms, age and sex, onset,
the diagnoses (OMIM ids) and the publication's PMIDs. `render_text` tells it without naming the diagnosis or
the gene, in the spirit of phenopacket2prompt, and `to_case` makes the ranked-differential `Case`; a method's
ranked diagnosis matches the gold one by its code (the OMIM id) or its name (`eval.metrics.gold_rank`).

A packet that is not JSON, does not parse as a Phenopacket v2, or lacks an observed HPO feature or a diagnosis
is skipped and listed in the read report by its path. `split_cohorts` divides cohorts into a development
and a held-out share, so that a method can be tuned on some diseases and reported on others."""

from __future__ import annotations

import hashlib
import json
import math
import re
import zipfile
import zlib
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from google.protobuf.json_format import ParseDict, ParseError
from phenopackets import Phenopacket, Sex, TimeElement

from clinrag.core.errors import DataFormatError, InvalidInputError
from clinrag.core.files import DUPLICATE_IDS, Reading, ReadReport, decode, existing, existing_file
from clinrag.core.models import (
    HPO_EXCLUDED,
    HPO_OBSERVED,
    HPO_ONSET,
    Case,
    Demographics,
    Gold,
    PatientProfile,
)
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.terms import hpo

SOURCE = "phenopacket-store"

# Reasons for skipping a packet, phrased to read after a count (see `ReadReport.summary`).
UNREADABLE = "packets that cannot be read"
NOT_JSON = "packets that are not UTF-8 JSON"
NOT_PHENOPACKET = "packets that are not valid Phenopacket v2"
BAD_AGE = "packets with an age that is not an ISO 8601 duration of at most 130 years"
NO_FEATURE = "packets with no observed HPO feature"
NO_DIAGNOSIS = "packets with no diagnosis"

DAYS_PER_YEAR = 365.25
NEWBORN_YEARS = 28 / DAYS_PER_YEAR  # the neonatal period: the first 28 days
ADULT_YEARS = 18
MAX_AGE = 130  # as `Demographics.age` allows
ANTENATAL = "HP:0030674"


@dataclass(frozen=True)
class Term:
    """An ontology term: "HP:0001250" / "Seizure", "OMIM:154700" / "Marfan syndrome"."""

    id: str
    label: str


@dataclass(frozen=True)
class OnsetClass:
    """An HPO onset term as clinrag reads it: the age in years it starts at, and how a sentence says it."""

    start: float
    phrase: str


# The HPO onset classes (HP:0003674), from the earliest start; `start` orders them and says whether a patient
# with that onset is an adult. Prenatal classes start before 0.
ONSET_CLASSES: dict[str, OnsetClass] = {
    "HP:0011460": OnsetClass(-0.75, "in the embryonal period"),
    ANTENATAL: OnsetClass(-0.74, "before birth"),
    "HP:0011461": OnsetClass(-0.6, "in the fetal period"),
    "HP:0034199": OnsetClass(-0.55, "late in the first trimester of pregnancy"),
    "HP:0034198": OnsetClass(-0.5, "in the second trimester of pregnancy"),
    "HP:0034197": OnsetClass(-0.25, "in the third trimester of pregnancy"),
    "HP:0003577": OnsetClass(0.0, "at birth"),
    "HP:0003623": OnsetClass(0.0, "in the neonatal period"),
    "HP:0003593": OnsetClass(NEWBORN_YEARS, "in infancy"),
    "HP:0410280": OnsetClass(1.0, "in childhood or adolescence"),
    "HP:0011463": OnsetClass(1.0, "in childhood"),
    "HP:0003621": OnsetClass(5.0, "between the ages of 5 and 15"),
    "HP:0003581": OnsetClass(16.0, "in adulthood"),
    "HP:0011462": OnsetClass(16.0, "in young adulthood"),
    "HP:0025708": OnsetClass(16.0, "in early young adulthood"),
    "HP:0025709": OnsetClass(19.0, "in young adulthood"),
    "HP:0025710": OnsetClass(25.0, "in late young adulthood"),
    "HP:0003596": OnsetClass(40.0, "in middle age"),
    "HP:0003584": OnsetClass(60.0, "late in life"),
}


@dataclass(frozen=True)
class PhenopacketCase:
    """What clinrag reads from one packet. Ages are in years; `age_class` is the HPO onset class a packet
    gives instead of an age at the last encounter, `gestational_age` (weeks) the age of a fetus. `onset` is
    the disease's onset class, else the earliest of the observed features'; `onset_age` is an onset given
    as an age instead."""

    id: str
    cohort: str
    observed: tuple[Term, ...]
    excluded: tuple[Term, ...] = ()
    age: float | None = None
    age_class: Term | None = None
    gestational_age: float | None = None
    sex: Literal["female", "male"] | None = None
    onset: Term | None = None
    onset_age: float | None = None
    diagnoses: tuple[Term, ...] = ()
    pmids: tuple[str, ...] = ()


class MalformedPacketError(DataFormatError):
    """A packet that cannot be read as a case; `reason` is one of the skip reasons above."""

    def __init__(self, reason: str, where: str, detail: str) -> None:
        super().__init__(f"{where}: {detail}")
        self.reason = reason
        self.where = where


# --- reading --------------------------------------------------------------------------------------------


def read_phenopacket(path: str | Path) -> PhenopacketCase:
    """One packet file; its cohort is the folder holding it. `MalformedPacketError` (a `DataFormatError`)
    names the file when it cannot be read as a case."""
    path = existing_file(path)
    return _parse_packet(path.read_bytes(), str(path), _cohort(path.resolve().parent.parts, path.stem))


def read_phenopackets(path: str | Path, cohorts: Collection[str] | None = None) -> Reading[PhenopacketCase]:
    """Every packet of a folder (recursively), a zip of folders or a single `.json` file, in path order;
    with `cohorts`, only those cohorts (each must be found). Broken packets and repeated packet ids are
    skipped into the reading's report, each by its path (relative to the folder, or the zip member)."""
    path = existing(path)
    wanted = None if cohorts is None else frozenset(cohorts)
    return Reading(path, lambda report: _packets(path, wanted, report))


def cohort_names(path: str | Path) -> list[str]:
    """The cohorts a folder, zip or file holds, sorted, read from the paths alone (no packet is parsed)."""
    return sorted({cohort for _, cohort, _ in _sources(existing(path))})


def _parse_packet(data: bytes, where: str, cohort: str) -> PhenopacketCase:
    """A packet's bytes as a case; `where` names it in errors."""
    try:
        raw = json.loads(decode(data, Path(where)))
    except (DataFormatError, json.JSONDecodeError) as error:
        raise MalformedPacketError(NOT_JSON, where, str(error)) from None
    return phenopacket_case(raw, where, cohort)


def phenopacket_case(raw: object, where: str, cohort: str = "") -> PhenopacketCase:
    """A packet already read as JSON (an API request's) as a case; `where` names it in errors."""
    if not isinstance(raw, dict):
        raise MalformedPacketError(NOT_PHENOPACKET, where, "not a JSON object")
    try:
        packet = ParseDict(raw, Phenopacket())
    except ParseError as error:
        raise MalformedPacketError(NOT_PHENOPACKET, where, str(error)) from None
    if not packet.id:
        raise MalformedPacketError(NOT_PHENOPACKET, where, "the packet has no id")
    return _from_packet(packet, where, cohort)


def _packets(path: Path, wanted: frozenset[str] | None, report: ReadReport) -> Iterator[PhenopacketCase]:
    seen_ids: set[str] = set()
    seen_cohorts: set[str] = set()
    for where, cohort, read in _sources(path):
        if wanted is not None and cohort not in wanted:
            continue
        seen_cohorts.add(cohort)
        report.records += 1
        try:
            case = _parse_packet(read(), where, cohort)
        except MalformedPacketError as error:
            report.skip(error.reason, where)
            continue
        except (OSError, zipfile.BadZipFile, zlib.error):  # a file or zip member that cannot be read
            report.skip(UNREADABLE, where)
            continue
        if case.id in seen_ids:
            report.skip(DUPLICATE_IDS, where)
            continue
        seen_ids.add(case.id)
        yield case
    missing = sorted((wanted or frozenset()) - seen_cohorts)
    if missing:
        raise InvalidInputError(f"{path}: no packets for the cohorts {', '.join(missing)}")


def _sources(path: Path) -> Iterator[tuple[str, str, Callable[[], bytes]]]:
    """(where, cohort, read the bytes) for each packet file of a folder, zip or single file."""
    if path.is_dir():
        for file in sorted(path.rglob("*.json")):
            relative = file.relative_to(path)
            yield str(relative), _cohort(relative.parts[:-1], path.name), file.read_bytes
    elif path.suffix.lower() == ".zip":
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile:
            raise DataFormatError(f"{path}: not a zip archive") from None
        with archive:
            for member in sorted(archive.namelist()):
                if member.endswith(".json"):
                    parts = PurePosixPath(member).parts[:-1]
                    yield member, _cohort(parts, path.stem), partial(archive.read, member)
    elif path.suffix.lower() == ".json":
        yield path.name, _cohort(path.resolve().parent.parts, path.stem), path.read_bytes
    else:
        raise DataFormatError(f"{path}: expected a folder, a .zip or a .json phenopacket")


def _cohort(folders: Sequence[str], fallback: str) -> str:
    """The cohort is the folder holding the packet; in the store's repository the packets of a cohort lie in
    `notebooks/<cohort>/phenopackets/`, so that last folder names no cohort."""
    if len(folders) > 1 and folders[-1] == "phenopackets":
        return folders[-2]
    return folders[-1] if folders else fallback


# --- from a parsed packet ------------------------------------------------------------------------------


def _from_packet(packet: Phenopacket, where: str, cohort: str) -> PhenopacketCase:
    hpo = [feature for feature in packet.phenotypic_features if feature.type.id.startswith("HP:")]
    observed = _terms(feature.type for feature in hpo if not feature.excluded)
    if not observed:
        raise MalformedPacketError(NO_FEATURE, where, "no observed HPO feature")
    diagnoses = _terms(
        interpretation.diagnosis.disease
        for interpretation in packet.interpretations
        if interpretation.diagnosis.disease.id
    ) or _terms(disease.term for disease in packet.diseases if disease.term.id and not disease.excluded)
    if not diagnoses:
        raise MalformedPacketError(NO_DIAGNOSIS, where, "no diagnosis or disease")
    last = packet.subject.time_at_last_encounter
    kind = last.WhichOneof("element")
    onset, onset_age = _onset(packet, where)
    return PhenopacketCase(
        id=packet.id,
        cohort=cohort,
        observed=observed,
        excluded=_terms(feature.type for feature in hpo if feature.excluded),
        age=_years(last, where),
        age_class=_term(last.ontology_class) if kind == "ontology_class" else None,
        gestational_age=_weeks(last) if kind == "gestational_age" else None,
        sex=_SEXES.get(packet.subject.sex),
        onset=onset,
        onset_age=onset_age,
        diagnoses=diagnoses,
        pmids=tuple(
            dict.fromkeys(
                reference.id
                for reference in packet.meta_data.external_references
                if reference.id.startswith("PMID:")
            )
        ),
    )


_SEXES: dict[int, Literal["female", "male"]] = {Sex.FEMALE: "female", Sex.MALE: "male"}


def _term(ontology_class: Any) -> Term:
    return Term(ontology_class.id, ontology_class.label or ontology_class.id)


def _terms(classes: Iterable[Any]) -> tuple[Term, ...]:
    """Terms in order, each id once."""
    found: dict[str, Term] = {}
    for ontology_class in classes:
        found.setdefault(ontology_class.id, _term(ontology_class))
    return tuple(found.values())


_DURATION = re.compile(
    r"P(?:(?P<Y>\d+(?:\.\d+)?)Y)?(?:(?P<M>\d+(?:\.\d+)?)M)?(?:(?P<W>\d+(?:\.\d+)?)W)?(?:(?P<D>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:\d+(?:\.\d+)?M)?(?:\d+(?:\.\d+)?S)?)?"
)


def iso_years(duration: str) -> float | None:
    """An ISO 8601 duration ("P6Y3M", "P10D", "P2W") in years; None when it is not one."""
    match = _DURATION.fullmatch(duration.strip())
    if match is None or duration.strip() in ("P", "PT"):
        return None
    part = {name: float(value) if value else 0.0 for name, value in match.groupdict().items()}
    days = part["W"] * 7 + part["D"] + part["h"] / 24
    return part["Y"] + part["M"] / 12 + days / DAYS_PER_YEAR


def _years(time: TimeElement, where: str) -> float | None:
    """The age a time element gives, in years; None for other kinds of time (a class, a date)."""
    if time.WhichOneof("element") != "age":
        return None
    years = iso_years(time.age.iso8601duration)
    if years is None or years > MAX_AGE:
        raise MalformedPacketError(BAD_AGE, where, f"age {time.age.iso8601duration!r} is not a human age")
    return years


def _weeks(time: TimeElement) -> float:
    return time.gestational_age.weeks + time.gestational_age.days / 7


def _onset(packet: Phenopacket, where: str) -> tuple[Term | None, float | None]:
    """The disease's onset, else the earliest onset of an observed feature: a class, or an age in years. An
    onset during gestation is the antenatal class."""
    for disease in packet.diseases:
        if disease.HasField("onset"):
            found = _onset_of(disease.onset, where)
            if found != (None, None):
                return found
    features = [feature for feature in packet.phenotypic_features if not feature.excluded]
    onsets = [_onset_of(feature.onset, where) for feature in features if feature.HasField("onset")]
    candidates = [found for found in onsets if found != (None, None)]
    return min(candidates, key=_onset_start, default=(None, None))


def _onset_of(time: TimeElement, where: str) -> tuple[Term | None, float | None]:
    kind = time.WhichOneof("element")
    if kind == "ontology_class":
        return _term(time.ontology_class), None
    if kind == "gestational_age":
        return Term(ANTENATAL, "Antenatal onset"), None
    return None, _years(time, where)


def _onset_start(onset: tuple[Term | None, float | None]) -> float:
    term, years = onset
    if years is not None:
        return years
    known = ONSET_CLASSES.get(term.id) if term else None
    return known.start if known else math.inf


# --- text -----------------------------------------------------------------------------------------------


def render_text(case: PhenopacketCase) -> str:
    """A short presentation in English: who the patient is, what they have, what they do not have, and when
    it began — "A 6-year-old girl presents with seizures and hypotonia. She does not have microcephaly.
    Onset in infancy." The diagnoses (and so their genes) are never named."""
    subject, noun = _subject(case)
    sentences = [f"{subject} presents with {_listing(case.observed, 'and')}."]
    if case.excluded:
        who = {"female": "She", "male": "He"}.get(case.sex or "", f"The {noun}")
        sentences.append(f"{who} does not have {_listing(case.excluded, 'or')}.")
    onset = _onset_phrase(case)
    if onset:
        sentences.append(f"Onset {onset}.")
    return " ".join(sentences)


# What a patient of each stage of life is called: (female, male, sex unknown).
_NOUNS = {
    "fetus": ("fetus", "fetus", "fetus"),
    "newborn": ("girl", "boy", "newborn"),
    "infant": ("girl", "boy", "infant"),
    "child": ("girl", "boy", "child"),
    "adult": ("woman", "man", "person"),
    "patient": ("patient", "patient", "patient"),
}


def _subject(case: PhenopacketCase) -> tuple[str, str]:
    """The patient as a sentence's subject ("A 6-year-old girl") and the bare noun ("girl")."""
    after = ""
    if case.gestational_age is not None:
        stage, qualifier = "fetus", case.sex
        after = f" at {math.floor(case.gestational_age)} weeks of gestation"
    elif case.age is not None:
        stage, qualifier = _aged(case.age)
    else:
        stage = _stage(case) or "patient"
        qualifier = case.sex if stage in ("fetus", "patient") else None if stage == "child" else stage
    female, male, unknown = _NOUNS[stage]
    noun = female if case.sex == "female" else male if case.sex == "male" else unknown
    described = noun if qualifier in (None, noun) else f"{qualifier} {noun}"
    return f"{_article(described)} {described}{after}", noun


def _aged(years: float) -> tuple[str, str]:
    """(stage, how old): ("newborn", "newborn"), ("infant", "3-month-old"), ("adult", "43-year-old")."""
    if years < NEWBORN_YEARS:
        return "newborn", "newborn"
    if years < 1:
        return "infant", f"{max(1, math.floor(years * 12))}-month-old"
    return ("adult" if years >= ADULT_YEARS else "child"), f"{math.floor(years)}-year-old"


def _stage(case: PhenopacketCase) -> str | None:
    """The stage of life an age class names ("newborn", "infant", "child", "adult", "fetus"); without one, an
    onset in adulthood still says that the patient is an adult."""
    term = case.age_class
    if term is None:
        onset = ONSET_CLASSES.get(case.onset.id) if case.onset else None
        adult_onset = (onset is not None and onset.start >= 16) or (case.onset_age or 0) >= ADULT_YEARS
        return "adult" if adult_onset else None
    known = ONSET_CLASSES.get(term.id)
    if known is None:
        return None
    if known.start < 0:
        return "fetus"
    if known.start == 0:
        return "newborn"
    if known.start < 1:
        return "infant"
    return "child" if known.start < 16 else "adult"


def _onset_phrase(case: PhenopacketCase) -> str | None:
    if case.onset is not None:
        known = ONSET_CLASSES.get(case.onset.id)
        return known.phrase if known else f"described as {_as_written(case.onset.label)}"
    years = case.onset_age
    if years is None or case.gestational_age is not None:  # an age after birth cannot apply to a fetus
        return None
    if years == 0:
        return "at birth"
    if years < NEWBORN_YEARS:
        return "in the neonatal period"
    if years < 1:
        months = max(1, math.floor(years * 12))
        return f"at {months} month{'s' if months > 1 else ''} of age"
    return f"at age {math.floor(years)}"


def _as_written(label: str) -> str:
    """An HPO label inside a sentence: the first letter lower-cased, unless the first word is acronym-like:
    capitals or digits after its first letter ("EEG", "T2", "Dandy-Walker") or a single letter ("T-cell")."""
    first = label.split(" ", 1)[0]
    keeps_case = any(c.isupper() or c.isdigit() for c in first[1:]) or len(first.split("-", 1)[0]) == 1
    return label if keeps_case else label[:1].lower() + label[1:]


def _listing(terms: Sequence[Term], conjunction: str) -> str:
    """ "a, b and c"; "a; b, c and d" when a label has a comma of its own ("high, narrow palate")."""
    items = [_as_written(term.label) for term in terms]
    if len(items) == 1:
        return items[0]
    separator = "; " if any("," in item for item in items) else ", "
    return f"{separator.join(items[:-1])} {conjunction} {items[-1]}"


def _article(phrase: str) -> str:
    """ "An" before a vowel sound: "an adult", "an 8-year-old", "an 11-month-old", "an 18-year-old"."""
    number = re.match(r"\d+", phrase)
    if number:
        digits = number.group()
        return "An" if digits.startswith("8") or digits in ("11", "18") else "A"
    return "An" if phrase[:1].lower() in "aeiou" else "A"


# --- cases and the dataset ------------------------------------------------------------------------------


def to_case(
    case: PhenopacketCase,
    *,
    source: str = SOURCE,
    synonyms: Sequence[str] = (),
    meta: dict[str, Any] | None = None,
) -> Case:
    """The ranked-differential `Case`: the rendered text, the HPO codes, and a gold answer that is the first
    diagnosis, matched by any diagnosis id or label (and `synonyms`)."""
    text = render_text(case)
    ids = [term.id for term in case.diagnoses]
    answers = list(dict.fromkeys([*ids, *(term.label for term in case.diagnoses), *synonyms]))
    return Case(
        id=case.id,
        task="ddx",
        question=text,
        patient=PatientProfile(
            initial_presentation=text,
            findings=[term.label for term in case.observed],
            demographics=Demographics(
                age=math.floor(case.age) if case.age is not None else None, sex=case.sex
            ),
            codes={
                HPO_OBSERVED: [term.id for term in case.observed],
                HPO_EXCLUDED: [term.id for term in case.excluded],
                HPO_ONSET: [onset] if (onset := onset_code(case)) else [],
            },  # the diagnosis is the gold, never the patient's: no method may read it
        ),
        gold=Gold(answer=case.diagnoses[0].label, answers=answers),
        meta={
            "cohort": case.cohort,
            "pmids": list(case.pmids),
            "onset": {"id": case.onset.id, "label": case.onset.label} if case.onset else None,
            "onset_age": case.onset_age,
            "source": source,
            **(meta or {}),
        },
    )


def onset_code(case: PhenopacketCase) -> str | None:
    """The HPO onset class of the illness: the packet's, or the narrowest holding its onset age."""
    if case.onset is not None and case.onset.id in hpo.ONSET_CLASSES:
        return case.onset.id
    return hpo.onset_class(case.onset_age) if case.onset_age is not None else None


def load_phenopackets(path: Path, cohorts: Collection[str] | None = None) -> Dataset:
    """The `phenopackets` dataset of a folder, zip or file; with `cohorts`, only those cohorts."""
    reading = read_phenopackets(path, cohorts)
    cases = [to_case(packet) for packet in reading]
    found = len({case.meta["cohort"] for case in cases})
    return finish("phenopackets", cases, [reading.report], notes=[f"{found} cohorts"])


def phenopackets_loader(cohorts: Collection[str] | None = None) -> Callable[[Path], Dataset]:
    """A dataset loader restricted to `cohorts` (all cohorts when None)."""
    chosen = None if cohorts is None else frozenset(cohorts)
    return partial(load_phenopackets, cohorts=chosen)


def split_cohorts(cohorts: Iterable[str], fraction: float, seed: int = 0) -> tuple[list[str], list[str]]:
    """(development, held-out): `fraction` of the distinct cohorts, rounded, for development and the rest held
    out, both sorted. The order is a hash of the seed and the name, so the split does not depend on the
    order given, and a cohort added later leaves most others on their side."""
    if not 0.0 <= fraction <= 1.0:
        raise InvalidInputError(f"cohort fraction must lie in [0, 1], not {fraction}")
    names = sorted(set(cohorts), key=lambda name: hashlib.sha256(f"{seed}\0{name}".encode()).hexdigest())
    cut = round(fraction * len(names))
    return sorted(names[:cut]), sorted(names[cut:])


register(
    DatasetSpec(
        "phenopackets",
        "Published rare-disease patients (phenopacket-store's GA4GH phenopackets): HPO findings → disease",
        "phenopackets",
        phenopackets_loader(),
    )
)
