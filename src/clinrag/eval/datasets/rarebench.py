"""`rarebench`: the rare-disease cases of RareBench (Chen et al., KDD 2024), told as short presentations
whose gold answer is the diagnosed disease.

RareBench publishes one JSONL file per subset (MME, HMS, LIRICAL, RAMEDIS, PUMCH_ADM), a case per line:
    {"Phenotype": ["HP:0001250", ...], "RareDisease": ["OMIM:300958", "ORPHA:...", "CCRD:..."],
     "Department": "Neurology"}
(`Department` may be missing or null), and two mappings from ids to names, `phenotype_mapping.json` and
`disease_mapping.json` (JSON objects). The dataset's path is one subset file or a folder of them; the
mappings are read from the `mappings` folder, by default the folder the subsets lie in.

Each line becomes a case like a phenopacket's (`phenopackets.to_case`): the text names the phenotypes, the
gold answer is the first named disease, and every disease id and name is accepted — RareBench's names join
an Orphanet and an OMIM name with "/" ("Marfan syndrome/Marfan syndrome type 1"), so each of those is too.
A broken line, or one whose phenotypes or diseases are all missing from the mappings, is skipped and listed
by file and line; ids missing from the mappings are left out and counted in the report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from clinrag.core.errors import DataFormatError
from clinrag.core.files import existing, read_json, read_jsonl, valid_records
from clinrag.core.models import Case
from clinrag.eval.datasets.base import Dataset, DatasetSpec, finish, register
from clinrag.eval.datasets.phenopackets import PhenopacketCase, Term, to_case

PHENOTYPE_MAPPING = "phenotype_mapping.json"
DISEASE_MAPPING = "disease_mapping.json"
SOURCE = "rarebench"

NO_KNOWN_PHENOTYPE = "records with no phenotype in the mapping"
NO_KNOWN_DISEASE = "records with no disease in the mapping"

HpoId = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^HP:\d{7}$")]
DiseaseId = Annotated[str, StringConstraints(strip_whitespace=True, pattern=r"^[A-Z]+:[A-Za-z0-9._-]+$")]


class RareBenchRecord(BaseModel):
    """One line of a RareBench subset."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    phenotypes: list[HpoId] = Field(alias="Phenotype", min_length=1)
    diseases: list[DiseaseId] = Field(alias="RareDisease", min_length=1)
    department: str | None = Field(default=None, alias="Department")


@dataclass(frozen=True)
class RareBenchMappings:
    """RareBench's names: HPO id → phenotype name, disease id (OMIM, ORPHA, CCRD) → disease name."""

    phenotypes: dict[str, str]
    diseases: dict[str, str]

    @classmethod
    def from_folder(cls, folder: str | Path) -> RareBenchMappings:
        folder = existing(folder)
        return cls(_mapping(folder / PHENOTYPE_MAPPING), _mapping(folder / DISEASE_MAPPING))


def _mapping(path: Path) -> dict[str, str]:
    raw = read_json(existing(path))
    if not isinstance(raw, dict) or not all(isinstance(v, str) and v.strip() for v in raw.values()):
        raise DataFormatError(f"{path}: expected a JSON object of ids to non-empty names")
    return {key.strip(): value.strip() for key, value in raw.items()}


def name_variants(name: str) -> list[str]:
    """The names one RareBench disease name joins, itself first: an Orphanet and an OMIM name joined by "/"
    ("Blomstrand lethal chondrodysplasia/Chondrodysplasia, Blomstrand type"), or, for the Chinese list, a
    Chinese name, English names and abbreviations ("腓骨肌萎缩症/Charcot-Marie-Tooth disease; CMT"). A "/"
    inside one name ("Split-Hand/foot malformation", "IgG/IgA/IgM", "type I/IIx") splits nothing."""
    parts = name.split("/")
    joined = len(parts) == 2 or not parts[0][:1].isascii()
    if not joined or not all(_whole_name(part) for part in parts):
        parts = [name]
    variants = [name, *(piece.strip() for part in parts for piece in part.split(";"))]
    found: dict[str, str] = {}
    for variant in variants:
        if variant:
            found.setdefault(variant.casefold(), variant)
    return list(found.values())


def _label(variants: list[str]) -> str:
    """The name a case's gold answer shows: the first English one of a joined name, else the name itself."""
    return next((variant for variant in variants[1:] if variant.isascii()), variants[0])


def _whole_name(part: str) -> bool:
    part = part.strip()
    return len(part) >= 4 and (part[0].isupper() or part[0].isdigit() or not part[0].isascii())


def rarebench_case(
    record: RareBenchRecord, case_id: str, subset: str, mappings: RareBenchMappings
) -> Case | str:
    """The case of one line, or the reason it is skipped."""
    hpo_ids = dict.fromkeys(record.phenotypes)
    observed = tuple(Term(hpo, mappings.phenotypes[hpo]) for hpo in hpo_ids if hpo in mappings.phenotypes)
    if not observed:
        return NO_KNOWN_PHENOTYPE
    ids = list(dict.fromkeys(record.diseases))
    names = {code: name_variants(mappings.diseases[code]) for code in ids if code in mappings.diseases}
    if not names:
        return NO_KNOWN_DISEASE
    named = [Term(code, _label(variants)) for code, variants in names.items()]
    # Unnamed disease ids stay answers (a method may name the id) after the named ones, which give the label.
    diagnoses = (*named, *(Term(code, code) for code in ids if code not in mappings.diseases))
    packet = PhenopacketCase(id=case_id, cohort=subset, observed=observed, diagnoses=diagnoses)
    synonyms = [variant for variants in names.values() for variant in variants]
    return to_case(packet, source=SOURCE, synonyms=synonyms, meta={"department": record.department})


def load_rarebench(path: Path, mappings: str | Path | None = None) -> Dataset:
    """The `rarebench` dataset of one subset file or a folder of `*.jsonl` subsets; `mappings` is the
    folder of the two mapping files (by default the subsets' folder). Case ids are "<subset>-<line>"."""
    path = existing(path)
    files = sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files:
        raise DataFormatError(f"{path}: no RareBench subset (*.jsonl) in this folder")
    names = RareBenchMappings.from_folder(mappings if mappings is not None else files[0].parent)
    cases, readings = [], []
    unnamed_phenotypes: set[str] = set()
    unnamed_diseases: set[str] = set()
    for file in files:
        reading = read_jsonl(file)
        for line, record in valid_records(reading, RareBenchRecord):
            unnamed_phenotypes.update(set(record.phenotypes) - names.phenotypes.keys())
            unnamed_diseases.update(set(record.diseases) - names.diseases.keys())
            case = rarebench_case(record, f"{file.stem}-{line}", file.stem, names)
            if isinstance(case, str):
                reading.report.skip(case, line)
            else:
                cases.append(case)
        readings.append(reading.report)
    notes = [
        f"{len(ids)} {kind} ids not in the mapping, {fate}: {', '.join(sorted(ids)[:10])}"
        for kind, ids, fate in (
            ("phenotype", unnamed_phenotypes, "left out of the text"),
            ("disease", unnamed_diseases, "kept as answer ids only"),
        )
        if ids
    ]
    return finish("rarebench", cases, readings, notes=notes)


def rarebench_loader(mappings: str | Path | None = None) -> Callable[[Path], Dataset]:
    """A dataset loader reading the mappings from `mappings` (by default beside the subsets)."""
    return partial(load_rarebench, mappings=mappings)


register(
    DatasetSpec(
        "rarebench",
        "RareBench rare-disease cases (JSONL of HPO phenotypes → OMIM/Orphanet diseases, with id mappings)",
        "rarebench",
        rarebench_loader(),
    )
)
